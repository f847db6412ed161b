"""Accounting and fallback benchmark: what recording every model call costs a run, and how long
a run that falls back once waits for its reply.

    .venv/bin/python bench/accounting.py [--calls 400] [--concurrency 1,32] [--store sqlite|URL]
                                         [--fallbacks 30] [--rule metered] [--sender github#0]

1. **The accounting's cost per call**: `--calls` model calls with the built-in echo model, made
   the way a run makes them (`runtime.chain.ModelChain`: the breaker read, the call, its record
   written to the store and counted in the metrics), against the same calls made to the provider
   alone. A record is written in the background (the run does not wait for it): the latency is
   the call's, and calls/s is measured until every record is committed. Sequential
   (`--concurrency 1`) and with 32 calls at once (the store's group commit shares a transaction
   between records). It also counts the store
   operations per call (reads and writes), by wrapping the store.
2. **A run that falls back once**: a chain `primary -> backup` of two OpenAI-compatible servers on
   loopback (`tests/fakes/model_server.py`), the primary answering 503 at once: the time to the
   backup's reply beside the primary's failure, and a call the primary answers itself for scale.

The store is a fresh SQLite file (its writer in its own process, the default) unless `--store`
names a PostgreSQL URL (a fresh schema on it, dropped afterwards). `--rule` and `--sender` make the
calls a run's of that mapping and sender: each call then adds to the running totals of the
mapping and of the sender (`mapping-sender`, `agent-sender`) beside the agent's. Figures are printed, never
asserted; the last line is `BENCH_JSON {...}`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hookwise.engine.config.models import ProviderConfig  # noqa: E402
from hookwise.engine.config.prices import PerTokens, PriceConfig  # noqa: E402
from hookwise.server import metrics  # noqa: E402
from hookwise.server.runtime.chain import Accounting  # noqa: E402
from hookwise.server.runtime.providers.base import ChatMessage  # noqa: E402
from hookwise.server.runtime.providers.echo import EchoProvider  # noqa: E402
from hookwise.server.runtime.providers.openai import OpenAIProvider  # noqa: E402
from hookwise.server.runtime.providers.registry import Providers  # noqa: E402
from hookwise.server.store.modelcalls import BreakerPolicy  # noqa: E402
from tests.fakes.model_server import Fail, ModelServer  # noqa: E402

MESSAGES = [ChatMessage("system", "You are terse."), ChatMessage("user", "hello there")]
PRICES = {"echo/echo": PriceConfig(input=2.0, output=8.0, per=PerTokens(1_000_000))}


class Counting:
    """The store, counting the accounting's reads and writes."""

    READS = ("breakers", "model_calls_of")
    WRITES = ("record_model_calls", "breaker_failure", "breaker_success", "breaker_probe")

    def __init__(self, store: Any) -> None:
        self._store = store
        self.reads = 0
        self.writes = 0

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if name in self.READS or name in self.WRITES:

            async def counted(*args: Any, **kwargs: Any) -> Any:
                if name in self.READS:
                    self.reads += 1
                else:
                    self.writes += 1
                return await value(*args, **kwargs)

            return counted
        return value


def open_store(kind: str, root: Path) -> Any:
    if kind == "sqlite":
        from hookwise.server.store.sqlite import SQLiteStore

        return SQLiteStore(root / "hookwise.db")
    from hookwise.server.store.postgres import PostgresStore

    return PostgresStore(kind, schema=f"bench_{uuid.uuid4().hex[:12]}", pool_size=4)


async def drop_schema(store: Any) -> None:
    schema = getattr(store, "schema", None)
    if schema:
        import asyncpg

        conn = await asyncpg.connect(store.url)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()


async def timed_calls(call: Any, n: int, concurrency: int) -> list[float]:
    """Seconds per call, `n` calls, `concurrency` at a time."""
    took: list[float] = []
    queue = list(range(n))

    async def worker() -> None:
        while queue:
            i = queue.pop()
            t0 = time.perf_counter()
            await call(i)
            took.append(time.perf_counter() - t0)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return took


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


async def accounting_cost(
    store: Any, calls: int, concurrency: int, rule: str | None = None, sender: str | None = None
) -> dict[str, Any]:
    counting = Counting(store)
    providers = Providers({})
    acc = Accounting(counting, providers, prices=PRICES, breaker=BreakerPolicy())  # type: ignore[arg-type]
    echo = EchoProvider()
    deadline = time.monotonic() + 3600

    async def bare(_: int) -> None:
        await echo.complete("echo", MESSAGES, thinking=None, deadline=deadline)

    async def accounted(i: int) -> None:
        chain = acc.chain(
            ["echo/echo"],
            owner_id=f"bench-{concurrency}-{i}",
            agent_id="main",
            rule_id=rule,
            sender=sender,
        )
        await chain.complete("echo/echo", MESSAGES, thinking=None, deadline=deadline)

    await timed_calls(accounted, 20, 1)  # warm the connections
    await acc.drain(timeout=60)
    counting.reads = counting.writes = 0
    t0 = time.perf_counter()
    plain = await timed_calls(bare, calls, concurrency)
    plain_wall = time.perf_counter() - t0
    t0 = time.perf_counter()
    with_acc = await timed_calls(accounted, calls, concurrency)
    await acc.drain(timeout=60)  # every record committed: part of the cost
    acc_wall = time.perf_counter() - t0
    return {
        "concurrency": concurrency,
        "calls": calls,
        "bare_p50_ms": statistics.median(plain) * 1000,
        "accounted_p50_ms": statistics.median(with_acc) * 1000,
        "accounted_p99_ms": pct(with_acc, 0.99) * 1000,
        "bare_calls_per_s": calls / plain_wall,
        "accounted_calls_per_s": calls / acc_wall,
        "accounted_wall_ms_per_call": acc_wall / calls * 1000,
        "store_reads_per_call": counting.reads / calls,
        "store_writes_per_call": counting.writes / calls,
    }


async def fallback_once(store: Any, samples: int) -> dict[str, Any]:
    with ModelServer() as primary, ModelServer(default_text="from the backup") as backup:

        def provider(pid: str, server: ModelServer) -> OpenAIProvider:
            cfg = ProviderConfig(api="openai", base_url=server.openai_base_url, max_retries=2)
            return OpenAIProvider(pid, cfg, api_key=server.api_key)

        providers = Providers({"pri": provider("pri", primary), "bk": provider("bk", backup)})
        acc = Accounting(store, providers, prices={}, breaker=BreakerPolicy(failures=0))
        chain_refs = ["pri/gpt-main", "bk/gpt-backup"]
        deadline = time.monotonic() + 3600
        fell_back: list[float] = []
        failure_ms: list[float] = []
        backup_ms: list[float] = []
        direct: list[float] = []
        try:
            for i in range(samples):
                primary.enqueue(Fail(503))
                chain = acc.chain(chain_refs, owner_id=f"fb-{i}", agent_id="main")
                t0 = time.perf_counter()
                await chain.complete("", MESSAGES, thinking=None, deadline=deadline)
                fell_back.append(time.perf_counter() - t0)
                await acc.drain(timeout=60)
                first, second = await store.model_calls_of([f"fb-{i}"])
                failure_ms.append(first.duration_ms)
                backup_ms.append(second.duration_ms)
                chain = acc.chain(chain_refs, owner_id=f"direct-{i}", agent_id="main")
                t0 = time.perf_counter()
                await chain.complete("", MESSAGES, thinking=None, deadline=deadline)
                direct.append(time.perf_counter() - t0)
        finally:
            await providers.aclose()
    return {
        "samples": samples,
        "fallback_reply_p50_ms": statistics.median(fell_back) * 1000,
        "fallback_reply_max_ms": max(fell_back) * 1000,
        "primary_failure_p50_ms": statistics.median(failure_ms),
        "backup_call_p50_ms": statistics.median(backup_ms),
        "direct_reply_p50_ms": statistics.median(direct) * 1000,
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    metrics.enable()
    with tempfile.TemporaryDirectory(prefix="hookwise-bench-acct-") as tmp:
        store = open_store(args.store, Path(tmp))
        await store.open()
        try:
            results: dict[str, Any] = {"store": "sqlite" if args.store == "sqlite" else "postgres"}
            results["accounting"] = [
                await accounting_cost(store, args.calls, int(c), args.rule, args.sender)
                for c in args.concurrency.split(",")
            ]
            results["fallback"] = await fallback_once(store, args.fallbacks)
        finally:
            await store.close()
            await drop_schema(store)
    return results


def report(results: dict[str, Any]) -> None:
    print(f"store: {results['store']}")
    for r in results["accounting"]:
        print(
            f"accounting, {r['calls']} echo calls, {r['concurrency']} at a time: "
            f"bare p50 {r['bare_p50_ms']:.3f} ms ({r['bare_calls_per_s']:.0f}/s), "
            f"accounted p50 {r['accounted_p50_ms']:.3f} ms p99 {r['accounted_p99_ms']:.3f} ms "
            f"({r['accounted_calls_per_s']:.0f}/s, records committed); per call: "
            f"{r['store_reads_per_call']:.2f} store reads, {r['store_writes_per_call']:.2f} writes"
        )
    f = results["fallback"]
    print(
        f"fallback once ({f['samples']} samples): reply after {f['fallback_reply_p50_ms']:.1f} ms"
        f" p50 (max {f['fallback_reply_max_ms']:.1f}); the primary's 503 took"
        f" {f['primary_failure_p50_ms']:.1f} ms, the backup's call {f['backup_call_p50_ms']:.1f}"
        f" ms; a reply without fallback {f['direct_reply_p50_ms']:.1f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--concurrency", default="1,32")
    parser.add_argument("--store", default="sqlite", help="sqlite, or a PostgreSQL URL")
    parser.add_argument("--fallbacks", type=int, default=30)
    parser.add_argument("--rule", default=None, help="the calls are a run's of this mapping")
    parser.add_argument("--sender", default=None, help="the calls are a run's of this sender")
    out = asyncio.run(main(parser.parse_args()))
    report(out)
    print("BENCH_JSON " + json.dumps(out))
