"""Does one huge tool result stall the gateway? `/healthz` latency while a tool returns 50 MiB.

Run from the repository root:

    .venv/bin/python bench/tool_flood.py [--size-mib 50] [--rounds 2] [--probe-ms 20]

One hookwise (durable SQLite store) with the test MCP server (`tests/fakes/mcp_server.py`, the
official SDK over stdio) granted to a mapping, `callTimeoutSeconds: 120`, `maxResultBytes:
1000`. Each round: `/healthz` is probed alone for 3 s (baseline), then while a run calls the
tool `big` for `--size-mib` MiB (the server writes the result twice over: its text and its
structured content), one request every `--probe-ms` ms until the run ends. It prints p50, p99
and max of `/healthz` in both phases, how the call ended (outcome, truncated, the size the
record keeps), how long it took, and the gateway's RSS before and after, against the target
(p99 under 50 ms while the tool answers); last line `BENCH_JSON {...}`.

Exit codes: 0 done, 2 could not run, 130 interrupted. The target is reported, not enforced.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ingest import ADMIN_TOKEN, HOOK_TOKEN, BenchError, ServerSpec, running, stop_all

from tests.fakes.mcp_server import stdio_command

TARGET_P99_MS = 50.0


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    if not ordered:
        return {"n": 0, "p50": 0.0, "p99": 0.0, "max": 0.0}
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"n": len(ordered), "p50": statistics.median(ordered), "p99": p99, "max": ordered[-1]}


def _probe(url: str, stop: threading.Event, every: float, out: list[float]) -> None:
    with httpx.Client(base_url=url, timeout=30) as client:
        while not stop.is_set():
            t0 = time.perf_counter()
            client.get("/healthz").raise_for_status()
            out.append((time.perf_counter() - t0) * 1000)
            stop.wait(every)


def _round(url: str, pid: int, size: int, every: float) -> dict[str, Any]:
    baseline: list[float] = []
    stop = threading.Event()
    prober = threading.Thread(target=_probe, args=(url, stop, every, baseline))
    prober.start()
    time.sleep(3)
    stop.set()
    prober.join()
    during: list[float] = []
    stop = threading.Event()
    rss_before = _rss_mib(pid)
    prober = threading.Thread(target=_probe, args=(url, stop, every, during))
    prober.start()
    started = time.perf_counter()
    headers = {"Authorization": f"Bearer {HOOK_TOKEN}"}
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    peak = rss_before
    with httpx.Client(base_url=url, timeout=60) as client:
        r = client.post("/hooks/big", json={"text": f'call t.big {{"size": {size}}}'},
                        headers=headers)  # fmt: skip
        r.raise_for_status()
        run_id = r.json()["runId"]
        while True:
            peak = max(peak, _rss_mib(pid))
            run = client.get(f"/api/runs/{run_id}", headers=admin).json()["run"]
            if run["state"] not in ("queued", "running"):
                break
            time.sleep(0.2)
    elapsed = time.perf_counter() - started
    stop.set()
    prober.join()
    calls = run.get("toolCalls") or []
    call = calls[0] if calls else {}
    return {
        "baseline_ms": _percentiles(baseline),
        "during_ms": _percentiles(during),
        "run_state": run["state"],
        "call": {k: call.get(k) for k in ("outcome", "truncated", "resultBytes", "durationMs")},
        "run_seconds": round(elapsed, 2),
        "rss_mib": {
            "before": round(rss_before, 1),
            "peak": round(peak, 1),
            "after": round(_rss_mib(pid), 1),
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--probe-ms", type=float, default=20)
    args = parser.parse_args()
    hooks = {
        "enabled": True,
        "token": HOOK_TOKEN,
        "mappings": [
            {
                "id": "big",
                "match": {"path": "big"},
                "messageTemplate": "{{text}}",
                "tools": ["t.big"],
            }
        ],
    }
    tools = {"mcpServers": {"t": stdio_command()}, "callTimeoutSeconds": 120,
             "maxResultBytes": 1000}  # fmt: skip
    spec = ServerSpec("tool-flood", "hookwise", config=(("hooks", hooks), ("tools", tools)))
    try:
        with running(spec) as server:
            # the first call starts the MCP server: not measured
            _round(server.url, server.proc.pid, 1000, args.probe_ms / 1000)
            results = [
                _round(server.url, server.proc.pid, args.size_mib << 20, args.probe_ms / 1000)
                for _ in range(args.rounds)
            ]
    except BenchError as e:
        print(f"tool_flood: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        stop_all()
        return 130
    for i, r in enumerate(results, 1):
        b, d = r["baseline_ms"], r["during_ms"]
        print(
            f"round {i}: /healthz alone p50 {b['p50']:.1f} ms p99 {b['p99']:.1f} ms;"
            f" during a {args.size_mib} MiB result p50 {d['p50']:.1f} ms p99 {d['p99']:.1f} ms"
            f" max {d['max']:.1f} ms (n={d['n']}); call {r['call']['outcome']}"
            f" truncated={r['call']['truncated']} resultBytes={r['call']['resultBytes']};"
            f" run {r['run_seconds']} s; RSS {r['rss_mib']['before']} -> peak"
            f" {r['rss_mib']['peak']} -> {r['rss_mib']['after']} MiB"
        )
    worst = max(r["during_ms"]["p99"] for r in results)
    verdict = "met" if worst < TARGET_P99_MS else "missed"
    print(f"target: /healthz p99 under {TARGET_P99_MS:g} ms during the result: {verdict}"
          f" (worst p99 {worst:.1f} ms)")  # fmt: skip
    print("BENCH_JSON " + json.dumps({"size_mib": args.size_mib, "rounds": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
