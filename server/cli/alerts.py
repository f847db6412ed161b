"""`hookwise alerts list|show|ack|retry`: the alerts of a running gateway through its admin API.

hookwise alerts list --state open        # open, acknowledged or resolved; newest first
hookwise alerts show ALERT_ID            # with the requests, runs and deliveries behind it
hookwise alerts ack ALERT_ID             # recorded with your user name and address
hookwise alerts retry ALERT_ID           # the failed runs and deliveries behind it, again
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO
from urllib.parse import quote

from .admin import _client, _common, _emit, _list_parser, _listing, _text, guarded, table

ALERT_COLUMNS = [
    ("ALERT", "alertId"),
    ("RULE", "rule"),
    ("KEY", "key"),
    ("STATE", "state"),
    ("SEEN", "seen"),
    ("OPENED", "openedAt"),
    ("RESOLVED", "resolvedAt"),
    ("SUMMARY", "summary"),
]
ITEM_COLUMNS = {
    "requests": [("REQUEST", "requestId"), ("AT", "at"), ("PATH", "path"), ("STATUS", "status")],
    "runs": [("RUN", "runId"), ("RULE", "rule"), ("STATE", "state"), ("ERROR", "error")],
    "deliveries": [
        ("DELIVERY", "deliveryId"),
        ("CHANNEL", "channel"),
        ("STATE", "state"),
        ("ATTEMPTS", "attempts"),
        ("ERROR", "lastError"),
    ],
}
_LISTS = ("requests", "runs", "deliveries", "notifications")


def _path(alert_id: str, action: str = "") -> str:
    return "/api/alerts/" + quote(alert_id, safe="") + action


def cmd_show(args: argparse.Namespace) -> int:
    with _client(args) as client:
        alert = client.get(_path(args.alert_id))["alert"]

    def show(out: TextIO) -> None:
        for key, value in alert.items():
            if key not in _LISTS and not key.endswith("Ids"):
                print(f"{key:>12}: {_text(value)}", file=out)
        for name in _LISTS:
            print(f"\n{name}:", file=out)
            table(alert[name], ITEM_COLUMNS.get(name, ITEM_COLUMNS["deliveries"]), out)

    _emit(args, alert, show)
    return 0


def cmd_ack(args: argparse.Namespace) -> int:
    with _client(args) as client:
        answer = client.post(_path(args.alert_id, "/ack"))
    alert = answer["alert"]
    _emit(
        args,
        answer,
        lambda out: print(
            f"alert {alert['alertId']}: {alert['state']} by {alert['ackedBy']}", file=out
        ),
    )
    return 0


def cmd_retry(args: argparse.Namespace) -> int:
    with _client(args) as client:
        answer = client.post(_path(args.alert_id, "/retry"))

    def show(out: TextIO) -> None:
        print(
            f"alert {args.alert_id}: {answer['runs']} run(s) and {answer['deliveries']}"
            f" delivery(ies) queued again; {answer['notRetryable']} not retryable",
            file=out,
        )

    _emit(args, answer, show)
    return 0


def add_cli(subparsers: Any) -> None:
    """Add `alerts list|show|ack|retry` to the `hookwise` command line."""
    alerts = subparsers.add_parser("alerts", help="alerts of a running gateway")
    sub = alerts.add_subparsers(dest="alerts_command", metavar="COMMAND", required=True)
    p = _list_parser(sub, "list alerts")
    p.add_argument("--state", choices=("open", "acknowledged", "resolved"))
    p.add_argument("--rule", help="only alerts of this rule")
    p.set_defaults(func=guarded(_listing("/api/alerts", ALERT_COLUMNS, "state", "rule")))
    for name, func, what in (
        ("show", cmd_show, "one alert, with the requests, runs and deliveries behind it"),
        ("ack", cmd_ack, "acknowledge an alert (recorded with your user name)"),
        ("retry", cmd_retry, "send the failed runs and deliveries behind an alert back"),
    ):
        p = sub.add_parser(name, help=what, description=what[0].upper() + what[1:] + ".")
        _common(p)
        p.add_argument("alert_id", metavar="ALERT_ID")
        p.set_defaults(func=guarded(func))
