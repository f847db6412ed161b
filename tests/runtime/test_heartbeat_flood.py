"""A flood of pending events drains in a few heartbeats (issue 26): each heartbeat takes a
large batch, the model reads a bounded digest (counts by source, the newest entries in full,
consecutive duplicates counted once), and every event is kept and marked consumed."""

from __future__ import annotations

import asyncio
import math
import sqlite3
from pathlib import Path

import attrs

from hookwise.server.runtime.digest import PROMPT_MAX_CHARS
from hookwise.server.runtime.heartbeat import BEAT_MAX_EVENTS
from hookwise.server.store.sqlite import SQLiteStore
from tests.fakes.model_server import ModelServer
from tests.runtime.test_runtime_http import config
from tests.store.support import accept_op, new_event
from tests.support.gateway import GatewayProcess
from tests.support.wait import eventually

DISTINCT = 11_000
DUPLICATES = 1_000
FLOOD = DISTINCT + DUPLICATES + 1  # and the request that asks for a heartbeat


def _prefill(db: Path) -> None:
    """The backlog a flood leaves: distinct events from two rules, then one alert repeated."""

    async def main() -> None:
        store = SQLiteStore(db)
        store.lock_use(shared=False)
        await store.open()
        try:
            events = [
                attrs.evolve(new_event(text=f"push {i} to main"), source="hook:github")
                if i % 2
                else attrs.evolve(new_event(text=f"invoice {i} paid"), source="hook:stripe")
                for i in range(DISTINCT)
            ]
            events += [
                attrs.evolve(new_event(text="disk full on db-1"), source="hook:alerts")
                for _ in range(DUPLICATES)
            ]
            for start in range(0, len(events), 500):
                await store.accept(accept_op(events=tuple(events[start : start + 500])))
        finally:
            await store.close()

    asyncio.run(main())


def _pending(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(
            conn.execute("SELECT count(*) FROM events WHERE consumed_at IS NULL").fetchone()[0]
        )
    finally:
        conn.close()


def test_a_flood_drains_in_a_few_heartbeats_each_prompt_a_bounded_digest(tmp_path: Path) -> None:
    with ModelServer(default_text="HEARTBEAT_OK") as model_server:
        gw = GatewayProcess(config(model_server, model="fake/m"), tmp_path / "gw")
        db = gw.state_dir / "hookwise.db"
        gw.state_dir.mkdir(parents=True)
        _prefill(db)
        gw.start()
        try:
            assert gw.hook("wake", {"text": "look now", "mode": "now"}).status_code == 200

            def beats() -> list[dict]:
                items = gw.admin("/api/heartbeats", limit=100)["items"]
                return items if sum(b["events"] for b in items) >= FLOOD else []

            done = eventually(beats, timeout=60, what="the flood consumed")
            assert _pending(db) == 0
            assert sum(b["events"] for b in done) == FLOOD
            assert all(b["state"] == "succeeded" for b in done)
            assert len(done) <= math.ceil(FLOOD / BEAT_MAX_EVENTS) + 2
        finally:
            gw.stop()
        prompts = [r.body["messages"][-1]["content"] for r in model_server.requests]
    assert len(prompts) == len(done)
    assert all(len(p) <= PROMPT_MAX_CHARS for p in prompts), [len(p) for p in prompts]
    last = prompts[-1]
    # the duplicates, consecutive, are one line with their count; the newest event in full
    assert "System: [hook:alerts] disk full on db-1 (x1000)" in last
    assert last.count("disk full on db-1") == 1
    assert "System: [hook] look now" in last
    # the counts by source cover the whole batch, shown or not
    assert "- hook:alerts: 1,000" in last
    first = prompts[0]
    assert f"{BEAT_MAX_EVENTS:,} pending system events" in first
    assert "- hook:github: 2,500" in first and "- hook:stripe: 2,500" in first
