"""Tool-using runs: runs completed per second with one MCP tool call each, and the run loop's
overhead per tool call beside the MCP server's own time.

    .venv/bin/python bench/tools.py [--runs 300] [--calls 400] [--concurrency 16]

Against the test MCP server (`tests/fakes/mcp_server.py`, the official SDK's server, over
stdio), with the built-in echo model (which calls `t.echo` for the line `call t.echo {...}`):

1. **overhead per call** (in process, no HTTP): `--calls` runs of the loop (`converse`), one
   call each, one at a time; from each run's time are subtracted the same SDK call made directly
   (`Client.call_tool`, measured in alternation: the server's and the transport's own time) and a
   run of the loop without tools (the model's time). Measured twice: with a recorder that keeps
   nothing (the loop itself: offering, naming, wrapping, the host's limits and metrics) and with
   the SQLite store recording each call (a `started` row durable before the call, the outcome
   after: two group commits). Target (issue 27): under 2 ms p50 beside the server's own time.
2. **runs/s end to end**: a gateway (SQLite, default settings) with one granted mapping; `--runs`
   hooks are posted by `--concurrency` clients; the figure is runs / (time the last run finished
   - time of the first POST), every run checked to have succeeded with one `ok` call; then the
   same runs on a gateway whose mapping grants nothing (no call: the baseline).

Figures are printed, never asserted; the last line is `BENCH_JSON {...}`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hookwise.engine.config.grants import Grant  # noqa: E402
from hookwise.engine.config.models import McpServerConfig, ToolsConfig  # noqa: E402
from hookwise.server.runtime.external import wrap_external  # noqa: E402
from hookwise.server.runtime.providers.base import ChatMessage  # noqa: E402
from hookwise.server.runtime.providers.echo import EchoProvider  # noqa: E402
from hookwise.server.runtime.toolloop import RunTools, StoreRecorder, converse  # noqa: E402
from hookwise.server.store.toolcalls import ToolCallRecord  # noqa: E402
from hookwise.server.tools.host import ToolHost  # noqa: E402
from tests.fakes.mcp_server import stdio_command  # noqa: E402
from tests.support.gateway import GatewayProcess, base_config  # noqa: E402
from tests.support.wait import eventually  # noqa: E402

TARGET_MS = 2.0


class NoRecorder:
    async def record(self, calls: Sequence[ToolCallRecord]) -> None:
        return None

    async def previous(self, run_id: str) -> tuple[int, int]:
        return 0, 0


def _ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered) * 1000, 3),
        "p90": round(ordered[int(len(ordered) * 0.9)] * 1000, 3),
    }


async def overhead(calls: int, recorder: Any) -> dict[str, Any]:
    c = stdio_command()
    server = McpServerConfig(command=c["command"], args=tuple(c["args"]), cwd=c["cwd"])
    host = ToolHost(ToolsConfig(mcp_servers={"t": server}), base_dir=REPO)
    provider = EchoProvider()
    message = wrap_external('call t.echo {"text": "hello"}', source="hook bench")
    messages = [ChatMessage("system", "s"), ChatMessage("user", message)]
    grant = Grant.parse(["t.echo"])
    try:
        client = await host.connections["t"].client(timeout=60)
        await host.offered(grant)
        loop_times, direct_times, bare_times = [], [], []
        for i in range(calls + 20):
            t0 = time.perf_counter()
            await client.call_tool("echo", {"text": "hello"})
            t1 = time.perf_counter()
            tools = RunTools(host, grant, recorder, f"bench-{time.time_ns()}-{i}")
            _completion, made = await converse(
                provider,
                "echo",
                messages,
                thinking=None,
                deadline=time.monotonic() + 30,
                tools=tools,
            )
            t2 = time.perf_counter()
            await converse(
                provider,
                "echo",
                messages,
                thinking=None,
                deadline=time.monotonic() + 30,
                tools=None,
            )
            t3 = time.perf_counter()
            assert len(made) == 1 and made[0].outcome == "ok", made
            if i >= 20:  # warm-up
                direct_times.append(t1 - t0)
                loop_times.append(t2 - t1)
                bare_times.append(t3 - t2)
        over = [
            loop - direct - bare
            for loop, direct, bare in zip(loop_times, direct_times, bare_times, strict=True)
        ]
        return {
            "direct_call_ms": _ms(direct_times),
            "run_with_one_call_ms": _ms(loop_times),
            "run_without_tools_ms": _ms(bare_times),
            "overhead_per_call_ms": _ms(over),
        }
    finally:
        await host.aclose()


async def overhead_with_store(calls: int, state: Path) -> dict[str, Any]:
    from hookwise.server.lifecycle.gateway import open_store

    store = open_store(None, state_dir=state, synchronous="full", writer="process")
    await store.open()
    try:
        return await overhead(calls, StoreRecorder(store))
    finally:
        await store.close()


def runs_per_second(
    runs: int, concurrency: int, workdir: Path, *, granted: bool = True
) -> dict[str, Any]:
    config = base_config(
        mappings=[
            {
                "id": "tool",
                "match": {"path": "tool"},
                "messageTemplate": 'call t.echo {"text": "{{n}}"}',
                "tools": ["t.echo"] if granted else [],
                "deliver": False,
            }
        ]
    )
    config["tools"] = {"mcpServers": {"t": stdio_command()}}
    gw = GatewayProcess(config, workdir).start()
    try:
        # the first run connects the server (it is started on first use)
        first = gw.hook("tool", {"n": 0}).json()["runId"]
        eventually(
            lambda: gw.admin(f"/api/runs/{first}")["run"]["state"] == "succeeded", timeout=120
        )
        assert gw.client is not None

        def post(n: int) -> str:
            import httpx

            with httpx.Client(base_url=gw.url, timeout=30) as client:
                r = client.post(
                    "/hooks/tool",
                    json={"n": n},
                    headers={"Authorization": f"Bearer {config['hooks']['token']}"},
                )
                r.raise_for_status()
                return str(r.json()["runId"])

        start = time.time()
        with ThreadPoolExecutor(concurrency) as pool:
            ids = list(pool.map(post, range(1, runs + 1)))

        def done() -> list[dict[str, Any]] | None:
            items = gw.admin("/api/runs", limit=500, rule="tool")["items"]
            ended = [r for r in items if r["runId"] in set(ids) and r["finishedAt"]]
            return ended if len(ended) == len(ids) else None

        ended = eventually(done, timeout=600, interval=0.2, what="every run to end")
        last = max(r["finishedAt"] for r in ended)
        import datetime as dt

        finish = dt.datetime.fromisoformat(last.replace("Z", "+00:00")).timestamp()
        states = {r["state"] for r in ended}
        sample = gw.admin(f"/api/runs/{ids[-1]}")["run"]["toolCalls"]
        return {
            "runs": runs,
            "concurrency": concurrency,
            "seconds": round(finish - start, 3),
            "runs_per_s": round(runs / (finish - start), 1),
            "states": sorted(states),
            "sample_calls": [(c["tool"], c["outcome"]) for c in sample],
        }
    finally:
        gw.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    out: dict[str, Any] = {}
    out["loop_overhead"] = asyncio.run(overhead(args.calls, NoRecorder()))
    print("loop, nothing recorded:", json.dumps(out["loop_overhead"]))
    with tempfile.TemporaryDirectory() as tmp:
        out["loop_overhead_recorded"] = asyncio.run(overhead_with_store(args.calls, Path(tmp)))
    print("loop, recorded in SQLite:", json.dumps(out["loop_overhead_recorded"]))
    with tempfile.TemporaryDirectory() as tmp:
        out["end_to_end"] = runs_per_second(args.runs, args.concurrency, Path(tmp))
    print("end to end:", json.dumps(out["end_to_end"]))
    with tempfile.TemporaryDirectory() as tmp:
        out["end_to_end_without_grant"] = runs_per_second(
            args.runs, args.concurrency, Path(tmp), granted=False
        )
    print("end to end, same runs without the grant:", json.dumps(out["end_to_end_without_grant"]))
    p50 = out["loop_overhead"]["overhead_per_call_ms"]["p50"]
    print(f"overhead per call p50: {p50} ms (target < {TARGET_MS} ms)")
    print("BENCH_JSON " + json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
