"""When a write was committed (`store.commits`, a traced request's `store.commit` span): an
accept made while a caller asks is told the batch that committed it, measured where it ran (the
SQLite writer process, with its pid; PostgreSQL's accept lane on the gateway's connection,
without one); an accept made without asking is told nothing. The in-process SQLite writer
(`store.writer: thread`) reports nothing."""

from __future__ import annotations

import asyncio
import time

from hookwise.server.store.commits import Commit, commits
from tests.store.conftest import Backend, Store
from tests.store.support import accept_op, new_event


async def _accept_asking(store: Store, key: str | None = None) -> list[Commit]:
    sink: list[Commit] = []
    reset = commits.set(sink)
    try:
        await store.accept(accept_op(events=(new_event(),), key=key))
    finally:
        commits.reset(reset)
    return sink


def test_an_accept_that_asks_is_told_the_batch_that_committed_it(backend: Backend) -> None:
    async def body(store: Store) -> None:
        before = time.time_ns()
        told = await _accept_asking(store)
        key_told = await _accept_asking(store, key="k-1")  # a write that reads first
        after = time.time_ns()
        if backend.name == "sqlite" and backend.writer == "thread":
            assert told == key_told == []
            return
        for found in (told, key_told):
            [commit] = found
            assert before <= commit.start_ns <= commit.end_ns <= after
            assert commit.batch_size >= 1
        if backend.name == "sqlite":  # the writer process, not this one
            writer = store._writer.pid  # type: ignore[union-attr]
            assert told[0].pid == key_told[0].pid == writer and writer is not None
        else:  # a statement on this process's own connection
            assert told[0].pid is None
        assert told[0] != key_told[0]  # two batches, one after the other

    backend.run(body)


def test_accepts_that_share_a_batch_are_told_the_same_commit(backend: Backend) -> None:
    if backend.writer == "thread":
        return

    async def body(store: Store) -> None:
        # submitted in the same turn of the event loop: one frame, one batch or group
        told = await asyncio.gather(*(_accept_asking(store) for _ in range(5)))
        assert all(len(found) == 1 for found in told)
        shared = {found[0] for found in told}
        assert len(shared) < 5  # some rode one commit together: it says it held several
        assert max(c.batch_size for c in shared) >= 2

    backend.run(body)


def test_an_accept_that_does_not_ask_is_told_nothing(backend: Backend) -> None:
    async def body(store: Store) -> None:
        sink: list[Commit] = []
        asking = commits.set(sink)
        commits.reset(asking)  # asked, then stopped asking before the write
        await store.accept(accept_op(events=(new_event(),)))
        assert sink == []
        if backend.name == "sqlite" and backend.writer == "process":
            assert store._writer._timed == {}  # type: ignore[union-attr]

    backend.run(body)
