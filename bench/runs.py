"""Runtime benchmark: agent runs completed per second end to end, and the heartbeat's delay.

    .venv/bin/python bench/runs.py [--seconds 5] [--concurrency 32] [--samples 40]
                                   [--processes 1,2,3] [--store sqlite|postgresql|URL]
                                   [--matrix] [--no-heartbeat]

With the built-in echo model, it starts hookwise on a fresh store and measures:

1. **runs/s end to end**: a `--seconds` burst of POSTs to `/hooks/agent` from wrk (32
   connections); then it waits until every accepted run has finished (its state, transcript and
   summary event committed). The figure is runs / (time the last run finished - time of the
   first POST): acceptance and execution together.
2. **heartbeat delay after `wake` with mode `now`**: `--samples` wakes, one at a time; the delay
   is the heartbeat's start minus the time the wake was accepted (both recorded by the gateway).
   The coalescing window (250 ms by default) is part of that delay by design.
3. the same delay while a flood of agent runs is being processed (the heartbeat has its own lane).

Configurations (issue 7): `--processes 1,2,3` measures (1) with `hookwise serve --workers N` for
each N, each on a fresh store; `--store` picks SQLite (default, a fresh state dir) or PostgreSQL
(`postgresql` for the local server, or a server URL: a fresh database `hookwise_bench_<hex>` is
created on it per configuration and dropped afterwards, also on error or Ctrl-C); `--matrix` is
both stores x 1, 2, 3 processes. Run states are read from the store itself: the SQLite file, or
a direct asyncpg query on PostgreSQL. The heartbeat delays (2, 3) are measured once, on the first
single-process configuration (none: skipped).

Targets (issue 4): at least 500 runs/s; a `now` heartbeat starts within 300 ms p99.
Figures are printed, never asserted; the last line is `BENCH_JSON {...}`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.ingest import BenchError, child_tree, ensure_wrk, kill_survivors  # noqa: E402
from bench.pgstore import (  # noqa: E402
    DEFAULT_PG_URL,
    PgError,
    PgQuery,
    drop_leftovers,
    fresh_database,
    is_postgres,
)
from tests.support.gateway import HOOK_TOKEN, GatewayProcess, base_config  # noqa: E402

AUTH = {"Authorization": f"Bearer {HOOK_TOKEN}"}
RUNS_TARGET = 500.0
HEARTBEAT_P99_TARGET_MS = 300.0
DRAIN_TIMEOUT_S = 600.0


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


# ------------------------------------------------------------------------------ configurations


@dataclass(frozen=True)
class Config:
    """One gateway to measure: a store ("sqlite" or a PostgreSQL server URL) and N processes."""

    store: str
    processes: int

    @property
    def postgres(self) -> bool:
        return is_postgres(self.store)

    @property
    def name(self) -> str:
        return f"{'postgres' if self.postgres else 'sqlite'}-{self.processes}p"


def parse_processes(text: str) -> list[int]:
    """`1,2,3` -> [1, 2, 3]; argparse error on anything else."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not a list of process counts: {text!r}") from e
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"process counts must be >= 1: {text!r}")
    return values


def parse_store(text: str) -> str:
    """`sqlite`, `postgresql` (the local server) or a PostgreSQL server URL."""
    if text in ("sqlite", "postgresql", "postgres"):
        return DEFAULT_PG_URL if text != "sqlite" else "sqlite"
    if is_postgres(text):
        return text
    raise argparse.ArgumentTypeError(f"--store must be sqlite, postgresql or a URL: {text!r}")


def configs_from(args: argparse.Namespace) -> list[Config]:
    stores = ["sqlite", args.pg_url] if args.matrix else [args.store]
    processes = [1, 2, 3] if args.matrix else args.processes
    return [Config(store, n) for store in stores for n in processes]


# ---------------------------------------------------------------------------- reading the store


class Reader(Protocol):
    """Read-only queries on the gateway's store; SQL with `$1`-style parameters."""

    def one(self, sql: str, *args: Any) -> tuple[Any, ...]: ...

    def close(self) -> None: ...


class SqliteReader:
    """The SQLite file, read-only (`$1` parameters become SQLite's `?1`)."""

    def __init__(self, path: Path) -> None:
        self._conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)

    def one(self, sql: str, *args: Any) -> tuple[Any, ...]:
        row = self._conn.execute(re.sub(r"\$(\d+)", r"?\1", sql), args).fetchone()
        return tuple(row) if row is not None else ()

    def close(self) -> None:
        self._conn.close()


def _count(reader: Reader, sql: str, *args: Any) -> int:
    return int(reader.one(sql, *args)[0])


@contextmanager
def gateway(
    config: Config, gateway_config: dict[str, Any], workdir: Path
) -> Iterator[tuple[GatewayProcess, Reader]]:
    """A started gateway for `config` on a fresh store, and a reader of that store.

    On exit: the reader is closed, the gateway (supervisor and workers) stopped, and a fresh
    PostgreSQL database dropped.
    """
    with ExitStack() as stack:
        store_url = stack.enter_context(fresh_database(config.store)) if config.postgres else None
        extra = ["--workers", str(config.processes)]
        extra += ["--store", store_url] if store_url else []
        gw = GatewayProcess(gateway_config, workdir, extra_args=extra)
        gw.start(timeout=60)
        stack.callback(_stop_gateway, gw, child_tree(gw.proc.pid) if gw.proc else {})
        reader: Reader = (
            PgQuery(store_url) if store_url else SqliteReader(gw.state_dir / "hookwise.db")
        )
        stack.callback(reader.close)
        yield gw, reader


def _stop_gateway(gw: GatewayProcess, children: dict[int, bytes]) -> None:
    """Stop the gateway; SIGKILL workers that outlived a supervisor killed after its timeout."""
    gw.stop()
    kill_survivors(children)


# ---------------------------------------------------------------------------------- runs/s


async def post_runs(url: str, n: int, concurrency: int, stop: asyncio.Event | None = None) -> int:
    sent = 0
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as client:
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(n):
            queue.put_nowait(i)

        async def worker() -> None:
            nonlocal sent
            while not queue.empty() and not (stop and stop.is_set()):
                i = queue.get_nowait()
                body = {"message": f"job {i}", "deliver": False, "wakeMode": "next-heartbeat"}
                r = await client.post("/hooks/agent", json=body, headers=AUTH)
                if r.status_code == 202:
                    sent += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return sent


AGENT_LUA = """
wrk.method = "POST"
wrk.body = '{"message":"build 42 failed on main","deliver":false,"wakeMode":"next-heartbeat"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %s"
"""


def wait_idle(reader: Reader, timeout: float = DRAIN_TIMEOUT_S) -> None:
    """Until no run is queued or running (or `timeout`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _count(reader, "SELECT COUNT(*) FROM runs WHERE state IN ('queued', 'running')") == 0:
            return
        time.sleep(0.05)


def _run_counts(reader: Reader) -> dict[str, int]:
    return {
        "runs": _count(reader, "SELECT COUNT(*) FROM runs"),
        "succeeded": _count(reader, "SELECT COUNT(*) FROM runs WHERE state = 'succeeded'"),
        "summaries": _count(reader, "SELECT COUNT(*) FROM events WHERE source LIKE 'run:%'"),
    }


def measure_runs(
    gw: GatewayProcess, reader: Reader, seconds: int, concurrency: int, workdir: Path
) -> dict[str, float]:
    """A burst of agent requests from wrk, then wait until every accepted run has finished."""
    script = workdir / "agent.lua"
    script.write_text(AGENT_LUA % HOOK_TOKEN)
    before = _run_counts(reader)
    t0 = time.time()
    subprocess.run(
        [
            ensure_wrk(),
            "-t2",
            f"-c{concurrency}",
            f"-d{seconds}s",
            "-s",
            str(script),
            f"{gw.url}/hooks/agent",
        ],
        check=True,
        capture_output=True,
        timeout=seconds + 60,
    )
    t_accepted = time.time()
    accepted_by_then = _count(reader, "SELECT COUNT(*) FROM runs") - before["runs"]
    wait_idle(reader)
    (last,) = reader.one("SELECT MAX(finished_at) FROM runs")
    after = _run_counts(reader)
    runs = after["runs"] - before["runs"]  # with the requests still in flight when wrk stopped
    return {
        "runs": runs,
        "succeeded": after["succeeded"] - before["succeeded"],
        "summaries": after["summaries"] - before["summaries"],
        "accept_per_s": accepted_by_then / (t_accepted - t0),
        "runs_per_s": runs / (last - t0),
        "seconds": last - t0,
    }


def measure_config(
    config: Config, gateway_config: dict[str, Any], args: argparse.Namespace, heartbeat: bool
) -> dict[str, Any]:
    """runs/s for one configuration on a fresh store (and the heartbeat delays if asked)."""
    print(f"measuring {config.name} ...", flush=True)
    with (
        tempfile.TemporaryDirectory(prefix=f"hookwise-bench-runs-{config.name}-") as tmp,
        gateway(config, gateway_config, Path(tmp) / "gw") as (gw, reader),
    ):
        asyncio.run(post_runs(gw.url, 200, 8))  # warm-up
        wait_idle(reader)
        out: dict[str, Any] = {
            "config": config.name,
            "store": "postgresql" if config.postgres else "sqlite",
            "processes": config.processes,
            **measure_runs(gw, reader, args.seconds, args.concurrency, Path(tmp)),
        }
        if heartbeat:
            out["heartbeat_ms"] = measure_heartbeats(gw, reader, args.samples, args.concurrency)
    return out


# ------------------------------------------------------------------------------- heartbeat


def heartbeat_delays(gw: GatewayProcess, reader: Reader, samples: int) -> list[float]:
    delays: list[float] = []
    with httpx.Client(base_url=gw.url, timeout=10) as client:
        for _ in range(samples):
            before = _count(reader, "SELECT COALESCE(MAX(seq), 0) FROM heartbeats")
            r = client.post("/hooks/wake", json={"text": "ping", "mode": "now"}, headers=AUTH)
            assert r.status_code == 200, r.text
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                row = reader.one(
                    "SELECT requested_at, started_at FROM heartbeats WHERE seq > $1"
                    " ORDER BY seq LIMIT 1",
                    before,
                )
                if row:
                    delays.append((row[1] - row[0]) * 1000)
                    break
                time.sleep(0.01)
            time.sleep(0.05)
    return delays


def heartbeat_delays_under_flood(
    gw: GatewayProcess, reader: Reader, samples: int, concurrency: int
) -> tuple[list[float], int]:
    stop = asyncio.Event()
    result: dict[str, int] = {}

    async def flood() -> None:
        result["sent"] = await post_runs(gw.url, 10**6, concurrency, stop)

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=lambda: loop.run_until_complete(flood()), daemon=True)
    thread.start()
    time.sleep(1.0)
    try:
        delays = heartbeat_delays(gw, reader, samples)
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(60)
    return delays, result.get("sent", 0)


def _summary(delays: list[float]) -> dict[str, float]:
    return {
        "p50": statistics.median(delays),
        "p99": percentile(delays, 99),
        "max": max(delays),
        "n": len(delays),
    }


def measure_heartbeats(
    gw: GatewayProcess, reader: Reader, samples: int, concurrency: int
) -> dict[str, dict[str, float]]:
    quiet = heartbeat_delays(gw, reader, samples)
    flooded, flood_runs = heartbeat_delays_under_flood(
        gw, reader, max(10, samples // 2), concurrency
    )
    return {"quiet": _summary(quiet), "flood": {**_summary(flooded), "runs_posted": flood_runs}}


# ---------------------------------------------------------------------------------- report


def machine_info() -> dict[str, Any]:
    return {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "cpu": next(
            (
                ln.split(":", 1)[1].strip()
                for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")
            ),
            platform.processor(),
        ),
    }


def render_runs(results: list[dict[str, Any]]) -> str:
    """One row per configuration; `vs 1p` is runs/s against the same store's 1-process row."""
    single = {r["store"]: r["runs_per_s"] for r in results if r["processes"] == 1}
    header = (
        f"{'configuration':<13} {'runs/s':>8} {'vs 1p':>6} {'accept/s':>9} "
        f"{'accepted / succeeded / summaries':>34} {'seconds':>8}  target"
    )
    lines = [header, "-" * (len(header) + 14)]
    for r in results:
        base = single.get(r["store"])
        scale = f"{r['runs_per_s'] / base:.2f}x" if base else "-"
        counts = f"{r['runs']} / {r['succeeded']} / {r['summaries']}"
        ok = "PASS" if r["runs_per_s"] >= RUNS_TARGET else "FAIL"
        lines.append(
            f"{r['config']:<13} {r['runs_per_s']:>8,.0f} {scale:>6} {r['accept_per_s']:>9,.0f} "
            f"{counts:>34} {r['seconds']:>7.1f}s  >= {RUNS_TARGET:.0f}: {ok}"
        )
    return "\n".join(lines)


def render_heartbeats(config: str, heartbeat: dict[str, dict[str, float]]) -> str:
    lines = []
    for name, d in heartbeat.items():
        ok = "PASS" if d["p99"] < HEARTBEAT_P99_TARGET_MS else "FAIL"
        p50, p99 = f"p50 {d['p50']:.0f}", f"p99 {d['p99']:.0f}"
        label = f"heartbeat delay after wake now, {name} (ms, {config})"
        lines.append(f"{label:60} {p50:>10}")
        lines.append(f"{'':60} {p99:>10}  < {HEARTBEAT_P99_TARGET_MS:.0f} ms: {ok}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds", type=int, default=5, help="length of the burst of /agent requests"
    )
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument(
        "--processes",
        type=parse_processes,
        default=[1],
        help="comma-separated `hookwise serve --workers` counts, e.g. 1,2,3 (default 1)",
    )
    parser.add_argument(
        "--store",
        type=parse_store,
        default="sqlite",
        help="sqlite (default), postgresql (the local server) or a PostgreSQL server URL "
        "(a fresh database is created on it per configuration)",
    )
    parser.add_argument(
        "--matrix", action="store_true", help="both stores x 1, 2, 3 processes (issue 7)"
    )
    parser.add_argument(
        "--pg-url",
        default=DEFAULT_PG_URL,
        help=f"with --matrix: the PostgreSQL server (default {DEFAULT_PG_URL})",
    )
    parser.add_argument(
        "--no-heartbeat", action="store_true", help="skip the heartbeat-delay measurements"
    )
    args = parser.parse_args(argv)
    if args.matrix and (args.processes != [1] or args.store != "sqlite"):
        parser.error("--matrix chooses the stores and processes itself: drop --store/--processes")
    return args


def run(args: argparse.Namespace) -> int:
    gateway_config = base_config()
    gateway_config["agents"] = {"defaults": {"heartbeat": {"every": 0}}}
    configs = configs_from(args)
    heartbeat_config = None
    if not args.no_heartbeat:
        heartbeat_config = next((c for c in configs if c.processes == 1), None)
    results = [measure_config(c, gateway_config, args, c == heartbeat_config) for c in configs]

    machine = machine_info()
    stores = sorted({r["store"] for r in results})
    print()
    print(
        f"machine: {machine['nproc']} CPUs, {machine['cpu']}; Python {machine['python']}; "
        f"echo model; {', '.join(stores)} (SQLite synchronous=FULL)"
    )
    print(render_runs(results))
    out: dict[str, Any] = {"machine": machine, "runs": results[0], "configs": results}
    for r in results:
        if "heartbeat_ms" in r:
            out["heartbeat_ms"] = r.pop("heartbeat_ms")
            print(render_heartbeats(r["config"], out["heartbeat_ms"]))
    if heartbeat_config is None and not args.no_heartbeat:
        print("heartbeat delay: skipped (no single-process configuration)")
    print("BENCH_JSON " + json.dumps(out))
    return 0


def _raise_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_on_sigterm)
    try:
        return run(args)
    except (BenchError, PgError, RuntimeError, subprocess.SubprocessError) as e:
        print(f"bench: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
    finally:
        for line in drop_leftovers():
            print(f"bench: {line}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
