"""Session lanes benchmark: what the session rule costs the claim, runs drained per second.

    .venv/bin/python bench/lanes.py [--runs 3000] [--sessions 1,10,1000] [--slots 32]
                                    [--store sqlite|postgresql|URL]

For each number of distinct sessions, a fresh store is filled with `--runs` queued runs spread
round-robin over the sessions, then drained by a lane of `--slots` slots as the gateway's lane
does it (claim every free slot, finish each claimed run with its two turns, claim again), twice:

- **lanes**: the store's claim as shipped (one running run per session, the oldest first);
- **before**: the claim of hookwise before session lanes (oldest queued runs, no session rule),
  put in its place for the measurement.

The figure is runs / drain time. With one session, `lanes` is serial by design (one run of the
session at a time) while `before` ran the whole session at once; with 1,000 sessions the two
claim the same runs and the difference is the cost of the rule itself (target: within 10%).
The model is not called (a run's work is its store traffic), so the figures bound the store's
share of a run.

`--claims` measures the claim statement alone instead: on a store holding `--runs` queued runs
over 1,000 sessions, the median time of one claim of `--slots` runs (60 claims, each rolled
back), before and with lanes, on PostgreSQL (the drain's figures there swing with the machine's
load more than the claim's cost). Figures are printed, never asserted; the last line is
`BENCH_JSON {...}`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.pgstore import DEFAULT_PG_URL, fresh_database, is_postgres
from hookwise.server.store.base import AcceptOp, NewRun, RequestLogEntry
from hookwise.server.store.postgres import PostgresStore
from hookwise.server.store.postgres import runtime as pg_runtime
from hookwise.server.store.records import NewTurn, RunOutcome
from hookwise.server.store.rows import RUN_COLUMNS
from hookwise.server.store.sqlite import SQLiteStore
from hookwise.server.store.sqlite import runtime as sqlite_runtime

#: the claims before session lanes (hookwise 97677a6), with no-op conditions that take the
#: list of full mappings and the `not_before` time today's claim is given
BEFORE_SQLITE = (
    "UPDATE runs SET state = 'running', started_at = ?, attempts = attempts + 1,"
    " lease_until = ? + COALESCE(timeout_seconds, ?) + ?"
    " WHERE seq IN (SELECT seq FROM runs WHERE state = 'queued' AND ? IS NOT NULL"
    " AND ? IS NOT NULL ORDER BY seq LIMIT ?)"
    f" RETURNING {RUN_COLUMNS}"
)
BEFORE_PG = (
    "WITH picked AS MATERIALIZED (SELECT seq FROM runs WHERE state = 'queued'"
    " AND $5::text[] IS NOT NULL ORDER BY seq LIMIT $4 FOR UPDATE SKIP LOCKED)"
    " UPDATE runs SET state = 'running', started_at = $1::float8, attempts = attempts + 1,"
    " lease_until = $1::float8 + COALESCE(timeout_seconds, $2::float8) + $3::float8"
    f" WHERE seq IN (SELECT seq FROM picked) RETURNING {RUN_COLUMNS}"
)


def _run(n: int, session: str) -> NewRun:
    return NewRun(
        run_id=f"run-{n:07d}",
        session_key=session,
        name="bench",
        message=f"job {n}",
        rule_id=None,
        wake_mode="next-heartbeat",
        deliver=False,
        channel="last",
        to=None,
        model=None,
        thinking=None,
        timeout_seconds=None,
        fallback_channel=None,
        allow_unsafe_external_content=False,
    )


async def _fill(store: Any, runs: int, sessions: int) -> None:
    batch = 200
    for start in range(0, runs, batch):
        chunk = tuple(
            _run(n, f"hook:s{n % sessions}") for n in range(start, min(runs, start + batch))
        )
        log = RequestLogEntry(at=time.time(), path="/hooks/agent", status=202, client=None, size=0)
        await store.accept(
            AcceptOp(
                events=(),
                runs=chunk,
                log=log,
                status=202,
                body=b"{}",
                now=time.time(),
            )
        )


async def _drain(store: Any, runs: int, slots: int) -> float:
    """Drain the queue as a lane does; seconds taken."""
    free = slots
    freed = asyncio.Event()
    done = 0
    tasks: set[asyncio.Task[None]] = set()

    async def execute(run: Any) -> None:
        nonlocal free, done
        turns = (
            NewTurn(run.session_key, "user", run.message, run.run_id),
            NewTurn(run.session_key, "assistant", "ok", run.run_id),
        )
        await store.finish_run(
            RunOutcome(run_id=run.run_id, state="succeeded", finished_at=time.time(), turns=turns)
        )
        free += 1
        done += 1
        freed.set()

    began = time.perf_counter()
    while done < runs:
        if free > 0:
            claimed = await store.claim_runs(limit=free, now=time.time())
            free -= len(claimed)
            for run in claimed:
                task = asyncio.create_task(execute(run))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            if claimed:
                continue
        freed.clear()
        if done < runs:
            await freed.wait()
    return time.perf_counter() - began


async def _measure(make: Any, runs: int, sessions: int, slots: int) -> float:
    store = make()
    await store.open()
    try:
        await _fill(store, runs, sessions)
        seconds = await _drain(store, runs, slots)
    finally:
        await store.close()
    return runs / seconds


async def _claim_times(url: str, runs: int, slots: int) -> dict[str, float]:
    """Median ms of one claim of `slots` runs, before and with lanes (each rolled back)."""
    import statistics

    import asyncpg

    store = PostgresStore(url, pool_size=2)
    await store.open()
    try:
        await _fill(store, runs, 1000)
    finally:
        await store.close()
    conn = await asyncpg.connect(url)
    times: dict[str, list[float]] = {"before": [], "lanes": []}
    try:
        for label, sql in (("before", BEFORE_PG), ("lanes", pg_runtime.CLAIM_ANY)) * 2:
            for _ in range(30):
                tr = conn.transaction()
                await tr.start()
                began = time.perf_counter()
                await conn.fetch(sql, 1.0, 600.0, 60.0, slots, [])
                times[label].append((time.perf_counter() - began) * 1000)
                await tr.rollback()
    finally:
        await conn.close()
    return {label: round(statistics.median(v), 3) for label, v in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--sessions", default="1,10,1000")
    parser.add_argument("--slots", type=int, default=32)
    parser.add_argument("--store", default="sqlite")
    parser.add_argument("--claims", action="store_true", help="time the claim alone (PostgreSQL)")
    args = parser.parse_args()
    postgres = args.store != "sqlite"
    server = DEFAULT_PG_URL if args.store == "postgresql" else args.store
    if postgres and not is_postgres(server):
        print(f"unknown --store {args.store!r}", file=sys.stderr)
        return 2
    if args.claims:
        with fresh_database(server if postgres else DEFAULT_PG_URL) as url:
            ms = asyncio.run(_claim_times(url, args.runs, args.slots))
        print(f"one claim of {args.slots} among {args.runs} queued runs: {ms} ms (median)")
        print("BENCH_JSON " + json.dumps({"claim_ms": ms, "runs": args.runs, "slots": args.slots}))
        return 0
    results: list[dict[str, Any]] = []
    print(f"{'sessions':>8}  {'claim':<7} {'runs/s':>9}")
    for sessions in (int(s) for s in args.sessions.split(",")):
        row: dict[str, Any] = {"sessions": sessions}
        for label in ("before", "lanes"):
            with ExitStack() as stack:
                if postgres:
                    url = stack.enter_context(fresh_database(server))

                    def make(url: str = url) -> Any:
                        return PostgresStore(url, pool_size=4)

                    module: Any = pg_runtime
                    old = BEFORE_PG
                else:
                    folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))

                    def make(folder: Path = folder) -> Any:
                        # the writer on a thread: the claim put in place below is the one run
                        return SQLiteStore(folder / "bench.db", writer="thread")

                    module = sqlite_runtime
                    old = BEFORE_SQLITE
                shipped = module.CLAIM_ANY
                if label == "before":
                    module.CLAIM_ANY = old
                try:
                    rate = asyncio.run(_measure(make, args.runs, sessions, args.slots))
                finally:
                    module.CLAIM_ANY = shipped
            row[label] = round(rate, 1)
            print(f"{sessions:>8}  {label:<7} {rate:>9.1f}", flush=True)
        row["ratio"] = round(row["lanes"] / row["before"], 3)
        results.append(row)
    print(
        "BENCH_JSON "
        + json.dumps({"store": "postgresql" if postgres else "sqlite", "results": results})
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
