"""Alerts benchmark: what one evaluation round of the `alerts:` rules costs the store.

    .venv/bin/python bench/alerts.py [--rows 20000] [--rounds 20] [--store sqlite|postgresql|URL]

A fresh store is filled with `--rows` deliveries (a third failed on `slack`, the rest sent on
other channels), `--rows` queued runs of two mappings, and `--rows / 4` request-log lines of which
half are `401 invalid_signature` on `/hooks/github`, all inside the rules' windows; then one rule
of each kind (eight) is evaluated `--rounds` times by `AlertEvaluator.evaluate_once` (the first
round opens the alerts and plans their notifications, the next ones count them). A check reads
at most 500 rows through an index, so a round's cost should not grow with `--rows`.

Printed: milliseconds per round (first, median of the others), and per rule (median of the
rounds after the first). Figures are printed, never asserted; the last line is `BENCH_JSON
{...}`. On a shared, busy machine they are indicative only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._store import MakeStore, StoreKind, add_store_option, bench_run
from hookwise.engine.config.alerts import AlertsConfig
from hookwise.engine.config.convert import structure
from hookwise.server.alerts.evaluator import AlertEvaluator
from hookwise.server.alerts.kinds import Look, evaluate
from hookwise.server.store.base import AcceptOp, NewRun, RequestLogEntry
from hookwise.server.store.records import NewDelivery

RULES = [
    {"kind": "deliveries_failing", "channel": "slack"},
    {"kind": "runs_failing", "mapping": "github"},
    {"kind": "dead_letters"},
    {"kind": "queue_age", "queue": "runs", "threshold": 1},
    {"kind": "breaker_open"},
    {"kind": "budget_crossed"},
    {"kind": "runs_held"},
    {"kind": "signature_failures", "path": "github"},
]
BATCH = 500


def _run(n: int) -> NewRun:
    return bench_run(n, message="event", rule_id="github" if n % 2 else "stripe")


def _delivery(n: int) -> NewDelivery:
    failed = n % 3 == 0
    return NewDelivery(
        delivery_id=f"dl-{n:07d}",
        text="a reply",
        state="failed" if failed else "sent",
        channel="slack" if failed else ("telegram" if n % 2 else "discord"),
        to="C1",
        last_error="slack answered 503" if failed else None,
    )


def _log(n: int, now: float) -> RequestLogEntry:
    bad = n % 2 == 0
    return RequestLogEntry(
        at=now,
        path="/hooks/github" if bad else "/hooks/stripe",
        status=401 if bad else 202,
        client="10.0.0.1",
        size=100,
        code="invalid_signature" if bad else None,
    )


async def _fill(store: Any, rows: int, now: float) -> None:
    for start in range(0, rows, BATCH):
        ids = range(start, min(rows, start + BATCH))
        for n in range(start // 4, (start + len(ids)) // 4):
            store.log_request(_log(n, now))
        await store.accept(
            AcceptOp(
                status=202,
                body=b"{}",
                log=RequestLogEntry(at=now, path="/hooks/agent", status=202, client=None, size=1),
                runs=tuple(_run(n) for n in ids),
                deliveries=tuple(_delivery(n) for n in ids),
                now=now,
            )
        )


async def _measure(make: MakeStore, rows: int, rounds: int) -> dict[str, Any]:
    store = make()
    await store.open()
    try:
        now = time.time()
        await _fill(store, rows, now - 60)
        config = structure({"notify": ["telegram:42"], "rules": RULES}, AlertsConfig)
        evaluator = AlertEvaluator(store, config, shared=False)
        per_round = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            await evaluator.evaluate_once()
            per_round.append((time.perf_counter() - t0) * 1000)
        per_rule: dict[str, list[float]] = {}
        for _ in range(max(1, rounds - 1)):
            look = Look(store, time.time())
            for rule in config.rules:
                t0 = time.perf_counter()
                await evaluate(rule, look)
                per_rule.setdefault(rule.kind, []).append((time.perf_counter() - t0) * 1000)
        opened = len(await store.active_alerts())
    finally:
        await store.close()
    return {
        "first_round_ms": round(per_round[0], 2),
        "round_ms_median": round(statistics.median(per_round[1:] or per_round), 2),
        "rule_ms_median": {k: round(statistics.median(v), 2) for k, v in per_rule.items()},
        "alerts_open": opened,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=20)
    add_store_option(parser)
    args = parser.parse_args()
    kind = StoreKind.parse(args.store)
    if kind is None:
        return 2
    with kind.fresh(pool_size=4) as make:
        result = asyncio.run(_measure(make, args.rows, args.rounds))
    store = kind.name
    print(
        f"store {store}, {args.rows} rows, {len(RULES)} rules, {result['alerts_open']} alerts open"
    )
    print(f"first round (opens, plans notifications): {result['first_round_ms']:.1f} ms")
    print(f"next rounds (median):                     {result['round_ms_median']:.1f} ms")
    for kind, ms in result["rule_ms_median"].items():
        print(f"  {kind:<20} {ms:>7.2f} ms")
    print("BENCH_JSON " + json.dumps({"store": store, "rows": args.rows, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
