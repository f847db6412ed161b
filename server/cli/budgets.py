"""`hookwise budgets list|raise|release`: the budgets of a running gateway through its admin API.

    hookwise budgets list                                  # limits, spend in the window, held
    hookwise budgets raise mapping github --tokens 2M --for 2h
    hookwise budgets raise agent main --cost 50 --until 2026-12-01T00:00:00Z
    hookwise budgets release agent main                    # its held runs start now
    hookwise budgets release mapping github --sender 'github#1'   # one sender (`by: sender`)

A raise replaces the limits it names until its end, in every process; a release lets the held
runs start and waives the budget until the end of its window (as `hookwise resume` does for a
lane held by its budget). Both are recorded with your user name. A budget by sender lists its
senders under it (the most spent, and every held one); its release frees one sender
(`--sender`) or, without it, every held one.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO
from urllib.parse import quote

from .admin import _client, _common, _emit, guarded, table

COLUMNS = [
    ("KIND", "kind"),
    ("NAME", "name"),
    ("WINDOW", "window"),
    ("TOKENS", "tokens"),
    ("COST", "cost"),
    ("RAISED", "raised"),
    ("HELD", "held"),
]
KINDS = ("mapping", "agent")


def _row(b: dict[str, Any]) -> dict[str, Any]:
    """A budget as a line: spent / limit of each, the raise's end."""

    def of(spent: float, limit: float | None) -> str:
        return "-" if limit is None else f"{spent:g}/{limit:g}"

    raised = b["raised"]
    return {
        **b,
        "window": f"{b['perSeconds']:g}s {b['window']}",
        "tokens": of(b["spentTokens"], b["limitTokens"]),
        "cost": of(b["spentCost"], b["limitCost"]),
        "raised": f"until {raised['until']}" if raised else "",
    }


def _sender_rows(b: dict[str, Any]) -> list[dict[str, Any]]:
    """The senders of a budget by sender, each a line under it (`mapping-sender`, `name/key`)."""
    return [
        _row(
            {
                **b,
                "kind": f"{b['kind']}-sender",
                "name": f"{b['name']}/{s['sender']}",
                "spentTokens": s["spentTokens"],
                "spentCost": s["spentCost"],
                "raised": None,
                "held": s["held"],
            }
        )
        for s in b.get("senders") or ()
    ]


def _path(args: argparse.Namespace, action: str) -> str:
    path = f"/api/budgets/{args.kind}/{quote(args.name, safe='')}/{action}"
    sender = getattr(args, "sender", None)
    return path if sender is None else f"{path}?sender={quote(sender, safe='')}"


def cmd_list(args: argparse.Namespace) -> int:
    with _client(args) as client:
        answer = client.get("/api/budgets")

    def show(out: TextIO) -> None:
        rows = [r for b in answer["items"] for r in (_row(b), *_sender_rows(b))]
        table(rows, COLUMNS, out)

    _emit(args, answer, show)
    return 0


def cmd_raise(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {}
    if args.tokens is not None:
        body["tokens"] = args.tokens
    if args.cost is not None:
        body["cost"] = args.cost
    if args.until is not None:
        body["until"] = args.until
    if args.for_ is not None:
        body["for"] = args.for_
    with _client(args) as client:
        answer = client.post(_path(args, "raise"), body)

    def show(out: TextIO) -> None:
        b = answer["budget"]
        print(
            f"raised {b['kind']} {b['name']} until {b['raised']['until']}: "
            f"tokens {_row(b)['tokens']}, cost {_row(b)['cost']}",
            file=out,
        )

    _emit(args, answer, show)
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    with _client(args) as client:
        answer = client.post(_path(args, "release"), {})

    def show(out: TextIO) -> None:
        b = answer["budget"]
        senders = answer.get("senders")
        if senders is not None:
            print(
                f"released {b['kind']} {b['name']} sender(s) {', '.join(senders)}: "
                f"{answer['released']} run(s) back in the queue, waived for their window",
                file=out,
            )
            return
        print(
            f"released {b['kind']} {b['name']}: {answer['released']} run(s) back in the queue, "
            f"its budget waived until {b['waivedUntil']}",
            file=out,
        )

    _emit(args, answer, show)
    return 0


def add_cli(subparsers: Any) -> None:
    """Add `budgets list|raise|release` to the `hookwise` command line."""
    top = subparsers.add_parser(
        "budgets",
        help="budgets: spend, raise, release",
        description="The budgets of mappings and agents: spend in the window, raise, release.",
    )
    sub = top.add_subparsers(dest="budgets_command", metavar="COMMAND", required=True)
    p = sub.add_parser("list", help="each budget: limits, spend in its window, raised, held")
    _common(p)
    p.set_defaults(func=guarded(cmd_list))
    p = sub.add_parser("raise", help="raise a budget's limits for a while")
    _common(p)
    p.add_argument("kind", choices=KINDS)
    p.add_argument("name", help="the mapping id or the agent id")
    p.add_argument("--tokens", help="the raised token limit: 3000, 500K, 2M")
    p.add_argument("--cost", type=float, help="the raised cost limit")
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--until", help="until when (ISO 8601, e.g. 2026-12-01T00:00:00Z)")
    when.add_argument("--for", dest="for_", metavar="DURATION", help="for how long: 30m, 2h, 1d")
    p.set_defaults(func=guarded(cmd_raise))
    p = sub.add_parser("release", help="release the runs a budget holds (waived for the window)")
    _common(p)
    p.add_argument("kind", choices=KINDS)
    p.add_argument("name", help="the mapping id or the agent id")
    p.add_argument(
        "--sender", help="a budget by sender: release this sender only (e.g. 'github#1')"
    )
    p.set_defaults(func=guarded(cmd_release))
