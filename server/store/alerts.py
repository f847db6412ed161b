"""Alerts in the store (table `alerts`, migration 24): the records, their rows and the SQL both
backends run, written once here with a placeholder style (`?n` or `$n`).

An alert is `open`, then `acknowledged` (an operator saw it) and/or `resolved` (its condition
cleared). At most one alert per (rule, key) is active (not resolved): the partial unique index
`alerts_active` makes `open` a no-op when one is, whichever process tried. The notifications an
alert sends (opened, resolved) are pending deliveries committed in the same transaction as the
state change, so an alert is never open without its notification planned, nor told twice.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

#: what an alert points at: `requests`, `runs`, `deliveries` -> ids (the newest, bounded)
Subjects = Mapping[str, tuple[str, ...]]

#: at most this many ids of each kind are kept with an alert
MAX_SUBJECTS = 100

ACTIVE_STATES = ("open", "acknowledged")

ALERT_COLUMNS = (
    "alert_id, rule, kind, alert_key, state, summary, value, threshold, seen, opened_at,"
    " last_seen_at, acked_at, acked_by, resolved_at, subjects, notifications"
)


@attrs.frozen
class AlertRecord:
    """A stored alert with its current state."""

    alert_id: str
    rule: str
    kind: str
    key: str
    state: str
    summary: str
    value: float
    threshold: float
    seen: int
    opened_at: float
    last_seen_at: float
    acked_at: float | None
    acked_by: str | None
    resolved_at: float | None
    subjects: Subjects
    notifications: tuple[str, ...]

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    def to_json(self) -> dict[str, Any]:
        return {
            "alertId": self.alert_id,
            "rule": self.rule,
            "kind": self.kind,
            "key": self.key,
            "state": self.state,
            "summary": self.summary,
            "value": self.value,
            "threshold": self.threshold,
            "seen": self.seen,
            "openedAt": self.opened_at,
            "lastSeenAt": self.last_seen_at,
            "ackedAt": self.acked_at,
            "ackedBy": self.acked_by,
            "resolvedAt": self.resolved_at,
            "subjects": {k: list(v) for k, v in self.subjects.items()},
            "notificationIds": list(self.notifications),
        }


def subjects_text(subjects: Subjects) -> str:
    return json.dumps({k: list(v)[:MAX_SUBJECTS] for k, v in sorted(subjects.items()) if v})


def merge_subjects(old: Subjects, new: Subjects) -> dict[str, tuple[str, ...]]:
    """The ids of both, newest (`new`) first, each id once, at most `MAX_SUBJECTS` per kind."""
    out: dict[str, tuple[str, ...]] = {}
    for kind in sorted({*old, *new}):
        ids = dict.fromkeys([*new.get(kind, ()), *old.get(kind, ())])
        out[kind] = tuple(ids)[:MAX_SUBJECTS]
    return out


def alert_record(row: Any) -> AlertRecord:
    r = list(row)
    if len(r) == 17:  # a listing's row starts with seq
        r = r[1:]
    subjects = {str(k): tuple(v) for k, v in json.loads(r[14]).items()}
    return AlertRecord(
        alert_id=r[0],
        rule=r[1],
        kind=r[2],
        key=r[3],
        state=r[4],
        summary=r[5],
        value=float(r[6]),
        threshold=float(r[7]),
        seen=int(r[8]),
        opened_at=float(r[9]),
        last_seen_at=float(r[10]),
        acked_at=r[11],
        acked_by=r[12],
        resolved_at=r[13],
        subjects=subjects,
        notifications=tuple(json.loads(r[15])),
    )


@attrs.frozen
class NewAlert:
    """An alert to open (if none of its rule and key is active)."""

    alert_id: str
    rule: str
    kind: str
    key: str
    summary: str
    value: float
    threshold: float
    now: float
    subjects: Subjects = attrs.field(factory=dict)

    def row(self, notifications: tuple[str, ...]) -> tuple[Any, ...]:
        return (
            self.alert_id,
            self.rule,
            self.kind,
            self.key,
            "open",
            self.summary,
            self.value,
            self.threshold,
            1,
            self.now,
            self.now,
            None,
            None,
            None,
            subjects_text(self.subjects),
            json.dumps(list(notifications)),
        )


def insert_alert_sql(p: Any) -> str:
    """Insert an alert unless one of its rule and key is active (then no row)."""
    holes = ", ".join(p(i) for i in range(1, 17))
    return (
        f"INSERT INTO alerts ({ALERT_COLUMNS}) VALUES ({holes})"
        " ON CONFLICT (rule, alert_key) WHERE state <> 'resolved' DO NOTHING"
    )


def select_alert_sql(p: Any, where: str) -> str:
    return f"SELECT {ALERT_COLUMNS} FROM alerts WHERE {where}"


@attrs.frozen
class SeenAlert:
    """An active alert whose condition still holds this round: its newest value and summary,
    and its subjects (those it had merged with the newest, `merge_subjects`)."""

    alert_id: str
    value: float
    summary: str
    subjects: Subjects


#: a round's still-holding alerts in one statement (SQLite: the rows as one JSON array)
SEEN_SQLITE = (
    "UPDATE alerts SET seen = seen + 1, last_seen_at = ?1,"
    " value = json_extract(s.value, '$[1]'), summary = json_extract(s.value, '$[2]'),"
    " subjects = json_extract(s.value, '$[3]')"
    " FROM json_each(?2) AS s"
    " WHERE alerts.alert_id = json_extract(s.value, '$[0]') AND alerts.state <> 'resolved'"
)
#: the same on PostgreSQL (the rows as four arrays)
SEEN_POSTGRES = (
    "UPDATE alerts AS a SET seen = a.seen + 1, last_seen_at = $1, value = s.value,"
    " summary = s.summary, subjects = s.subjects"
    " FROM unnest($2::text[], $3::float8[], $4::text[], $5::text[])"
    " AS s(alert_id, value, summary, subjects)"
    " WHERE a.alert_id = s.alert_id AND a.state <> 'resolved'"
)


def seen_rows(seen: Sequence[SeenAlert]) -> list[tuple[str, float, str, str]]:
    return [(a.alert_id, float(a.value), a.summary, subjects_text(a.subjects)) for a in seen]


def resolve_sql(p: Any) -> str:
    return (
        f"UPDATE alerts SET state = 'resolved', resolved_at = {p(1)},"
        f" notifications = {p(2)} WHERE alert_id = {p(3)} AND state <> 'resolved'"
    )


def ack_sql(p: Any) -> str:
    return (
        f"UPDATE alerts SET state = 'acknowledged', acked_at = {p(1)}, acked_by = {p(2)}"
        f" WHERE alert_id = {p(3)} AND state = 'open'"
    )


def notifications_of(record_notifications: tuple[str, ...], more: tuple[str, ...]) -> str:
    return json.dumps([*record_notifications, *more])
