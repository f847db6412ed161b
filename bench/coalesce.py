"""Coalescing benchmark: what coalescing costs per accepted request, in the store.

    .venv/bin/python bench/coalesce.py [--requests 2000] [--concurrency 32]
                                       [--store sqlite|postgresql|URL]

A fresh store accepts `--requests` requests of one run each, `--concurrency` at a time (as the
HTTP layer submits them), in three ways:

- **plain**: no `coalesce` (the request path as it is without it: rows merged in group commits);
- **join**: one key: the first request writes the run, every other one joins it (reads the
  waiting run, rewrites its message and window, logs its line);
- **open**: a key per request: each writes its run and opens its window.

Each figure is requests per second and microseconds per request (wall time / requests); the
difference to `plain` is the cost of coalescing per request. Figures are printed, never
asserted; the last line is `BENCH_JSON {...}`.
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
from hookwise.server.store.coalesce import CoalesceSpec
from hookwise.server.store.postgres import PostgresStore
from hookwise.server.store.sqlite import SQLiteStore

MODES = ("plain", "join", "open")


def _op(n: int, mode: str) -> AcceptOp:
    run = NewRun(
        run_id=f"run-{n:07d}",
        session_key=f"hook:s{n}",
        name="bench",
        message=f"PR acme/api#7 event {n}",
        rule_id="prs",
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
    now = time.time()
    log = RequestLogEntry(
        at=now, path="/hooks/github", status=202, client=None, size=0, run_ids=(run.run_id,)
    )
    spec = None
    if mode != "plain":
        key = "acme/api#7" if mode == "join" else f"acme/api#{n}"
        spec = CoalesceSpec(key, window=600.0, max_wait=3600.0)
    body = f'{{"ok":true,"runId":"{run.run_id}"}}'.encode()
    return AcceptOp(status=202, body=body, log=log, runs=(run,), now=now, coalesce=spec)


async def _measure(make: Any, requests: int, concurrency: int, mode: str) -> float:
    store = make()
    await store.open()
    try:
        queue = iter(range(requests))

        async def worker() -> None:
            for n in queue:
                await store.accept(_op(n, mode))

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - began
    finally:
        await store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--store", default="sqlite")
    args = parser.parse_args()
    postgres = args.store != "sqlite"
    server = DEFAULT_PG_URL if args.store == "postgresql" else args.store
    if postgres and not is_postgres(server):
        print(f"unknown --store {args.store!r}", file=sys.stderr)
        return 2
    results: dict[str, dict[str, float]] = {}
    print(f"{'mode':<6} {'requests/s':>11} {'us/request':>11}")
    for mode in MODES:
        with ExitStack() as stack:
            if postgres:
                url = stack.enter_context(fresh_database(server))

                def make(url: str = url) -> Any:
                    return PostgresStore(url, pool_size=8)

            else:
                folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))

                def make(folder: Path = folder) -> Any:
                    return SQLiteStore(folder / "bench.db")

            seconds = asyncio.run(_measure(make, args.requests, args.concurrency, mode))
        rate = args.requests / seconds
        us = seconds / args.requests * 1e6
        results[mode] = {"requests_per_s": round(rate, 1), "us_per_request": round(us, 1)}
        print(f"{mode:<6} {rate:>11.1f} {us:>11.1f}", flush=True)
    print(
        "BENCH_JSON "
        + json.dumps({"store": "postgresql" if postgres else "sqlite", "results": results})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
