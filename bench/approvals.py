"""Approvals benchmark: what parking and resuming a run costs.

    .venv/bin/python bench/approvals.py [--runs 500] [--store sqlite|postgresql|URL]
                                        [--decisions 20] [--no-e2e]

Two parts, figures printed, never asserted (numbers on a busy shared machine are indicative):

- **store**: a fresh store accepts `--runs` runs and claims them; then each is parked (one
  transaction: the run's state and its stored conversation of about 2 KB, one `approvals` row),
  decided (the conditional update, the run queued again) and claimed again. Microseconds per
  park, per decision and per re-claim, with `--concurrency` writers at once (group commits).
- **e2e**: a real gateway (SQLite, the echo model, a local MCP server over stdio) parks a run;
  the benchmark approves it through the admin API and reads, from the run's tool-call record,
  when the approved call started: the time from the decision to the tool call, over
  `--decisions` runs (median and p90).

The last line is `BENCH_JSON {...}`.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._store import (  # noqa: E402
    MakeStore,
    StoreKind,
    accept_run,
    add_store_option,
    bench_run,
    concurrently,
)
from hookwise.server.runtime.parking import ParkedState  # noqa: E402
from hookwise.server.runtime.providers.base import ChatMessage, ToolCall  # noqa: E402
from hookwise.server.store.approvals import ApprovalRecord  # noqa: E402
from hookwise.server.store.base import AcceptOp  # noqa: E402


def _accept(n: int) -> AcceptOp:
    return accept_run(bench_run(n, message=f"merge acme/api#{n}", rule_id="ops"), "/hooks/ops")


PARKED = ParkedState(
    conversation=(
        ChatMessage("system", "You are an agent. " * 40),
        ChatMessage("user", "merge the pull request " * 30),
        ChatMessage(
            "assistant",
            "",
            tool_calls=(ToolCall("c1", "github__merge", {"number": 7}, '{"number": 7}'),),
        ),
    ),
    results=(),
    content="merge the pull request",
    recorded=0,
).dumps()


def _approval(n: int) -> ApprovalRecord:
    now = time.time()
    return ApprovalRecord(
        approval_id=f"ap-{n:07d}",
        run_id=f"run-{n:07d}",
        seq=1,
        call_id="c1",
        server="github",
        tool="merge",
        arguments='{"number": 7}',
        arguments_digest="sha256:x",
        token_hash=f"hash-{n:07d}",
        state="pending",
        created_at=now,
        expires_at=now + 3600,
    )


async def _store_part(make: MakeStore, runs: int, concurrency: int) -> dict[str, float]:
    store = make()
    await store.open()
    try:
        for n in range(runs):
            await store.accept(_accept(n))
        claimed = 0
        while claimed < runs:
            got = await store.claim_runs(limit=runs, now=time.time(), lease=60, default_timeout=600)
            claimed += len(got)

        async def each(fn: Any) -> float:
            return await concurrently(fn, runs, concurrency) / runs * 1e6

        park = await each(lambda n: store.park_run(f"run-{n:07d}", PARKED, [_approval(n)]))
        decide = await each(
            lambda n: store.decide_approval(
                approval_id=f"ap-{n:07d}", state="approved", by="bench", via="api", now=time.time()
            )
        )
        began = time.perf_counter()
        again = 0
        while again < runs:
            got = await store.claim_runs(limit=runs, now=time.time(), lease=60, default_timeout=600)
            if not got:
                break
            again += len(got)
        reclaim = (time.perf_counter() - began) / max(1, again) * 1e6
        return {
            "park_us": round(park, 1),
            "decide_us": round(decide, 1),
            "reclaim_us": round(reclaim, 1),
        }
    finally:
        await store.close()


def _e2e(decisions: int) -> dict[str, float]:
    import httpx

    from tests.fakes.mcp_server import stdio_command
    from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess

    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    config = {
        "hooks": {
            "enabled": True,
            "token": HOOK_TOKEN,
            "mappings": [
                {
                    "id": "ops",
                    "match": {"path": "ops"},
                    "messageTemplate": "{{text}}",
                    "tools": [{"tool": "t.count", "approve": True}],
                }
            ],
        },
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "tools": {"mcpServers": {"t": stdio_command()}},
    }
    waits: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        gw = GatewayProcess(config, Path(folder)).start()
        try:
            client = httpx.Client(base_url=gw.url, timeout=30)
            for _ in range(decisions):
                run_id = gw.hook("ops", {"text": "call t.count {}"}).json()["runId"]
                while True:
                    run = client.get(f"/api/runs/{run_id}", headers=admin).json()["run"]
                    if run["state"] == "awaiting_approval":
                        break
                    time.sleep(0.01)
                approval = run["approvals"][0]["approvalId"]
                decided_at = time.time()
                client.post(f"/api/approvals/{approval}/approve", headers=admin)
                while True:
                    run = client.get(f"/api/runs/{run_id}", headers=admin).json()["run"]
                    if run["toolCalls"]:
                        break
                    time.sleep(0.005)
                started = dt.datetime.fromisoformat(run["toolCalls"][0]["startedAt"]).timestamp()
                waits.append((started - decided_at) * 1000)
        finally:
            gw.stop()
    waits.sort()
    return {
        "decision_to_call_ms_median": round(statistics.median(waits), 1),
        "decision_to_call_ms_p90": round(waits[int(len(waits) * 0.9) - 1], 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=16)
    add_store_option(parser)
    parser.add_argument("--decisions", type=int, default=20)
    parser.add_argument("--no-e2e", action="store_true")
    args = parser.parse_args()
    kind = StoreKind.parse(args.store)
    if kind is None:
        return 2
    with kind.fresh(pool_size=8) as make:
        store = asyncio.run(_store_part(make, args.runs, args.concurrency))
    print(f"store ({kind.name}, {args.runs} runs, {args.concurrency} at once):")
    for key, value in store.items():
        print(f"  {key:<12} {value:>10.1f}")
    results: dict[str, Any] = {"store": store}
    if not args.no_e2e:
        e2e = _e2e(args.decisions)
        print(f"e2e (sqlite gateway, echo model, stdio MCP server, {args.decisions} decisions):")
        for key, value in e2e.items():
            print(f"  {key:<28} {value:>8.1f}")
        results["e2e"] = e2e
    print("BENCH_JSON " + json.dumps({"backend": kind.name, **results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
