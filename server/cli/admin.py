"""`hookwise runs|deliveries|requests ...`: the admin API from the command line, against a
running gateway (`--url`, default `$HOOKWISE_URL` or http://127.0.0.1:8787; the admin token from
`HOOKWISE_ADMIN_TOKEN`, else the config's `gateway.auth.token`: `-c FILE`, `$HOOKWISE_CONFIG`, or
`./hookwise.yaml` when it exists, reading that key only). `events` and `sessions` list the main
sessions' events and the sessions with a transcript; `sessions show KEY` takes any key as is.

Tables for people, `--json` for scripts (one JSON document: the API's items, or its answer).
A bulk retry first counts what it would send back (the API's dry run), then sends it back in
steps, showing a progress bar on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO
from urllib.parse import quote

from .args import CONFIG_ENV, DEFAULT_CONFIG
from .client import DEFAULT_URL, URL_ENV, AdminClient, AdminError, find_token

BULK_STEP = 200
COLUMN_WIDTH = 48

# --- output -------------------------------------------------------------------------------------


def _text(value: Any) -> str:
    """A value of the API as a person reads it, on one line: `-` for none, `true`/`false`, a
    list of plain values comma-separated, anything nested as compact JSON (never a Python repr)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list) and all(
        v is None or isinstance(v, str | int | float) for v in value
    ):
        return ",".join(_text(v) for v in value) or "-"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return " ".join(str(value).split())  # one line, whatever the value holds


def _cell(value: Any) -> str:
    text = _text(value)
    return text if len(text) <= COLUMN_WIDTH else text[: COLUMN_WIDTH - 1] + "…"


def table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]], out: TextIO) -> None:
    """`rows` as aligned columns (header, key) — or a line saying there is nothing."""
    if not rows:
        print("(none)", file=out)
        return
    cells = [[_cell(r.get(key)) for _, key in columns] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, (h, _) in enumerate(columns)]
    print(
        "  ".join(h.ljust(w) for (h, _), w in zip(columns, widths, strict=True)).rstrip(), file=out
    )
    for c in cells:
        print("  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)).rstrip(), file=out)


class Progress:
    """A one-line progress bar on a terminal (nothing when stderr is not one)."""

    def __init__(self, what: str, total: int, stream: TextIO = sys.stderr) -> None:
        self.what, self.total, self.done, self.stream = what, total, 0, stream
        self.live = stream.isatty()
        self.show()

    def advance(self, n: int) -> None:
        self.done += n
        self.show()

    def show(self) -> None:
        if not self.live:
            return
        width = 30
        filled = width * self.done // self.total if self.total else width
        bar = "#" * filled + "-" * (width - filled)
        self.stream.write(f"\r{self.what} [{bar}] {self.done}/{self.total}")
        self.stream.flush()

    def close(self) -> None:
        if self.live:
            self.stream.write("\n")


RUN_COLUMNS = [
    ("RUN", "runId"),
    ("STATE", "state"),
    ("RULE", "rule"),
    ("SESSION", "sessionKey"),
    ("CREATED", "createdAt"),
    ("TRIES", "attempts"),
    ("ERROR", "error"),
]
DELIVERY_COLUMNS = [
    ("DELIVERY", "deliveryId"),
    ("STATE", "state"),
    ("CHANNEL", "channel"),
    ("TO", "to"),
    ("RUN", "runId"),
    ("UPDATED", "updatedAt"),
    ("TRIES", "attempts"),
    ("ERROR", "lastError"),
]
REQUEST_COLUMNS = [
    ("REQUEST", "requestId"),
    ("AT", "at"),
    ("STATUS", "status"),
    ("PATH", "path"),
    ("RULE", "rule"),
    ("CODE", "code"),
    ("EVENT TYPE", "eventType"),
    ("DELIVERY ID", "deliveryId"),
    ("RUNS", "runIds"),
    ("EVENTS", "eventIds"),
]
EVENT_COLUMNS = [
    ("EVENT", "eventId"),
    ("SESSION", "session"),
    ("SOURCE", "source"),
    ("MODE", "mode"),
    ("CREATED", "createdAt"),
    ("CONSUMED", "consumedAt"),
    ("TEXT", "text"),
]
SESSION_COLUMNS = [
    ("SESSION", "sessionKey"),
    ("LAST TURN", "lastTurnAt"),
    ("CHANNEL", "lastChannel"),
    ("TO", "lastTo"),
]
TURN_COLUMNS = [("AT", "createdAt"), ("ROLE", "role"), ("RUN", "runId"), ("CONTENT", "content")]
RETRY_COLUMNS = [("RETRIED", "at"), ("BY", "by"), ("FROM", "fromState"), ("ERROR", "error")]
TOOL_CALL_COLUMNS = [
    ("#", "seq"),
    ("SERVER", "server"),
    ("TOOL", "tool"),
    ("OUTCOME", "outcome"),
    ("MS", "durationMs"),
    ("RESULT BYTES", "resultBytes"),
    ("TRUNCATED", "truncated"),
]

MODEL_CALL_COLUMNS = [
    ("TRY", "attempt"),
    ("#", "seq"),
    ("MODEL", "model"),
    ("OUTCOME", "outcome"),
    ("ERROR CLASS", "errorClass"),
    ("MS", "durationMs"),
    ("IN", "inputTokens"),
    ("OUT", "outputTokens"),
    ("CACHE READ", "cacheReadTokens"),
    ("CACHE WRITE", "cacheWriteTokens"),
    ("COST", "cost"),
]


def usage_line(usage: dict[str, Any]) -> str:
    """A run's `usage` on one line: `3 calls, 120 in, 40 out, 900 cache read, cost 0.0021`."""
    parts = [f"{usage.get('calls', 0)} call(s)"]
    for key, label in (
        ("inputTokens", "in"),
        ("outputTokens", "out"),
        ("cacheReadTokens", "cache read"),
        ("cacheWriteTokens", "cache write"),
    ):
        if usage.get(key) is not None:
            parts.append(f"{usage[key]} {label}")
    cost = usage.get("cost")
    parts.append("cost -" if cost is None else f"cost {cost:.6g}")
    return ", ".join(parts)


# --- commands ------------------------------------------------------------------------------------


def _client(args: argparse.Namespace) -> AdminClient:
    url = args.url or os.environ.get(URL_ENV) or DEFAULT_URL
    named = args.config is not None or bool(os.environ.get(CONFIG_ENV))
    config = args.config or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG
    return AdminClient(url, find_token(config, explicit=named))


def _filters(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    return {name: getattr(args, name, None) for name in names}


def _emit(args: argparse.Namespace, data: Any, show: Callable[[TextIO], None]) -> None:
    if args.json:
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        show(sys.stdout)


def _listing(path: str, columns: list[tuple[str, str]], *names: str) -> Callable[..., int]:
    def command(args: argparse.Namespace) -> int:
        with _client(args) as client:
            filters = _filters(args, *names)
            if getattr(args, "run", None):
                filters["runId"] = args.run
            items = list(client.pages(path, limit=args.limit or None, **filters))
        _emit(args, items, lambda out: table(items, columns, out))
        return 0

    return command


APPROVAL_COLUMNS = [
    ("APPROVAL", "approvalId"),
    ("TOOL", "tool"),
    ("STATE", "state"),
    ("BY", "decidedBy"),
    ("VIA", "via"),
    ("AT", "decidedAt"),
    ("ARGS SEEN", "argumentsDigest"),
]
REFUSAL_COLUMNS = [
    ("APPROVAL", "approvalId"),
    ("BY", "by"),
    ("VIA", "via"),
    ("AT", "at"),
    ("WHY", "reason"),
]


def cmd_runs_show(args: argparse.Namespace) -> int:
    with _client(args) as client:
        run = client.get(f"/api/runs/{args.run_id}")["run"]

    def show(out: TextIO) -> None:
        for key, value in run.items():
            if key == "usage":
                print(f"{key:>15}: {usage_line(value)}", file=out)
            elif key not in (
                "deliveries",
                "retries",
                "toolCalls",
                "modelCalls",
                "approvals",
                "refusedDecisions",
            ):
                print(f"{key:>15}: {_text(value) if key != 'message' else value}", file=out)
        print("\ndeliveries:", file=out)
        table(run["deliveries"], DELIVERY_COLUMNS, out)
        print("\nretries:", file=out)
        table(run["retries"], RETRY_COLUMNS, out)
        print("\nmodel calls:", file=out)
        table(run.get("modelCalls", []), MODEL_CALL_COLUMNS, out)
        print("\ntool calls:", file=out)
        table(run.get("toolCalls", []), TOOL_CALL_COLUMNS, out)
        if run.get("approvals"):
            print("\napprovals:", file=out)
            table(run["approvals"], APPROVAL_COLUMNS, out)
        if run.get("refusedDecisions"):
            print("\nrefused decisions:", file=out)
            table(run["refusedDecisions"], REFUSAL_COLUMNS, out)

    _emit(args, run, show)
    return 0


def cmd_sessions_show(args: argparse.Namespace) -> int:
    """One session's transcript, oldest turn first; the key is data (`/`, `#`, spaces)."""
    path = "/api/sessions/" + quote(args.session_key, safe="")
    with _client(args) as client:
        turns = list(client.pages(path, limit=args.limit or None))
    turns.reverse()
    answer = {"sessionKey": args.session_key, "items": turns}

    def show(out: TextIO) -> None:
        print(f"session: {args.session_key}", file=out)
        table(turns, TURN_COLUMNS, out)

    _emit(args, answer, show)
    return 0


def _retry(kind: str, plural: str) -> Callable[[argparse.Namespace], int]:
    """`<plural> retry ID...` sends those back; with filters (or `--all`), every failed one that
    matches, in steps with a progress bar; `--dry-run` only counts."""

    def command(args: argparse.Namespace) -> int:
        with _client(args) as client:
            if args.ids:
                answers = [client.post(f"/api/{plural}/{i}/retry") for i in args.ids]

                def show(out: TextIO) -> None:
                    for i in args.ids:
                        print(f"{kind} {i}: queued again", file=out)

                _emit(args, answers, show)
                return 0
            names = ("state", "rule", "channel", "session", "since", "until")
            body = {k: v for k, v in _filters(args, *names).items() if v is not None}
            if not body and not args.all:
                raise AdminError(f"name {plural} to retry, or filters, or --all", "usage")
            total = client.post(f"/api/{plural}/retry", {**body, "dryRun": True})["count"]
            if args.dry_run:
                answer = {"ok": True, "count": total, "dryRun": True}
                _emit(
                    args, answer, lambda out: print(f"{total} {plural} would be retried", file=out)
                )
                return 0
            sent = 0
            progress = Progress(f"retrying {plural}", total)
            try:
                # at most as many steps as the count asked for: work that fails again at once
                # is not picked up twice
                for _ in range(-(-total // BULK_STEP)):
                    step = client.post(f"/api/{plural}/retry", {**body, "limit": BULK_STEP})
                    sent += step["count"]
                    progress.advance(step["count"])
                    if step["count"] < BULK_STEP:
                        break
            finally:
                progress.close()
            answer = {"ok": True, "count": sent, "dryRun": False}
            _emit(args, answer, lambda out: print(f"{sent} {plural} queued again", file=out))
            return 0

    return command


def guarded(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """`func`, with an `AdminError` as one line on stderr and exit 1."""

    def command(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except AdminError as e:
            suffix = f" ({e.code})" if e.code not in ("error", "usage") else ""
            print(f"hookwise: {e}{suffix}", file=sys.stderr)
            return 1

    return command


def cmd_requests_replay(args: argparse.Namespace) -> int:
    with _client(args) as client:
        path = f"/api/requests/{args.request_id}/replay" + ("?dryRun=true" if args.dry_run else "")
        answer = client.post(path)

    def show(out: TextIO) -> None:
        if args.dry_run:
            print(f"rule: {_cell(answer['rule'])}; skipped: {answer['skipped']}", file=out)
            for action in answer["actions"]:
                print(f"{action['kind']}: {json.dumps(action['fields'])}", file=out)
            return
        made = answer["runIds"] + answer["eventIds"]
        print(
            f"replayed as {answer['requestId']} (HTTP {answer['status']}): {_cell(made)}",
            file=out,
        )

    _emit(args, answer, show)
    return 0


# --- the parser -----------------------------------------------------------------------------------


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", help=f"the gateway (default ${URL_ENV} or {DEFAULT_URL})")
    p.add_argument(
        "-c",
        "--config",
        metavar="FILE",
        help=f"config file whose gateway.auth.token to use, when $HOOKWISE_ADMIN_TOKEN is unset "
        f"(default ${CONFIG_ENV}, else {DEFAULT_CONFIG} when it exists; only that key is read)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _window(p: argparse.ArgumentParser) -> None:
    p.add_argument("--since", metavar="TIME", help="created at or after (ISO-8601, UTC default)")
    p.add_argument("--until", metavar="TIME", help="created before (ISO-8601)")


def _list_parser(sub: Any, help_text: str) -> argparse.ArgumentParser:
    p = sub.add_parser("list", help=help_text, description=help_text + ", newest first.")
    _common(p)
    _window(p)
    p.add_argument("--limit", type=int, default=50, help="how many (default 50; 0: all)")
    return p


def _retry_parser(sub: Any, plural: str, states: str) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "retry",
        help=f"send failed {plural} back to the queue",
        description=(
            f"Send {plural} back to the queue (only {states} ones): the ids given, or every one "
            "the filters pick (--all: every one); attempts are kept and each retry is recorded "
            "with your user name."
        ),
    )
    _common(p)
    _window(p)
    p.add_argument("ids", nargs="*", metavar="ID")
    p.add_argument("--state", choices=states.split(" or "))
    p.add_argument("--channel")
    p.add_argument("--all", action="store_true", help="every failed one (no filter)")
    p.add_argument("--dry-run", action="store_true", help="only count what would be retried")
    return p


def add_cli(subparsers: Any) -> None:
    """Add `runs`, `deliveries`, `requests`, `events` and `sessions` to the command line."""
    runs = subparsers.add_parser("runs", help="agent runs of a running gateway")
    sub = runs.add_subparsers(dest="runs_command", metavar="COMMAND", required=True)
    p = _list_parser(sub, "list runs")
    p.add_argument(
        "--state", choices=["queued", "held", "running", "succeeded", "failed", "timed_out"]
    )
    for name in ("rule", "session", "channel"):
        p.add_argument(f"--{name}")
    p.set_defaults(
        func=guarded(
            _listing(
                "/api/runs", RUN_COLUMNS, "state", "rule", "session", "channel", "since", "until"
            )
        )
    )
    p = sub.add_parser("show", help="one run with its deliveries and retries")
    _common(p)
    p.add_argument("run_id", metavar="RUN_ID")
    p.set_defaults(func=guarded(cmd_runs_show))
    p = _retry_parser(sub, "runs", "failed or timed_out")
    p.add_argument("--rule")
    p.add_argument("--session")
    p.set_defaults(func=guarded(_retry("run", "runs")))

    deliveries = subparsers.add_parser("deliveries", help="outgoing messages of a running gateway")
    sub = deliveries.add_subparsers(dest="deliveries_command", metavar="COMMAND", required=True)
    p = _list_parser(sub, "list deliveries")
    p.add_argument("--state", choices=["pending", "sent", "skipped", "failed"])
    p.add_argument("--channel")
    p.add_argument("--run", metavar="RUN_ID")
    p.set_defaults(
        func=guarded(
            _listing("/api/deliveries", DELIVERY_COLUMNS, "state", "channel", "since", "until")
        )
    )
    p = _retry_parser(sub, "deliveries", "failed")
    p.set_defaults(func=guarded(_retry("delivery", "deliveries")))

    requests = subparsers.add_parser("requests", help="the request log of a running gateway")
    sub = requests.add_subparsers(dest="requests_command", metavar="COMMAND", required=True)
    p = _list_parser(sub, "list logged requests (never a payload or a token)")
    p.add_argument("--status", type=int)
    p.add_argument("--rule")
    p.set_defaults(
        func=guarded(_listing("/api/requests", REQUEST_COLUMNS, "status", "rule", "since", "until"))
    )
    p = sub.add_parser(
        "replay",
        help="run a kept request through today's rules (kept by default: hooks.retainPayloads)",
        description=(
            "Run a kept request through the rules as they are now and dispatch what they make "
            "(--dry-run: print the actions, store nothing)."
        ),
    )
    _common(p)
    p.add_argument("request_id", metavar="REQUEST_ID")
    p.add_argument("--dry-run", action="store_true", help="print the actions, store nothing")
    p.set_defaults(func=guarded(cmd_requests_replay))

    events = subparsers.add_parser("events", help="system events of a running gateway's sessions")
    sub = events.add_subparsers(dest="events_command", metavar="COMMAND", required=True)
    p = _list_parser(sub, "list system events (hook wakes, run summaries)")
    p.add_argument("--session", help="only this session's (e.g. main)")
    p.set_defaults(
        func=guarded(_listing("/api/events", EVENT_COLUMNS, "session", "since", "until"))
    )

    sessions = subparsers.add_parser("sessions", help="sessions with a transcript")
    sub = sessions.add_subparsers(dest="sessions_command", metavar="COMMAND", required=True)
    p = sub.add_parser("list", help="list sessions", description="List sessions, by key.")
    _common(p)
    p.add_argument("--limit", type=int, default=50, help="how many (default 50; 0: all)")
    p.set_defaults(func=guarded(_listing("/api/sessions", SESSION_COLUMNS)))
    p = sub.add_parser(
        "show",
        help="one session's transcript",
        description="One session's transcript, oldest turn first. The key is given as it is "
        "(quote it for the shell: 'hook:github:owner/name#2').",
    )
    _common(p)
    p.add_argument("session_key", metavar="KEY")
    p.add_argument("--limit", type=int, default=0, help="the newest N turns (default 0: all)")
    p.set_defaults(func=guarded(cmd_sessions_show))
