"""Runtime benchmark: agent runs completed per second end to end, and the heartbeat's delay.

    .venv/bin/python bench/runs.py [--runs 3000] [--concurrency 32] [--samples 40]

With the built-in echo model, it starts hookwise on a fresh SQLite store and measures:

1. **runs/s end to end**: a `--seconds` burst of POSTs to `/hooks/agent` from wrk (32
   connections); then it waits until every accepted run has finished (its state, transcript and
   summary event committed). The figure is runs / (time the last run finished - time of the
   first POST): acceptance and execution together, on one process.
2. **heartbeat delay after `wake` with mode `now`**: `--samples` wakes, one at a time; the delay
   is the heartbeat's start minus the time the wake was accepted (both recorded by the gateway).
   The coalescing window (250 ms by default) is part of that delay by design.
3. the same delay while a flood of agent runs is being processed (the heartbeat has its own lane).

Targets (issue 4): at least 500 runs/s; a `now` heartbeat starts within 300 ms p99.
Figures are printed, never asserted; the last line is `BENCH_JSON {...}`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.gateway import HOOK_TOKEN, GatewayProcess, base_config  # noqa: E402

AUTH = {"Authorization": f"Bearer {HOOK_TOKEN}"}


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def db(gw: GatewayProcess) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{gw.state_dir / 'hookwise.db'}?mode=ro", uri=True)


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


def measure_runs(
    gw: GatewayProcess, seconds: int, concurrency: int, workdir: Path
) -> dict[str, float]:
    """A burst of agent requests from wrk, then wait until every accepted run has finished."""
    from bench.ingest import ensure_wrk

    script = workdir / "agent.lua"
    script.write_text(AGENT_LUA % HOOK_TOKEN)
    conn = db(gw)
    (before,) = conn.execute("SELECT COUNT(*) FROM runs").fetchone()
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
    (total,) = conn.execute("SELECT COUNT(*) FROM runs").fetchone()
    accepted = total - before
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        (pending,) = conn.execute(
            "SELECT COUNT(*) FROM runs WHERE state IN ('queued', 'running')"
        ).fetchone()
        if pending == 0:
            break
        time.sleep(0.05)
    (last,) = conn.execute("SELECT MAX(finished_at) FROM runs").fetchone()
    (ok,) = conn.execute("SELECT COUNT(*) FROM runs WHERE state = 'succeeded'").fetchone()
    (summaries,) = conn.execute("SELECT COUNT(*) FROM events WHERE source LIKE 'run:%'").fetchone()
    conn.close()
    return {
        "runs": accepted,
        "succeeded": ok - before,
        "summaries": summaries - before,
        "accept_per_s": accepted / (t_accepted - t0),
        "runs_per_s": accepted / (last - t0),
        "seconds": last - t0,
    }


def heartbeat_delays(gw: GatewayProcess, samples: int) -> list[float]:
    conn = db(gw)
    delays: list[float] = []
    with httpx.Client(base_url=gw.url, timeout=10) as client:
        for _ in range(samples):
            (before,) = conn.execute("SELECT COUNT(*) FROM heartbeats").fetchone()
            r = client.post("/hooks/wake", json={"text": "ping", "mode": "now"}, headers=AUTH)
            assert r.status_code == 200, r.text
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                row = conn.execute(
                    "SELECT requested_at, started_at FROM heartbeats WHERE seq > ? ORDER BY seq LIMIT 1",
                    (before,),
                ).fetchone()
                if row:
                    delays.append((row[1] - row[0]) * 1000)
                    break
                time.sleep(0.01)
            time.sleep(0.05)
    conn.close()
    return delays


def heartbeat_delays_under_flood(
    gw: GatewayProcess, samples: int, concurrency: int
) -> tuple[list[float], int]:
    stop = asyncio.Event()
    result: dict[str, int] = {}

    async def flood() -> None:
        result["sent"] = await post_runs(gw.url, 10**6, concurrency, stop)

    loop = asyncio.new_event_loop()
    import threading

    thread = threading.Thread(target=lambda: loop.run_until_complete(flood()), daemon=True)
    thread.start()
    time.sleep(1.0)
    try:
        delays = heartbeat_delays(gw, samples)
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(60)
    return delays, result.get("sent", 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds", type=int, default=5, help="length of the burst of /agent requests"
    )
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--samples", type=int, default=40)
    args = parser.parse_args(argv)

    config = base_config()
    config["agents"] = {"defaults": {"heartbeat": {"every": 0}}}
    out: dict[str, object] = {
        "machine": {
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
    }
    with tempfile.TemporaryDirectory(prefix="hookwise-bench-runs-") as tmp:
        gw = GatewayProcess(config, Path(tmp) / "gw")
        gw.start()
        try:
            asyncio.run(post_runs(gw.url, 200, 8))  # warm-up
            runs = measure_runs(gw, args.seconds, args.concurrency, Path(tmp))
            quiet = heartbeat_delays(gw, args.samples)
            flooded, flood_runs = heartbeat_delays_under_flood(
                gw, max(10, args.samples // 2), args.concurrency
            )
        finally:
            gw.stop()

    out["runs"] = runs
    out["heartbeat_ms"] = {
        "quiet": {
            "p50": statistics.median(quiet),
            "p99": percentile(quiet, 99),
            "max": max(quiet),
            "n": len(quiet),
        },
        "flood": {
            "p50": statistics.median(flooded),
            "p99": percentile(flooded, 99),
            "max": max(flooded),
            "n": len(flooded),
            "runs_posted": flood_runs,
        },
    }
    m = out["machine"]
    print(
        f"machine: {m['nproc']} CPUs, {m['cpu']}; Python {m['python']}; echo model; SQLite (synchronous=FULL)"
    )
    print(f"{'figure':48} {'value':>12}  target")
    print("-" * 80)
    ok = "PASS" if runs["runs_per_s"] >= 500 else "FAIL"
    print(
        f"{'agent runs completed end to end (runs/s)':48} {runs['runs_per_s']:>12,.0f}  >= 500: {ok}"
    )
    print(f"{'  /agent accepted during the burst (req/s)':48} {runs['accept_per_s']:>12,.0f}")
    print(
        f"{'  runs accepted / succeeded / summaries stored':48} {runs['runs']:>7} / {runs['succeeded']} / {runs['summaries']}"
    )
    print(f"{'  from the first POST to the last run finished':48} {runs['seconds']:>11.1f}s")
    for name, d in out["heartbeat_ms"].items():  # type: ignore[union-attr]
        ok = "PASS" if d["p99"] < 300 else "FAIL"
        p50, p99 = f"p50 {d['p50']:.0f}", f"p99 {d['p99']:.0f}"
        print(f"{'heartbeat delay after wake now, ' + name + ' (ms)':48} {p50:>12}")
        print(f"{'':48} {p99:>12}  < 300 ms: {ok}")
    print("BENCH_JSON " + json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
