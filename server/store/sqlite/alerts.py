"""Alerts on SQLite (see `hookwise.server.store.alerts`). The writes are module-level functions of
the cursor, sent to the writer (process) as they are; the reads run on a reader thread. A mixin
of `SQLiteStore`."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from functools import partial

from ..alerts import (
    SEEN_SQLITE,
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
from ..listing import sqlite_placeholder as P
from ..records import NewDelivery
from .parts import SQLiteParts
from .runtime import insert_delivery


def _one(cur: sqlite3.Cursor, alert_id: str) -> AlertRecord | None:
    row = cur.execute(select_alert_sql(P, "alert_id = ?1"), (alert_id,)).fetchone()
    return None if row is None else alert_record(row)


def open_alert(cur: sqlite3.Cursor, alert: NewAlert, notes: tuple[NewDelivery, ...]) -> bool:
    """Insert the alert and its notifications, unless one of its rule and key is active."""
    ids = tuple(d.delivery_id for d in notes)
    if not cur.execute(insert_alert_sql(P), alert.row(ids)).rowcount:
        return False
    for d in notes:
        insert_delivery(cur, d, alert.now)
    return True


def alerts_seen(cur: sqlite3.Cursor, rows: str, now: float) -> None:
    cur.execute(SEEN_SQLITE, (now, rows))


def resolve_alert(
    cur: sqlite3.Cursor, alert_id: str, now: float, notes: tuple[NewDelivery, ...]
) -> bool:
    found = _one(cur, alert_id)
    if found is None or not found.active:
        return False
    sent = notifications_of(found.notifications, tuple(d.delivery_id for d in notes))
    cur.execute(resolve_sql(P), (now, sent, alert_id))
    for d in notes:
        insert_delivery(cur, d, now)
    return True


def ack_alert(cur: sqlite3.Cursor, alert_id: str, now: float, by: str) -> AlertRecord | None:
    cur.execute(ack_sql(P), (now, by, alert_id))
    return _one(cur, alert_id)


class SQLiteAlerts(SQLiteParts):
    """Open, see again, resolve and acknowledge alerts; read them."""

    async def open_alert(self, alert: NewAlert, notes: tuple[NewDelivery, ...]) -> bool:
        return await self.write(partial(open_alert, alert=alert, notes=notes))

    async def alerts_seen(self, seen: Sequence[SeenAlert], *, now: float) -> None:
        if seen:
            await self.write(partial(alerts_seen, rows=json.dumps(seen_rows(seen)), now=now))

    async def resolve_alert(
        self, alert_id: str, *, now: float, notes: tuple[NewDelivery, ...]
    ) -> bool:
        return await self.write(partial(resolve_alert, alert_id=alert_id, now=now, notes=notes))

    async def ack_alert(self, alert_id: str, *, now: float, by: str) -> AlertRecord | None:
        return await self.write(partial(ack_alert, alert_id=alert_id, now=now, by=by))

    async def get_alert(self, alert_id: str) -> AlertRecord | None:
        def fn(conn: sqlite3.Connection) -> AlertRecord | None:
            row = conn.execute(select_alert_sql(P, "alert_id = ?1"), (alert_id,)).fetchone()
            return None if row is None else alert_record(row)

        return await self._read(fn)

    async def active_alerts(self) -> list[AlertRecord]:
        def fn(conn: sqlite3.Connection) -> list[AlertRecord]:
            sql = select_alert_sql(P, "state <> 'resolved' ORDER BY seq")
            return [alert_record(r) for r in conn.execute(sql)]

        return await self._read(fn)
