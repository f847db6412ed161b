"""`hookwise pause|resume|queues`: lanes of a running gateway through its admin API.

    hookwise pause mapping github --reason "deploy"   # hold its runs and wakes
    hookwise pause path stripe                        # every mapping on /hooks/stripe
    hookwise pause agent ops
    hookwise resume mapping github                    # held runs go back, in order
    hookwise queues                                   # each lane: queued, held, oldest, paused

The pause is recorded with your user name (and the client address) and kept by the store.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from .admin import _client, _common, _emit, guarded, table

QUEUE_COLUMNS = [
    ("AGENT", "agent"),
    ("MAPPING", "mapping"),
    ("QUEUED", "queued"),
    ("HELD", "held"),
    ("OLDEST S", "oldestSeconds"),
    ("PAUSED", "paused"),
]
PAUSE_COLUMNS = [("KIND", "kind"), ("NAME", "name"), ("BY", "by"), ("AT", "at"), ("WHY", "reason")]
KINDS = ("mapping", "path", "agent")


def cmd_pause(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"kind": args.kind, "name": args.name}
    if args.reason:
        body["reason"] = args.reason
    with _client(args) as client:
        answer = client.post("/api/pause", body)

    def show(out: TextIO) -> None:
        print(
            f"paused {args.kind} {', '.join(answer['paused'])}: "
            f"{answer['held']} queued run(s) held",
            file=out,
        )

    _emit(args, answer, show)
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    with _client(args) as client:
        answer = client.post("/api/resume", {"kind": args.kind, "name": args.name})

    def show(out: TextIO) -> None:
        print(
            f"resumed {args.kind} {', '.join(answer['resumed'])}: "
            f"{answer['released']} run(s) back in the queue",
            file=out,
        )

    _emit(args, answer, show)
    return 0


def cmd_queues(args: argparse.Namespace) -> int:
    with _client(args) as client:
        answer = client.get("/api/queues")
    lanes = [{**lane, "oldestSeconds": _seconds(lane["oldestSeconds"])} for lane in answer["lanes"]]

    def show(out: TextIO) -> None:
        table(lanes, QUEUE_COLUMNS, out)
        if answer["pauses"]:
            print("\npaused:", file=out)
            table(answer["pauses"], PAUSE_COLUMNS, out)

    _emit(args, answer, show)
    return 0


def _seconds(value: float | None) -> str | None:
    return None if value is None else f"{value:.1f}"


def add_cli(subparsers: Any) -> None:
    """Add `pause`, `resume` and `queues` to the `hookwise` command line."""
    for name, func, what in (
        ("pause", cmd_pause, "hold the runs and wakes of a mapping, a hook path or an agent"),
        ("resume", cmd_resume, "release what a pause held, in order"),
    ):
        p = subparsers.add_parser(name, help=what, description=what[0].upper() + what[1:] + ".")
        _common(p)
        p.add_argument("kind", choices=KINDS)
        p.add_argument("name", help="the mapping id, the hook path (e.g. github) or the agent id")
        if name == "pause":
            p.add_argument("--reason", help="why (recorded with the pause)")
        p.set_defaults(func=guarded(func))
    p = subparsers.add_parser(
        "queues",
        help="each lane's queued and held runs and the pauses",
        description="Each lane (agent, mapping): runs queued and held, the oldest's age, paused.",
    )
    _common(p)
    p.set_defaults(func=guarded(cmd_queues))
