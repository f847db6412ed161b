"""PostgreSQL's write lanes wait the one back-off between reconnects: 0.1 s after the first
failure in a row, doubling, at most 5 s (`accept.RECONNECT`), and start again from 0.1 s once
a connection is made. Real connections: a closed port refuses, 127.0.0.1:5432 answers."""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import time
from collections.abc import Iterator

import asyncpg
import pytest

from hookwise.server.store.postgres.accept import RECONNECT, AcceptLane
from hookwise.server.store.postgres.writer import GroupCommitWriter
from tests.store.support import accept_op, new_event
from tests.support.postgres import fresh_database


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def database() -> Iterator[str]:
    with fresh_database() as url:
        yield url


class _Connections:
    """Connects to the database, except while `refusing` is above 0 (each refusal counts it
    down): then to a port nobody listens on."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.dead = f"postgresql://postgres@127.0.0.1:{_closed_port()}/test"
        self.refusing = 0

    async def __call__(self) -> asyncpg.Connection:
        if self.refusing > 0:
            self.refusing -= 1
            return await asyncpg.connect(self.dead, timeout=5)
        return await asyncpg.connect(self.url, timeout=5)


def _waits(caplog: pytest.LogCaptureFixture, pattern: str) -> list[float]:
    return [
        float(m.group(1))
        for r in caplog.records
        if (m := re.search(pattern, r.getMessage())) is not None
    ]


def test_the_policy_is_the_documented_one():
    assert [RECONNECT.step(n) for n in range(8)] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]


def test_the_accept_lane_backs_off_between_failed_connects_and_starts_again_after_one(
    database: str, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.WARNING, "hookwise.store")
    connections = _Connections(database)

    async def main() -> float:
        lane = AcceptLane(connections)
        await lane.start()
        await lane._conn.close()  # type: ignore[union-attr]  # the connection is lost
        connections.refusing = 100
        started = time.monotonic()
        with pytest.raises(OSError):  # four connects refused: the request fails with the last
            await lane.submit(accept_op(events=(new_event(),)))
        took = time.monotonic() - started
        connections.refusing = 0  # the database answers again: the next request connects
        with pytest.raises(asyncpg.PostgresError):  # (a fresh database has no tables)
            await lane.submit(accept_op(events=(new_event(),)))
        await lane._conn.close()  # type: ignore[union-attr]
        connections.refusing = 1
        with pytest.raises(asyncpg.PostgresError):
            await lane.submit(accept_op(events=(new_event(),)))
        await lane.stop()
        return took

    took = asyncio.run(main())
    waits = _waits(caplog, r"accept lane .* tried again in ([\d.]+) s")
    assert waits == [0.1, 0.2, 0.4, 0.8, 0.1]
    assert took >= 1.5


def test_the_group_commit_writer_backs_off_between_lost_connections_and_starts_again_after_a_commit(
    database: str, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.WARNING, "hookwise.store")
    connections = _Connections(database)

    async def select_one(conn: asyncpg.Connection) -> int:
        return int(await conn.fetchval("SELECT 1"))

    async def main() -> float:
        writer = GroupCommitWriter(connections)
        await writer.start()
        await writer._conn.close()  # type: ignore[union-attr]
        connections.refusing = 3  # three batches lost, the fourth try commits
        started = time.monotonic()
        assert await writer.submit(select_one) == 1
        took = time.monotonic() - started
        await writer._conn.close()  # type: ignore[union-attr]
        connections.refusing = 1
        assert await writer.submit(select_one) == 1
        await writer.stop()
        return took

    took = asyncio.run(main())
    assert _waits(caplog, r"reconnecting in ([\d.]+) s") == [0.1, 0.2, 0.4, 0.1]
    assert took >= 0.7
