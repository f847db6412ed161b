"""Alerts on PostgreSQL (see `hookwise.server.store.alerts`). A mixin of `PostgresStore`: writes
through its group-commit writer, reads on its pool."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from ..alerts import (
    SEEN_POSTGRES,
    AlertRecord,
    NewAlert,
    SeenAlert,
    ack_sql,
    alert_record,
    insert_alert_sql,
    notifications_of,
    resolve_sql,
    seen_rows,
    select_alert_sql,
)
from ..listing import postgres_placeholder as P
from ..records import NewDelivery
from .parts import PostgresParts
from .runtime import insert_delivery


async def _one(
    conn: asyncpg.Connection, alert_id: str, *, lock: bool = False
) -> AlertRecord | None:
    sql = select_alert_sql(P, "alert_id = $1") + (" FOR UPDATE" if lock else "")
    row = await conn.fetchrow(sql, alert_id)
    return None if row is None else alert_record(row)


async def open_alert(
    conn: asyncpg.Connection, alert: NewAlert, notes: tuple[NewDelivery, ...]
) -> bool:
    ids = tuple(d.delivery_id for d in notes)
    done = await conn.execute(insert_alert_sql(P), *alert.row(ids))
    if not done.endswith(" 1"):  # `INSERT 0 1`, or `INSERT 0 0` when one is active
        return False
    for d in notes:
        await insert_delivery(conn, d, alert.now)
    return True


async def alerts_seen(conn: asyncpg.Connection, seen: Sequence[SeenAlert], now: float) -> None:
    ids, values, summaries, subjects = zip(*seen_rows(seen), strict=True)
    await conn.execute(SEEN_POSTGRES, now, list(ids), list(values), list(summaries), list(subjects))


async def resolve_alert(
    conn: asyncpg.Connection, alert_id: str, now: float, notes: tuple[NewDelivery, ...]
) -> bool:
    found = await _one(conn, alert_id, lock=True)
    if found is None or not found.active:
        return False
    sent = notifications_of(found.notifications, tuple(d.delivery_id for d in notes))
    await conn.execute(resolve_sql(P), now, sent, alert_id)
    for d in notes:
        await insert_delivery(conn, d, now)
    return True


async def ack_alert(
    conn: asyncpg.Connection, alert_id: str, now: float, by: str
) -> AlertRecord | None:
    await conn.execute(ack_sql(P), now, by, alert_id)
    return await _one(conn, alert_id)


class PostgresAlerts(PostgresParts):
    """Open, see again, resolve and acknowledge alerts; read them."""

    async def open_alert(self, alert: NewAlert, notes: tuple[NewDelivery, ...]) -> bool:
        return await self.write(lambda conn: open_alert(conn, alert, notes))

    async def alerts_seen(self, seen: Sequence[SeenAlert], *, now: float) -> None:
        if seen:
            await self.write(lambda conn: alerts_seen(conn, seen, now))

    async def resolve_alert(
        self, alert_id: str, *, now: float, notes: tuple[NewDelivery, ...]
    ) -> bool:
        return await self.write(lambda conn: resolve_alert(conn, alert_id, now, notes))

    async def ack_alert(self, alert_id: str, *, now: float, by: str) -> AlertRecord | None:
        return await self.write(lambda conn: ack_alert(conn, alert_id, now, by))

    async def get_alert(self, alert_id: str) -> AlertRecord | None:
        row = await self._readers.fetchrow(select_alert_sql(P, "alert_id = $1"), alert_id)
        return None if row is None else alert_record(row)

    async def active_alerts(self) -> list[AlertRecord]:
        rows = await self._readers.fetch(select_alert_sql(P, "state <> 'resolved' ORDER BY seq"))
        return [alert_record(r) for r in rows]
