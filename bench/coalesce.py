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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._store import (
    MakeStore,
    StoreKind,
    accept_run,
    add_store_option,
    bench_run,
    concurrently,
)
from hookwise.server.store.base import AcceptOp
from hookwise.server.store.coalesce import CoalesceSpec

MODES = ("plain", "join", "open")


def _op(n: int, mode: str) -> AcceptOp:
    run = bench_run(n, message=f"PR acme/api#7 event {n}", rule_id="prs")
    spec = None
    if mode != "plain":
        key = "acme/api#7" if mode == "join" else f"acme/api#{n}"
        spec = CoalesceSpec(key, window=600.0, max_wait=3600.0)
    body = f'{{"ok":true,"runId":"{run.run_id}"}}'.encode()
    return accept_run(run, "/hooks/github", body=body, coalesce=spec)


async def _measure(make: MakeStore, requests: int, concurrency: int, mode: str) -> float:
    store = make()
    await store.open()
    try:
        return await concurrently(lambda n: store.accept(_op(n, mode)), requests, concurrency)
    finally:
        await store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    add_store_option(parser)
    args = parser.parse_args()
    kind = StoreKind.parse(args.store)
    if kind is None:
        return 2
    results: dict[str, dict[str, float]] = {}
    print(f"{'mode':<6} {'requests/s':>11} {'us/request':>11}")
    for mode in MODES:
        with kind.fresh(pool_size=8) as make:
            seconds = asyncio.run(_measure(make, args.requests, args.concurrency, mode))
        rate = args.requests / seconds
        us = seconds / args.requests * 1e6
        results[mode] = {"requests_per_s": round(rate, 1), "us_per_request": round(us, 1)}
        print(f"{mode:<6} {rate:>11.1f} {us:>11.1f}", flush=True)
    print("BENCH_JSON " + json.dumps({"store": kind.name, "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
