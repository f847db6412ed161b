"""`hookwise approvals list|approve|deny`: tool calls waiting for a person, through the admin API.

    hookwise approvals list                 # pending ones, oldest first
    hookwise approvals list --state denied  # or approved, timed_out; --run RUN_ID
    hookwise approvals approve APPROVAL_ID  # the run resumes and makes the call
    hookwise approvals deny APPROVAL_ID     # the model gets an error result naming the denial

The decision is recorded with your user name (and the client address), via `api`.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from .admin import _client, _common, _emit, guarded, table

COLUMNS = [
    ("APPROVAL", "approvalId"),
    ("RUN", "runId"),
    ("TOOL", "tool"),
    ("STATE", "state"),
    ("RULE", "rule"),
    ("CREATED", "createdAt"),
    ("EXPIRES", "expiresAt"),
    ("BY", "decidedBy"),
]
STATES = ("pending", "approved", "denied", "timed_out")


def cmd_list(args: argparse.Namespace) -> int:
    with _client(args) as client:
        answer = client.get("/api/approvals", state=args.state, runId=args.run)
    items = [{**a, "tool": f"{a['server']}.{a['tool']}"} for a in answer["items"]]
    _emit(args, answer["items"], lambda out: table(items, COLUMNS, out))
    return 0


def _decide(what: str) -> Any:
    def command(args: argparse.Namespace) -> int:
        with _client(args) as client:
            answer = client.post(f"/api/approvals/{args.approval_id}/{what}")

        def show(out: TextIO) -> None:
            a = answer["approval"]
            then = "the run resumes" if answer["resumed"] else "other calls of its run still wait"
            print(f"{a['state']} {a['server']}.{a['tool']} of run {a['runId']}: {then}", file=out)

        _emit(args, answer, show)
        return 0

    return command


def add_cli(subparsers: Any) -> None:
    """Add `approvals list|approve|deny` to the `hookwise` command line."""
    p = subparsers.add_parser(
        "approvals",
        help="tool calls waiting for a person's approval",
        description="List, approve or deny tool calls that wait for a person's approval.",
    )
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = sub.add_parser("list", help="approvals (pending ones unless --state)")
    _common(listing)
    listing.add_argument("--state", choices=STATES, default="pending")
    listing.add_argument("--run", help="only approvals of this run")
    listing.set_defaults(func=guarded(cmd_list))
    for name, what in (("approve", "approve: the call is made"), ("deny", "deny: it is not")):
        q = sub.add_parser(name, help=what)
        _common(q)
        q.add_argument("approval_id")
        q.set_defaults(func=guarded(_decide(name)))
