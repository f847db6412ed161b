"""Budget benchmark: what the budget check costs each run before it starts.

    .venv/bin/python bench/budgets.py [--runs 400] [--records 20000] [--store sqlite|URL]

`Budgets.admit` (what each claimed run goes through, `hookwise.server.runtime.budgets`) is timed
for `--runs` runs against a store holding `--records` model-call records inside the window of
the mapping and of the agent the runs belong to, three ways: no budget configured (the check
returns at once), a mapping's budget (one waiver read, one spend sum), and a mapping's and an
agent's (two of each). The budgets are never reached, so every run is admitted: the figure is
the check itself. Each budgeted way is timed twice: `records` sums the model-call records of
the window, as the check did before the running totals (the query `Store.spend` still uses
when a run's own records are left out), and `totals` reads the running totals (`budget_usage`,
migration 0025), as the check does now. `mapping budget by sender` is a mapping's budget
`by: sender` (migration 0026): the run's sender's spend, one of `--senders` senders the records
are spread over, read from the running totals of that sender. The store is a fresh SQLite file unless `--store` names a PostgreSQL URL (a
fresh schema, dropped afterwards). Figures are printed, never asserted; the last line is
`BENCH_JSON {...}`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.accounting import drop_schema, open_store  # noqa: E402
from hookwise.engine.config.budgets import BudgetConfig  # noqa: E402
from hookwise.engine.config.durations import Duration  # noqa: E402
from hookwise.engine.config.prices import PerTokens  # noqa: E402
from hookwise.server.runtime.budgets import Budgets  # noqa: E402
from hookwise.server.store.base import RunRecord  # noqa: E402
from hookwise.server.store.modelcalls import ModelCallRecord  # noqa: E402

BIG = BudgetConfig(tokens=PerTokens(10**12), per=Duration(86400))
BY_SENDER = BudgetConfig(tokens=PerTokens(10**12), per=Duration(86400), by="sender")


def run(i: int) -> RunRecord:
    now = time.time()
    return RunRecord(
        i, f"run-{i}", "hook:b", "b", "m", "metered", "running", "now", False, "last",
        None, None, None, None, None, False, 1, now, now, None, None, None, None, None, None,
    )  # fmt: skip


async def fill(store: Any, records: int, senders: int) -> None:
    now = time.time()
    batch = []
    for i in range(records):
        rule = "metered" if i % 2 == 0 else "other"
        fields = (f"old-{i}", 1, 1, "fake/m", "main", rule, "ok", None, None, None)
        tail = (now - (i % 3600), 10.0, 100, 20, None, None, 0.001, f"hmac#{i % senders}")
        batch.append(ModelCallRecord(*fields, *tail))
        if len(batch) == 1000:
            await store.record_model_calls(batch)
            batch = []
    await store.record_model_calls(batch)


class SumsRecords:
    """The store, its spend summed from the records of the window (the check before 0025)."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def spend(self, column: str, name: str, *, since: float) -> tuple[int, float]:
        # a run id no record has: the query over the records, leaving nothing out
        return await self._store.spend(column, name, since=since, exclude="-")


async def timed(budgets: Budgets, runs: int, senders: int) -> dict[str, float]:
    times = []
    for i in range(runs):
        r = attrs.evolve(run(i), sender=f"hmac#{i % senders}")
        t = time.perf_counter()
        kept = await budgets.admit([r])
        times.append((time.perf_counter() - t) * 1000)
        assert len(kept) == 1
    times.sort()
    return {
        "p50_ms": round(statistics.median(times), 3),
        "p99_ms": round(times[int(len(times) * 0.99) - 1], 3),
        "mean_ms": round(statistics.fmean(times), 3),
    }


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--store", default="sqlite")
    ap.add_argument("--senders", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(args.store, Path(tmp))
        await store.open()
        try:
            await fill(store, args.records, args.senders)
            results = {}
            for name, mapping, agent, way in (
                ("no budget", {}, {}, store),
                ("mapping budget, records", {"metered": BIG}, {}, SumsRecords(store)),
                ("mapping budget, totals", {"metered": BIG}, {}, store),
                ("both budgets, records", {"metered": BIG}, {"main": BIG}, SumsRecords(store)),
                ("both budgets, totals", {"metered": BIG}, {"main": BIG}, store),
                ("mapping budget by sender", {"metered": BY_SENDER}, {}, store),
            ):
                budgets = Budgets(
                    way,
                    mapping_budgets=lambda m=mapping: m,
                    agent_budgets=lambda a=agent: a,
                    on_released=lambda: None,
                )
                results[name] = await timed(budgets, args.runs, args.senders)
                r = results[name]
                print(
                    f"{name:28s} p50 {r['p50_ms']:.3f} ms  p99 {r['p99_ms']:.3f} ms"
                    f"  mean {r['mean_ms']:.3f} ms  ({args.runs} runs, {args.records} records)"
                )
        finally:
            await store.close()
            await drop_schema(store)
    print("BENCH_JSON " + json.dumps({"store": args.store.split(":")[0], **results}))


if __name__ == "__main__":
    asyncio.run(main())
