"""The store contract for alerts, on every backend: an alert opens once per rule and key with its
notifications in the same commit; while active, opening again writes nothing; being seen again
counts and keeps the newest subjects; acknowledging changes an open alert only; resolving plans
its notifications once; after it, the same rule and key may open a new alert; the listing pages
and filters them; two stores (two processes) opening at once open one."""

from __future__ import annotations

import asyncio
from typing import Any

from hookwise.server.ids import new_id
from hookwise.server.store.alerts import NewAlert, SeenAlert, merge_subjects
from hookwise.server.store.records import Filters, NewDelivery
from hookwise.server.store.retention import TARGETS
from tests.store.conftest import Backend
from tests.store.support import NOW


def _alert(key: str = "slack", **kw: Any) -> NewAlert:
    fields: dict[str, Any] = {
        "alert_id": new_id(),
        "rule": "deliveries_failing:slack",
        "kind": "deliveries_failing",
        "key": key,
        "summary": "3 failing deliveries to slack",
        "value": 3.0,
        "threshold": 1.0,
        "now": NOW,
        "subjects": {"deliveries": ("d1", "d2")},
    } | kw
    return NewAlert(**fields)


def _note(text: str = "alert opened") -> NewDelivery:
    return NewDelivery(
        delivery_id=new_id(), text=text, state="pending", channel="telegram", to="42"
    )


async def _delivery_ids(store: Any) -> list[str]:
    page = await store.list_deliveries(limit=50, cursor=None)
    return [d.delivery_id for d in page.items]


def test_an_alert_opens_once_with_its_notification_and_resolves_once(backend: Backend) -> None:
    async def body(store: Any) -> None:
        first, note = _alert(), _note()
        assert await store.open_alert(first, (note,)) is True
        again = _alert(summary="other")
        assert await store.open_alert(again, (_note(),)) is False  # deduplicated while open
        assert await _delivery_ids(store) == [note.delivery_id]
        assert await store.get_alert(again.alert_id) is None
        opened = await store.get_alert(first.alert_id)
        newest = {"deliveries": ("d3", "d1"), "runs": ("r1",)}
        subjects = merge_subjects(opened.subjects, newest)
        seen = SeenAlert(first.alert_id, 4.0, "4 failing", subjects)
        await store.alerts_seen([seen], now=NOW + 5)
        got = await store.get_alert(first.alert_id)
        assert (got.state, got.seen, got.value, got.summary, got.last_seen_at) == (
            "open",
            2,
            4.0,
            "4 failing",
            NOW + 5,
        )
        assert dict(got.subjects) == {"deliveries": ("d3", "d1", "d2"), "runs": ("r1",)}
        assert got.notifications == (note.delivery_id,)
        [active] = await store.active_alerts()
        assert active.alert_id == first.alert_id

        acked = await store.ack_alert(first.alert_id, now=NOW + 6, by="oncall")
        assert (acked.state, acked.acked_at, acked.acked_by) == ("acknowledged", NOW + 6, "oncall")
        # an acknowledged alert is still active: no second one opens
        assert await store.open_alert(_alert(), (_note(),)) is False

        resolved_note = _note("resolved")
        assert await store.resolve_alert(first.alert_id, now=NOW + 9, notes=(resolved_note,))
        assert not await store.resolve_alert(first.alert_id, now=NOW + 10, notes=(_note(),))
        done = await store.get_alert(first.alert_id)
        assert (done.state, done.resolved_at) == ("resolved", NOW + 9)
        assert done.notifications == (note.delivery_id, resolved_note.delivery_id)
        assert await store.active_alerts() == []
        # acknowledging a resolved alert changes nothing
        assert (await store.ack_alert(first.alert_id, now=NOW + 11, by="x")).state == "resolved"
        assert sorted(await _delivery_ids(store)) == sorted(
            [note.delivery_id, resolved_note.delivery_id]
        )
        # the condition comes back: a new alert
        assert await store.open_alert(_alert(now=NOW + 20), (_note(),)) is True
        assert len(await store.active_alerts()) == 1

    backend.run(body)


def test_a_round_s_still_holding_alerts_are_seen_in_one_call_a_resolved_one_left_alone(
    backend: Backend,
) -> None:
    async def body(store: Any) -> None:
        one, two, gone = _alert(key="one"), _alert(key="two"), _alert(key="gone")
        for a in (one, two, gone):
            assert await store.open_alert(a, ())
        await store.resolve_alert(gone.alert_id, now=NOW + 1, notes=())
        await store.alerts_seen([], now=NOW + 2)  # nothing holds: nothing written
        seen = [
            SeenAlert(one.alert_id, 5.0, "5 failing", {"deliveries": ("d9",)}),
            SeenAlert(two.alert_id, 7.5, "7 failing", {"runs": ("r'1", 'r"2')}),
            SeenAlert(gone.alert_id, 9.0, "9 failing", {}),  # resolved meanwhile
        ]
        await store.alerts_seen(seen, now=NOW + 3)
        got = {a.alert_id: a for a in await store.active_alerts()}
        assert (got[one.alert_id].seen, got[one.alert_id].value) == (2, 5.0)
        assert got[one.alert_id].summary == "5 failing"
        assert dict(got[one.alert_id].subjects) == {"deliveries": ("d9",)}
        assert (got[two.alert_id].seen, got[two.alert_id].last_seen_at) == (2, NOW + 3)
        assert dict(got[two.alert_id].subjects) == {"runs": ("r'1", 'r"2')}
        resolved = await store.get_alert(gone.alert_id)
        assert (resolved.state, resolved.seen, resolved.value) == ("resolved", 1, 3.0)

    backend.run(body)


def test_alerts_are_listed_newest_first_and_filtered(backend: Backend) -> None:
    async def body(store: Any) -> None:
        ids = []
        for i in range(3):
            a = _alert(key=f"k{i}", rule=f"rule-{i % 2}", now=NOW + i)
            assert await store.open_alert(a, ())
            ids.append(a.alert_id)
        await store.resolve_alert(ids[0], now=NOW + 5, notes=())
        page = await store.admin_list("alerts", Filters(), limit=2, cursor=None)
        assert [a.alert_id for a in page.items] == [ids[2], ids[1]]
        rest = await store.admin_list("alerts", Filters(), limit=2, cursor=page.next_cursor)
        assert [a.alert_id for a in rest.items] == [ids[0]]
        open_ = await store.admin_list("alerts", Filters({"state": "open"}), limit=9, cursor=None)
        assert [a.alert_id for a in open_.items] == [ids[2], ids[1]]
        rule = await store.admin_list("alerts", Filters({"rule": "rule-0"}), limit=9, cursor=None)
        assert [a.alert_id for a in rule.items] == [ids[2], ids[0]]

    backend.run(body)


def test_two_processes_opening_the_same_alert_open_one(backend: Backend) -> None:
    async def body(one: Any, two: Any) -> None:
        results = await asyncio.gather(
            *(s.open_alert(_alert(), (_note(),)) for s in (one, two, one, two))
        )
        assert sorted(results) == [False, False, False, True]
        assert len(await one.active_alerts()) == 1
        assert len(await _delivery_ids(two)) == 1

    backend.run(body, instances=2)


def test_resolved_alerts_are_pruned_with_the_deliveries_active_ones_never(
    backend: Backend,
) -> None:
    async def body(store: Any) -> None:
        [target] = [t for t in TARGETS if t.table == "alerts"]
        old, active = _alert(key="old", now=NOW - 100), _alert(key="active", now=NOW - 100)
        young = _alert(key="young", now=NOW)
        for a in (old, active, young):
            assert await store.open_alert(a, ())
        await store.resolve_alert(old.alert_id, now=NOW - 90, notes=())
        await store.resolve_alert(young.alert_id, now=NOW, notes=())
        upto = await store.retention_boundary(target, NOW - 50)
        assert await store.prune_batch(target, upto=upto, cutoff=NOW - 50, limit=10) == 1
        assert await store.get_alert(old.alert_id) is None
        assert (await store.get_alert(active.alert_id)).state == "open"
        assert (await store.get_alert(young.alert_id)).state == "resolved"

    backend.run(body)
