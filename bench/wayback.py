"""The way back, measured: `/hooks/agent?wait` beside plain `/hooks/agent`, and callback delay.

    .venv/bin/python bench/wayback.py [--seconds 5] [--concurrency 16] [--samples 30]

With the built-in echo model, on a fresh SQLite store each:

1. **plain**: `--concurrency` clients POST `/hooks/agent` for `--seconds` (answered 202 once the
   run is stored); requests/s and p50/p99 latency.
2. **wait**: the same with `?wait=30s`: each answer is the run's outcome (200), so a request's
   latency is acceptance plus the run (claim, echo, final commit) plus the waiter's wake-up.
   Answers that are not 200 are counted apart.
3. **callback delay**: `--samples` runs of a mapping with a `callback` to a loopback receiver, one
   at a time; the delay is the receiver's clock when the signed POST arrived minus the run's
   `finishedAt` (the gateway's clock, same machine).

Figures are printed, never asserted; the last line is `BENCH_JSON {...}`. The client runs in
this process (httpx, asyncio), so on a small machine it competes with the server for CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess  # noqa: E402

AUTH = {"Authorization": f"Bearer {HOOK_TOKEN}"}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SECRET = "whsec_" + base64.b64encode(b"bench-callback-secret-0123456789").decode()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def config(**hooks: Any) -> dict[str, Any]:
    return {
        "hooks": {"enabled": True, "token": HOOK_TOKEN, **hooks},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {"defaults": {"heartbeat": {"every": 0}, "maxConcurrentRuns": 16}},
    }


async def flood(url: str, seconds: float, concurrency: int, wait: bool) -> dict[str, Any]:
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    path = "/hooks/agent" + ("?wait=30s" if wait else "")
    body = {"message": "bench", "deliver": False, "wakeMode": "next-heartbeat"}
    stop = time.perf_counter() + seconds

    async def client() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as c:
            while time.perf_counter() < stop:
                t0 = time.perf_counter()
                r = await c.post(path, json=body, headers=AUTH)
                latencies.append(time.perf_counter() - t0)
                statuses[r.status_code] = statuses.get(r.status_code, 0) + 1

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    return {
        "requests": len(latencies),
        "rps": len(latencies) / elapsed,
        "p50_ms": 1000 * percentile(latencies, 50),
        "p99_ms": 1000 * percentile(latencies, 99),
        "statuses": statuses,
    }


class _Receiver:
    """A loopback receiver recording when each callback arrived, by run id."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                at = time.time()
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.arrived[json.loads(data)["data"]["runId"]] = at
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/cb"


def callback_delays(root: Path, samples: int) -> list[float]:
    receiver = _Receiver()
    mapping = {
        "id": "cb",
        "match": {"path": "cb"},
        "action": "agent",
        "messageTemplate": "{{ n }}",
        "deliver": False,
        "wakeMode": "next-heartbeat",
        "callback": {"url": receiver.url, "secret": SECRET},
    }
    gw = GatewayProcess(config(mappings=[mapping]), root / "callback").start()
    delays: list[float] = []
    try:
        assert gw.client is not None
        for n in range(samples):
            run_id = gw.hook("cb", {"n": n}).json()["runId"]
            deadline = time.monotonic() + 30
            while run_id not in receiver.arrived and time.monotonic() < deadline:
                time.sleep(0.005)
            run = gw.client.get(f"/api/runs/{run_id}", headers=ADMIN).json()["run"]
            if run_id in receiver.arrived and run["finishedAt"] is not None:
                finished = datetime.fromisoformat(run["finishedAt"].replace("Z", "+00:00"))
                delays.append(receiver.arrived[run_id] - finished.timestamp())
    finally:
        gw.stop()
        receiver.httpd.shutdown()
    return delays


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--samples", type=int, default=30)
    args = ap.parse_args()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="hookwise-wayback-") as tmp:
        root = Path(tmp)
        for name, wait in (("plain", False), ("wait", True)):
            gw = GatewayProcess(config(), root / name).start()
            try:
                asyncio.run(flood(gw.url, 1.0, args.concurrency, wait))  # warm-up
                out[name] = asyncio.run(flood(gw.url, args.seconds, args.concurrency, wait))
            finally:
                gw.stop()
        delays = callback_delays(root, args.samples)
    out["callback_delay_ms"] = {
        "samples": len(delays),
        "p50": 1000 * statistics.median(delays) if delays else None,
        "p99": 1000 * percentile(delays, 99) if delays else None,
        "max": 1000 * max(delays) if delays else None,
    }
    print(f"{'':8} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8}  statuses")
    for name in ("plain", "wait"):
        r = out[name]
        print(f"{name:8} {r['rps']:8.1f} {r['p50_ms']:8.1f} {r['p99_ms']:8.1f}  {r['statuses']}")
    d = out["callback_delay_ms"]
    if d["samples"]:
        print(
            f"callback delay after the run's end: p50 {d['p50']:.1f} ms, p99 {d['p99']:.1f} ms,"
            f" max {d['max']:.1f} ms ({d['samples']} samples)"
        )
    print("BENCH_JSON " + json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
