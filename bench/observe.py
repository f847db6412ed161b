"""Operating benchmarks (issue 12): what metrics cost on `/wake`, and a retention soak.

Run from the repository root:

    .venv/bin/python bench/observe.py metrics [--rounds 2] [--duration 10] [--connections 32]
    .venv/bin/python bench/observe.py soak [--duration 120] [--rate 150] [--keep 15s]
                                           [--interval 3s] [--pg-url URL]

`metrics` measures `/hooks/wake` with `gateway.metrics.enabled` false and true, alternating
(off, on, off, on, ...), each on a fresh server and store, with wrk as `bench/ingest.py` runs it;
it prints requests/s, p50/p99, the server's CPU time per request (its process tree's user +
system time over the measured run, divided by the requests: steadier than requests/s on a
busy machine) and the machine's busy share, then the on/off ratios of the medians.

`soak` runs one server with short retention (`--keep` for every kind of record, pruned every
`--interval`) under a steady load of `--rate` requests/s for `--duration` seconds (half `/wake`
with `mode: now`, so heartbeats consume the events, half `/agent` runs on the echo model), and
prints every few seconds the database size: SQLite's page count times its page size (what the
database holds, the part still in the WAL included) and the WAL file, or `pg_database_size` with `--pg-url` (a fresh database, dropped afterwards). With retention on
the size levels off once the first records are older than `--keep`: the last line compares the
size at the end with the size at the middle of the run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.ingest import (  # noqa: E402
    ADMIN_TOKEN,
    HOOK_TOKEN,
    WAKE,
    BenchError,
    LoadSpec,
    Result,
    ServerSpec,
    ensure_wrk,
    machine_us_per_request,
    measure,
    running,
    stop_all,
)
from bench.pgstore import DEFAULT_PG_URL, PgQuery, drop_leftovers  # noqa: E402


def _gateway(metrics: bool) -> tuple[tuple[str, Any], ...]:
    return (("gateway", {"auth": {"token": ADMIN_TOKEN}, "metrics": {"enabled": metrics}}),)


def _cpu_us(result: Result) -> float | None:
    if result.server_cpu_pct is None or not result.stats.rps:
        return None
    return result.server_cpu_pct / 100.0 / result.stats.rps * 1e6


def metrics_overhead(args: argparse.Namespace) -> int:
    ensure_wrk()
    load = LoadSpec(args.duration, args.warmup, args.connections, args.threads)
    base = ServerSpec("hookwise", "hookwise")
    rows: dict[bool, list[Result]] = {False: [], True: []}
    for i in range(args.rounds):
        for on in (False, True):
            name = f"metrics-{'on' if on else 'off'}"
            print(f"round {i + 1}: {name} /hooks/wake ...", flush=True)
            rows[on].append(measure(WAKE, replace(base, name=name, config=_gateway(on)), load))
    print()
    print(
        f"{'metrics':<8} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'srv µs/req':>11}"
        f" {'machine busy':>13} {'machine µs/req':>15}"
    )
    for on in (False, True):
        for r in rows[on]:
            print(
                f"{'on' if on else 'off':<8} {r.stats.rps:>9.0f} {r.stats.p50_ms or 0:>8.2f}"
                f" {r.stats.p99_ms or 0:>8.2f} {_cpu_us(r) or 0:>11.0f}"
                f" {r.machine_busy_pct or 0:>12.0f}% {machine_us_per_request(r) or 0:>15.0f}"
            )

    def median(on: bool, of: Any) -> float:
        return statistics.median(v for r in rows[on] if (v := of(r)) is not None)

    rps = median(True, lambda r: r.stats.rps) / median(False, lambda r: r.stats.rps)
    cpu = median(True, _cpu_us) / median(False, _cpu_us)
    print(
        f"\nmetrics on / off (medians of {args.rounds}): requests/s x{rps:.3f}, "
        f"server CPU per request x{cpu:.3f} ({(cpu - 1) * 100:+.1f}%)"
    )
    failed = any(r.notes for rs in rows.values() for r in rs)
    return 1 if failed else 0


# ---------------------------------------------------------------------------------- the soak


def _load(url: str, rate: float, duration: float, counts: dict[str, int], clients: int = 4) -> None:
    """POST at `rate` requests/s for `duration` s from `clients` threads, each on its own
    keep-alive connection, paced (a late request is sent at once, never skipped)."""
    import threading

    import httpx

    headers = {"Authorization": f"Bearer {HOOK_TOKEN}"}
    bodies = [
        ("/hooks/wake", {"text": "soak wake", "mode": "now"}),
        ("/hooks/agent", {"message": "soak run", "deliver": False, "wakeMode": "next-heartbeat"}),
    ]
    lock = threading.Lock()
    started = time.monotonic()

    def client(k: int) -> None:
        n = 0
        with httpx.Client(base_url=url, timeout=10) as c:
            while True:
                due = started + (n * clients + k) / rate
                if due - started >= duration:
                    return
                time.sleep(max(0.0, due - time.monotonic()))
                path, body = bodies[(n + k) % 2]
                try:
                    ok = c.post(path, json=body, headers=headers).status_code < 300
                except httpx.HTTPError:
                    ok = False
                with lock:
                    counts["ok" if ok else "failed"] += 1
                n += 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _sqlite_size(state_dir: Path) -> tuple[int, int]:
    """(the database's size as its readers see it, WAL included: page_count x page_size; the
    WAL file's size). Under steady load the WAL is checkpointed into the file only at quiet
    moments or past 256 MB (see the store), so the file alone would say little."""
    import sqlite3

    db = state_dir / "hookwise.db"
    wal = state_dir / "hookwise.db-wal"
    if not db.exists():
        return 0, 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()
    return pages * size, wal.stat().st_size if wal.exists() else 0


def soak(args: argparse.Namespace) -> int:
    keep = args.keep
    retention = {k: keep for k in ("runs", "events", "deliveries", "heartbeats", "transcripts")}
    retention |= {"requests": keep, "interval": args.interval}
    config = (
        ("retention", retention),
        ("agents", {"defaults": {"heartbeat": {"every": 0, "coalesceMs": 250}}}),
    )
    spec = ServerSpec(
        "soak", "hookwise", config=config, fresh_database_on=args.pg_url if args.pg else None
    )
    counts = {"ok": 0, "failed": 0}
    samples: list[tuple[float, int, int]] = []
    print(
        f"soak: {args.rate:g} requests/s for {args.duration:g} s (half /wake now, half /agent), "
        f"retention {keep} for every record, pruned every {args.interval}; "
        f"store: {'PostgreSQL' if args.pg else 'SQLite'}",
        flush=True,
    )
    with running(spec) as server:
        pg = PgQuery(server.store_url) if server.store_url else None

        def size() -> tuple[int, int]:
            if pg is not None:
                return int(pg.one("SELECT pg_database_size(current_database())")[0]), 0
            return _sqlite_size(server.state_dir)

        async def main() -> None:
            load = asyncio.create_task(
                asyncio.to_thread(_load, server.url, args.rate, args.duration, counts)
            )
            started = time.monotonic()
            while not load.done():
                await asyncio.sleep(min(args.every, 1.0))
                elapsed = time.monotonic() - started
                if not samples or elapsed - samples[-1][0] >= args.every:
                    db, wal = await asyncio.to_thread(size)
                    samples.append((elapsed, db, wal))
                    print(
                        f"  t={elapsed:6.1f}s accepted={counts['ok']:>7} failed={counts['failed']}"
                        f" database={db / 1e6:8.2f} MB"
                        + (f" wal file={wal / 1e6:7.2f} MB" if pg is None else ""),
                        flush=True,
                    )
            await load

        try:
            asyncio.run(main())
        finally:
            if pg is not None:
                pg.close()
    if len(samples) < 4:
        raise BenchError("the soak was too short to compare sizes")
    middle = samples[len(samples) // 2]
    end = samples[-1]
    growth = (end[1] - middle[1]) / middle[1] * 100 if middle[1] else float("nan")
    print(
        f"\ndatabase size: {middle[1] / 1e6:.2f} MB at t={middle[0]:.0f}s, "
        f"{end[1] / 1e6:.2f} MB at t={end[0]:.0f}s ({growth:+.1f}% over the second half); "
        f"{counts['ok']} requests accepted, {counts['failed']} failed"
    )
    return 1 if counts["failed"] else 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("metrics", help="/wake with metrics off and on")
    m.add_argument("--rounds", type=int, default=2)
    m.add_argument("--duration", type=int, default=10, help="measured seconds per run")
    m.add_argument("--warmup", type=int, default=2)
    m.add_argument("--connections", type=int, default=32)
    m.add_argument("--threads", type=int, default=2)
    m.set_defaults(func=metrics_overhead)
    s = sub.add_parser("soak", help="database size under steady load with retention on")
    s.add_argument("--duration", type=float, default=120)
    s.add_argument("--rate", type=float, default=150, help="requests per second")
    s.add_argument("--keep", default="15s", help="retention of every kind of record")
    s.add_argument("--interval", default="3s", help="retention.interval")
    s.add_argument("--every", type=float, default=10, help="seconds between size samples")
    s.add_argument("--pg", action="store_true", help="on a fresh PostgreSQL database")
    s.add_argument("--pg-url", default=DEFAULT_PG_URL)
    s.set_defaults(func=soak)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return int(args.func(args))
    except BenchError as e:
        print(f"bench: {e}", file=sys.stderr)
        return 2
    finally:
        stop_all()
        for line in drop_leftovers():
            print(f"bench: {line}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
