"""The store contract on the request path, on every backend: `accept` and what it writes,
idempotency keys, group commit, the admin listings and their cursors, and pruning."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from hookwise.server.store.base import Accepted, EventRecord, Page, RequestLogEntry, RunRecord
from tests.store.conftest import Backend
from tests.store.support import (
    NOW,
    accept_op,
    add_delivery,
    add_runs,
    log_entry,
    new_event,
    new_run,
    without_ids,
)

# --- accept --------------------------------------------------------------------------------------


def test_accept_writes_events_and_the_log_line(backend: Backend) -> None:
    async def body(store: Any) -> None:
        first, second = new_event(text="one"), new_event(text="two")
        answer = await store.accept(accept_op(events=(first, second), path="/hooks/wake"))
        assert answer == Accepted(status=202, body=b'{"ok":true}')
        pending = await store.pending_events("main", limit=10)
        assert [(e.event_id, e.text) for e in pending] == [
            (first.event_id, "one"),
            (second.event_id, "two"),
        ]
        assert pending[0] == EventRecord(
            seq=pending[0].seq,
            event_id=first.event_id,
            session="main",
            text="one",
            source="hook:test",
            mode="next-heartbeat",
            trusted=False,
            created_at=NOW,
            consumed_at=None,
        )
        log = await store.request_log(limit=10, cursor=None)
        assert without_ids(log.items) == without_ids(
            [
                attrs.evolve(
                    log_entry(path="/hooks/wake"), event_ids=(first.event_id, second.event_id)
                )
            ]
        )

    backend.run(body)


def test_accept_records_runs_queued_with_every_field(backend: Backend) -> None:
    async def body(store: Any) -> None:
        run = new_run(timeout=30.0, session_key="hook:test")
        await store.accept(accept_op(runs=(run,)))
        got = await store.get_run(run.run_id)
        assert got == RunRecord(
            seq=got.seq,
            run_id=run.run_id,
            session_key="hook:test",
            name="Test",
            message="do it",
            rule_id="rule-1",
            state="queued",
            wake_mode="now",
            deliver=True,
            channel="slack",
            to="C123",
            model="echo/echo",
            thinking="low",
            timeout_seconds=30.0,
            fallback_channel="discord",
            allow_unsafe_external_content=False,
            attempts=0,
            created_at=NOW,
            started_at=None,
            finished_at=None,
            reply=None,
            error=None,
            model_used=None,
            input_tokens=None,
            output_tokens=None,
            request_id=(await store.request_log(limit=1, cursor=None)).items[0].request_id,
        )
        assert await store.has_queued_runs()

    backend.run(body)


def test_get_run_of_an_unknown_id_is_none(backend: Backend) -> None:
    async def body(store: Any) -> None:
        assert await store.get_run("nope") is None
        assert not await store.has_queued_runs()

    backend.run(body)


def test_log_request_is_written_with_the_next_group(backend: Backend) -> None:
    async def body(store: Any) -> None:
        refused = RequestLogEntry(
            at=NOW, path="/hooks/wake", status=401, client="10.0.0.9", size=0, code="unauthorized"
        )
        store.log_request(refused)
        await store.accept(accept_op())
        log = await store.request_log(limit=10, cursor=None)
        assert without_ids(log.items) == without_ids([log_entry(), refused])
        assert log.items[1].request_id == refused.request_id

    backend.run(body)


# --- idempotency ---------------------------------------------------------------------------------


def test_a_replay_returns_the_first_response_and_writes_only_the_log_line(backend: Backend) -> None:
    async def body(store: Any) -> None:
        first = await store.accept(accept_op(runs=(new_run(),), key="k1", body=b"first"))
        again = await store.accept(
            accept_op(runs=(new_run(),), key="k1", body=b"second", status=200, now=NOW + 5)
        )
        assert first == Accepted(status=202, body=b"first")
        assert again == Accepted(status=202, body=b"first", replayed=True)
        runs = await store.list_runs(limit=10, cursor=None, state=None)
        assert len(runs.items) == 1
        log = await store.request_log(limit=10, cursor=None)
        assert len(log.items) == 2
        # the first request links to the run it created, and the run back to it; the replay
        # created nothing and links to nothing
        replay, original = log.items
        assert original.run_ids == (runs.items[0].run_id,) and replay.run_ids == ()
        assert runs.items[0].request_id == original.request_id != replay.request_id

    backend.run(body)


def test_the_same_key_with_another_fingerprint_is_a_conflict_and_writes_nothing(
    backend: Backend,
) -> None:
    async def body(store: Any) -> None:
        await store.accept(accept_op(events=(new_event(),), key="k1", fingerprint="a"))
        other = await store.accept(accept_op(events=(new_event(),), key="k1", fingerprint="b"))
        assert other == Accepted(status=0, body=b"", conflict=True)
        assert len((await store.list_events("main", limit=10, cursor=None)).items) == 1
        assert len((await store.request_log(limit=10, cursor=None)).items) == 1

    backend.run(body)


def test_a_key_older_than_the_window_is_taken_over(backend: Backend) -> None:
    async def body(store: Any) -> None:
        await store.accept(accept_op(runs=(new_run(),), key="k1", body=b"first", window=10.0))
        inside = await store.accept(
            accept_op(runs=(new_run(),), key="k1", window=10.0, now=NOW + 9.5)
        )
        assert inside.replayed and inside.body == b"first"
        expired = await store.accept(
            accept_op(
                runs=(new_run(),),
                key="k1",
                fingerprint="other",
                body=b"second",
                window=10.0,
                now=NOW + 10,
            )
        )
        assert expired == Accepted(status=202, body=b"second")
        replay = await store.accept(
            accept_op(key="k1", fingerprint="other", window=10.0, now=NOW + 11)
        )
        assert replay == Accepted(status=202, body=b"second", replayed=True)
        assert len((await store.list_runs(limit=10, cursor=None, state=None)).items) == 2

    backend.run(body)


def test_requests_without_a_key_are_never_replayed(backend: Backend) -> None:
    async def body(store: Any) -> None:
        for _ in range(3):
            assert not (await store.accept(accept_op(runs=(new_run(),)))).replayed
        assert len((await store.list_runs(limit=10, cursor=None, state=None)).items) == 3

    backend.run(body)


def test_twenty_concurrent_requests_with_one_key_create_one_run(backend: Backend) -> None:
    async def body(store: Any) -> None:
        answers = await asyncio.gather(
            *(
                store.accept(accept_op(runs=(new_run(),), key="same", body=f"{i}".encode()))
                for i in range(20)
            )
        )
        fresh = [a for a in answers if not a.replayed]
        assert len(fresh) == 1
        assert all(a.replayed and a.body == fresh[0].body for a in answers if a is not fresh[0])
        assert len((await store.list_runs(limit=50, cursor=None, state=None)).items) == 1
        assert len((await store.request_log(limit=50, cursor=None)).items) == 20

    backend.run(body)


# --- group commit --------------------------------------------------------------------------------


def test_fifty_concurrent_accepts_are_all_committed(backend: Backend) -> None:
    async def body(store: Any) -> None:
        runs = [new_run() for _ in range(50)]
        answers = await asyncio.gather(*(store.accept(accept_op(runs=(r,))) for r in runs))
        assert all(a.status == 202 and not a.replayed for a in answers)
        other = backend.store()  # another connection (process) sees every one
        await other.open()
        try:
            listed = await other.list_runs(limit=100, cursor=None, state=None)
        finally:
            await other.close()
        assert sorted(r.run_id for r in listed.items) == sorted(r.run_id for r in runs)

    backend.run(body)


def test_a_failing_write_rolls_back_alone(backend: Backend) -> None:
    async def body(store: Any) -> None:
        (taken,) = await add_runs(store, 1)
        doomed = accept_op(events=(new_event(text="doomed"),), runs=(new_run(taken),))
        ops = [accept_op(events=(new_event(text=f"ok {i}"),)) for i in range(9)]
        ops.insert(4, doomed)
        answers = await asyncio.gather(*(store.accept(op) for op in ops), return_exceptions=True)
        assert isinstance(answers[4], backend.integrity_error)
        assert all(isinstance(a, Accepted) for i, a in enumerate(answers) if i != 4)
        texts = [e.text for e in await store.pending_events("main", limit=20)]
        assert sorted(texts) == sorted(f"ok {i}" for i in range(9))
        log = await store.request_log(limit=20, cursor=None)
        assert len(log.items) == 1 + 9  # add_runs's request and the nine that succeeded

    backend.run(body)


# --- listings and cursors ------------------------------------------------------------------------


async def walk(
    fetch: Callable[[str | None], Awaitable[Page]],
) -> list[tuple[list[Any], str | None]]:
    """Every page of a listing, following the cursors."""
    pages: list[tuple[list[Any], str | None]] = []
    cursor: str | None = None
    while True:
        page = await fetch(cursor)
        pages.append((list(page.items), page.next_cursor))
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor
        assert len(pages) < 50, "the cursors never end"


def test_list_events_pages_newest_first_by_session(backend: Backend) -> None:
    async def body(store: Any) -> None:
        for i in range(5):
            await store.accept(
                accept_op(events=(new_event(text=f"e{i}"), new_event(session="other")))
            )
        pages = await walk(lambda c: store.list_events("main", limit=2, cursor=c))
        assert [[e.text for e in items] for items, _ in pages] == [
            ["e4", "e3"],
            ["e2", "e1"],
            ["e0"],
        ]
        assert [cursor for _, cursor in pages] == [
            str(pages[0][0][1].seq),
            str(pages[1][0][1].seq),
            None,
        ]

    backend.run(body)


def test_a_listing_that_fills_its_last_page_has_no_next_cursor(backend: Backend) -> None:
    async def body(store: Any) -> None:
        for i in range(4):
            await store.accept(accept_op(events=(new_event(text=f"e{i}"),)))
        pages = await walk(lambda c: store.list_events("main", limit=2, cursor=c))
        assert [([e.text for e in items], c is None) for items, c in pages] == [
            (["e3", "e2"], False),
            (["e1", "e0"], True),
        ]

    backend.run(body)


def test_list_runs_pages_newest_first_and_filters_by_state(backend: Backend) -> None:
    async def body(store: Any) -> None:
        ids = await add_runs(store, 5)
        claimed = await store.claim_runs(limit=2, now=NOW)
        assert [r.run_id for r in claimed] == ids[:2]
        pages = await walk(lambda c: store.list_runs(limit=2, cursor=c, state=None))
        assert [[r.run_id for r in items] for items, _ in pages] == [
            ids[4:2:-1],
            ids[2:0:-1],
            ids[:1],
        ]
        assert pages[0][1] == str(pages[0][0][-1].seq)
        queued = await walk(lambda c: store.list_runs(limit=2, cursor=c, state="queued"))
        assert [[r.run_id for r in items] for items, _ in queued] == [[ids[4], ids[3]], [ids[2]]]
        running = await store.list_runs(limit=10, cursor=None, state="running")
        assert [r.run_id for r in running.items] == [ids[1], ids[0]]
        assert running.next_cursor is None

    backend.run(body)


def test_request_log_pages_newest_first(backend: Backend) -> None:
    async def body(store: Any) -> None:
        for i in range(5):
            await store.accept(accept_op(path=f"/hooks/{i}"))
        pages = await walk(lambda c: store.request_log(limit=3, cursor=c))
        assert [[e.path for e in items] for items, _ in pages] == [
            ["/hooks/4", "/hooks/3", "/hooks/2"],
            ["/hooks/1", "/hooks/0"],
        ]
        assert pages[0][1] is not None and int(pages[0][1]) > 0

    backend.run(body)


def test_list_deliveries_pages_newest_first_and_filters(backend: Backend) -> None:
    async def body(store: Any) -> None:
        ids = [await add_delivery(store) for _ in range(3)]
        skipped = await add_delivery(store, state="skipped")
        pages = await walk(lambda c: store.list_deliveries(limit=2, cursor=c))
        assert [[d.delivery_id for d in items] for items, _ in pages] == [
            [skipped, ids[2]],
            [ids[1], ids[0]],
        ]
        pending = await walk(lambda c: store.list_deliveries(limit=2, cursor=c, state="pending"))
        assert [[d.delivery_id for d in items] for items, _ in pending] == [
            [ids[2], ids[1]],
            [ids[0]],
        ]
        assert pending[0][1] is not None
        by_run = await store.list_deliveries(limit=10, cursor=None, run_id="nope")
        assert by_run.items == [] and by_run.next_cursor is None

    backend.run(body)


def test_list_deliveries_filters_by_run(backend: Backend) -> None:
    from hookwise.server.store.records import RunOutcome
    from tests.store.support import new_delivery

    async def body(store: Any) -> None:
        (run_id,) = await add_runs(store, 1)
        await add_delivery(store)
        d = new_delivery(run_id=run_id)
        await store.finish_run(
            RunOutcome(run_id=run_id, state="succeeded", finished_at=NOW, delivery=d)
        )
        listed = await store.list_deliveries(limit=10, cursor=None, run_id=run_id)
        assert [x.delivery_id for x in listed.items] == [d.delivery_id]

    backend.run(body)


# --- prune ---------------------------------------------------------------------------------------


def test_prune_forgets_old_keys_and_log_lines_only(backend: Backend) -> None:
    async def body(store: Any) -> None:
        await store.accept(accept_op(key="old", body=b"old", now=NOW - 100, path="/old"))
        await store.accept(accept_op(key="new", body=b"new", now=NOW - 10, path="/new"))
        await store.prune(now=NOW, idempotency_window=50, log_retention=50)
        log = await store.request_log(limit=10, cursor=None)
        assert [e.path for e in log.items] == ["/new"]
        # a window far longer than the pruning one: only a forgotten key is taken afresh
        old = await store.accept(accept_op(key="old", body=b"again", now=NOW))
        new = await store.accept(accept_op(key="new", body=b"again", now=NOW))
        assert old == Accepted(status=202, body=b"again")
        assert new == Accepted(status=202, body=b"new", replayed=True)

    backend.run(body)
