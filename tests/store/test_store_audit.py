"""The audit log on every backend: an entry is kept as given (targets as a mapping), listed
newest first and filtered by who, what and outcome and a time window, paged, and pruned by
retention like the request log."""

from __future__ import annotations

from typing import Any

from hookwise.server.store.audit import AuditRecord
from hookwise.server.store.records import Filters
from hookwise.server.store.retention import TARGETS
from tests.store.conftest import Backend
from tests.store.support import NOW

AUDIT = next(t for t in TARGETS if t.key == "audit")


def entry(at: float, actor: str = "oncall", action: str = "retry", **kw: Any) -> AuditRecord:
    fields: dict[str, Any] = {
        "via": "api",
        "client": "203.0.113.7",
        "targets": {"runId": f"run-{at}"},
        "outcome": "ok",
        "status": 202,
    }
    fields.update(kw)
    return AuditRecord(at=at, actor=actor, action=action, **fields)


def test_an_entry_is_kept_as_given_and_listed_newest_first(backend: Backend) -> None:
    async def body(store: Any) -> None:
        await store.record_audit(entry(NOW - 20))
        await store.record_audit(
            entry(
                NOW - 10,
                "grafana",
                "reload",
                outcome="refused",
                status=403,
                code="insufficient_scope",
                targets={},
            )
        )
        page = await store.admin_list("audit", Filters(), limit=10, cursor=None)
        newest, oldest = page.items
        assert (newest.actor, newest.action, newest.outcome, newest.status, newest.code) == (
            "grafana",
            "reload",
            "refused",
            403,
            "insufficient_scope",
        )
        assert newest.targets == {} and newest.seq > oldest.seq
        assert oldest.targets == {"runId": f"run-{NOW - 20}"}
        assert (oldest.client, oldest.via, oldest.at, oldest.code) == (
            "203.0.113.7",
            "api",
            NOW - 20,
            None,
        )

    backend.run(body)


def test_the_audit_log_is_filtered_windowed_and_paged(backend: Backend) -> None:
    async def body(store: Any) -> None:
        for i in range(6):
            await store.record_audit(entry(NOW - 60 + i, "oncall" if i % 2 else "boss"))
        await store.record_audit(entry(NOW - 1, action="pause", outcome="failed", status=404))
        by = await store.admin_list("audit", Filters({"actor": "boss"}), limit=10, cursor=None)
        assert [e.at for e in by.items] == [NOW - 56, NOW - 58, NOW - 60]
        failed = await store.admin_list(
            "audit", Filters({"outcome": "failed", "action": "pause"}), limit=10, cursor=None
        )
        assert [e.at for e in failed.items] == [NOW - 1]
        window = Filters(since=NOW - 59, until=NOW - 56)
        assert [
            e.at for e in (await store.admin_list("audit", window, limit=10, cursor=None)).items
        ] == [NOW - 57, NOW - 58, NOW - 59]
        first = await store.admin_list("audit", Filters(), limit=4, cursor=None)
        rest = await store.admin_list("audit", Filters(), limit=4, cursor=first.next_cursor)
        assert len(first.items) == 4 and len(rest.items) == 3 and rest.next_cursor is None
        assert {e.seq for e in first.items}.isdisjoint({e.seq for e in rest.items})

    backend.run(body)


def test_retention_prunes_old_audit_entries_only(backend: Backend) -> None:
    async def body(store: Any) -> None:
        for age in (400, 300, 200, 5):
            await store.record_audit(entry(NOW - age))
        upto = await store.retention_boundary(AUDIT, NOW - 100)
        assert await store.prune_batch(AUDIT, upto=upto, cutoff=NOW - 100, limit=2) == 2
        upto = await store.retention_boundary(AUDIT, NOW - 100)
        assert await store.prune_batch(AUDIT, upto=upto, cutoff=NOW - 100, limit=2) == 1
        left = await store.admin_list("audit", Filters(), limit=10, cursor=None)
        assert [e.at for e in left.items] == [NOW - 5]

    backend.run(body)
