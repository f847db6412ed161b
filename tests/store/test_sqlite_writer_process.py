"""SQLite's writer in a process of its own (`store.writer: process`, the default), on a real file
and a real gateway: a write the process dies in the middle of fails (it does not hang), a new
process takes the next writes; a job that cannot be sent fails alone; signals meant for the
gateway do not stop the writer before the gateway's last writes; when the gateway is killed,
the writer commits what it has and exits."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sqlite3
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from hookwise.server.store.sqlite import SQLiteStore
from hookwise.server.store.sqlite.writer_wire import WriterGone
from tests.store.support import accept_op, new_event
from tests.support.gateway import GatewayProcess, base_config
from tests.support.processes import children, running
from tests.support.wait import eventually


def _sleep_then_count(cur: Any, seconds: float) -> int:
    """A write job that takes its time (module-level: the writer process receives it pickled)."""
    time.sleep(seconds)
    return int(cur.execute("SELECT count(*) FROM events").fetchone()[0])


def _count(cur: Any) -> int:
    return int(cur.execute("SELECT count(*) FROM events").fetchone()[0])


def _run(path: Path, body: Any) -> Any:
    async def main() -> Any:
        store = SQLiteStore(path)
        store.lock_use(shared=False)
        await store.open()
        try:
            return await body(store)
        finally:
            await store.close()

    return asyncio.run(main())


def test_a_write_the_writer_dies_in_fails_and_a_new_writer_takes_the_next(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hookwise.store")

    async def body(store: SQLiteStore) -> None:
        first = store._writer.pid
        assert first is not None
        slow = store.write(partial(_sleep_then_count, seconds=30))
        await asyncio.sleep(0.5)  # the writer is inside the job
        os.kill(first, signal.SIGKILL)
        with pytest.raises(WriterGone, match="exited"):
            await asyncio.wait_for(slow, 10)
        # until the new writer has answered, readiness says so (the new one is still starting)
        assert "the store's writer is not running" in await store.readiness()
        # the next write waits for the new writer and is committed by it
        event = new_event()
        await asyncio.wait_for(store.accept(accept_op(events=(event,))), 20)
        assert store._writer.pid not in (None, first)
        assert await store.readiness() == []
        assert await store.write(_count) == 1

    _run(tmp_path / "h.db", body)
    assert "exited with signal SIGKILL: 1 writes failed; starting a new one" in caplog.text
    assert "is running again" in caplog.text


def test_a_job_that_cannot_be_sent_fails_alone(tmp_path: Path) -> None:
    async def body(store: SQLiteStore) -> None:
        unsendable = store.write(lambda cur: 1)  # a closure does not pickle
        after = store.accept(accept_op(events=(new_event(),)))
        with pytest.raises(Exception, match=r"lambda|pickle"):
            await unsendable
        await after
        assert await store.write(_count) == 1

    _run(tmp_path / "h.db", body)


def test_the_writer_ignores_signals_meant_for_the_gateway(tmp_path: Path) -> None:
    gw = GatewayProcess(base_config(), tmp_path / "gw").start()
    try:
        assert gw.proc is not None
        (writer,) = children(gw.proc.pid)
        for sig in (signal.SIGINT, signal.SIGTERM):  # what a terminal or a service manager sends
            os.kill(writer, sig)
        time.sleep(0.3)
        assert running(writer)
        assert gw.hook("wake", {"text": "still writing"}).status_code == 200
    finally:
        gw.stop()
    assert "Application shutdown complete" in gw.stderr()  # its last writes went through
    assert "writer process" not in gw.stderr()  # no writer lost, no restart
    assert not running(writer)


def test_a_killed_gateway_leaves_no_writer_behind_and_its_acknowledged_writes(
    tmp_path: Path,
) -> None:
    gw = GatewayProcess(base_config(), tmp_path / "gw").start()
    assert gw.proc is not None
    (writer,) = children(gw.proc.pid)
    ids = [gw.hook("wake", {"text": f"n{i}"}).json()["eventId"] for i in range(20)]
    gw.kill()
    eventually(lambda: not running(writer), timeout=10, what="the writer process to exit")
    with sqlite3.connect(gw.state_dir / "hookwise.db") as conn:
        stored = {r[0] for r in conn.execute("SELECT event_id FROM events")}
    assert set(ids) <= stored
