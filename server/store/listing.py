"""The admin listings as SQL, for both stores: newest first, keyset-paginated on `seq`, narrowed
by equality filters and a creation-time window, each walking an index instead of sorting.

Every filter column has an index ending in `seq` (SQLite appends the rowid to every index), so
`col = ? AND seq < cursor ORDER BY seq DESC LIMIT n` reads n index entries. A time window is
turned into bounds on `seq` through the index on the creation time: the first row at or after
`since` and the last before `until` (ids and times grow together), so the walk stops at the
window's edge instead of scanning to the end of the table; the time condition itself is kept,
so a row stored out of time order (two processes, one clock tick) is never shown outside it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs

from .alerts import ALERT_COLUMNS, alert_record
from .audit import AUDIT_COLUMNS, audit_record
from .lanes import requeued_state
from .records import (
    Filters,
    HeartbeatRecord,
    Page,
    RetryRequest,
    StoredPayload,
)
from .rows import (
    DELIVERY_COLUMNS,
    EVENT_COLUMNS,
    HEARTBEAT_COLUMNS,
    LOG_COLUMNS,
    RETRY_COLUMNS,
    RUN_COLUMNS,
    TURN_COLUMNS,
    cursor_value,
    delivery_record,
    event_record,
    heartbeat_record,
    request_record,
    run_record,
    turn_record,
)


@attrs.frozen
class Listing:
    """A table the admin API lists: what it selects (first column `seq`), its creation-time
    column, and the columns it may be filtered on (each with an index)."""

    table: str
    columns: str
    time_column: str
    filter_columns: frozenset[str]


Placeholder = Callable[[int], str]


def sqlite_placeholder(n: int) -> str:
    return f"?{n}"


def postgres_placeholder(n: int) -> str:
    return f"${n}"


class Arguments:
    """Statement arguments, each taken once and named by its placeholder."""

    def __init__(self, placeholder: Placeholder) -> None:
        self.values: list[Any] = []
        self._placeholder = placeholder

    def __call__(self, value: Any) -> str:
        self.values.append(value)
        return self._placeholder(len(self.values))


def equal_conditions(listing: Listing, filters: Filters, arg: Arguments) -> list[str]:
    """`column = value` for each equality filter (only on the listing's filter columns)."""
    out = []
    for column, value in sorted(filters.equal.items()):
        if column not in listing.filter_columns:
            raise ValueError(f"{listing.table} cannot be filtered on {column}")
        out.append(f"{column} = {arg(value)}")
    return out


def window_conditions(
    listing: Listing, filters: Filters, arg: Arguments, *, below: int | None = None
) -> list[str]:
    """The time window as bounds on `seq` (read through the time index) plus the time check;
    with `below` (a page's cursor), also `seq < below`, folded into the upper bound when there
    is `until` (an index range has one upper bound: two would leave one to check row by row)."""
    t, table = listing.time_column, listing.table
    out = []
    if filters.since is not None:
        since = arg(filters.since)
        out.append(
            f"seq >= (SELECT seq FROM {table} WHERE {t} >= {since} ORDER BY {t}, seq LIMIT 1)"
        )
        out.append(f"+{t} >= {since}")  # `+`: a condition to check, not an index to use
    if filters.until is not None:
        until = arg(filters.until)
        before = f" AND seq < {arg(below)}" if below is not None else ""
        out.append(
            f"seq <= (SELECT seq FROM {table} WHERE {t} < {until}{before}"
            f" ORDER BY {t} DESC, seq DESC LIMIT 1)"
        )
        out.append(f"+{t} < {until}")
    elif below is not None:
        out.append(f"seq < {arg(below)}")
    return out


def listing_query(
    listing: Listing,
    filters: Filters,
    *,
    cursor: str | None,
    limit: int,
    placeholder: Placeholder,
) -> tuple[str, list[Any]]:
    """The statement and its arguments for one page (`limit + 1` rows, see `page_of`)."""
    arg = Arguments(placeholder)
    where = [
        *equal_conditions(listing, filters, arg),
        *window_conditions(listing, filters, arg, below=cursor_value(cursor)),
    ]
    sql = (
        f"SELECT {listing.columns} FROM {listing.table} WHERE {' AND '.join(where)}"
        f" ORDER BY seq DESC LIMIT {arg(limit + 1)}"
    )
    return sql, arg.values


SESSIONS_QUERY = (
    # the distinct session keys after the cursor, one index seek each (a loose index scan), with
    # each one's last turn time and its last route (primary-key lookups); in key order as made
    "WITH RECURSIVE keys(k, n) AS ("
    " SELECT (SELECT min(session_key) FROM turns WHERE session_key > {after}), 1"
    " UNION ALL"
    " SELECT (SELECT min(session_key) FROM turns WHERE session_key > keys.k), keys.n + 1"
    " FROM keys WHERE keys.k IS NOT NULL AND keys.n <= {limit}"
    ") SELECT k, (SELECT created_at FROM turns WHERE session_key = k ORDER BY seq DESC LIMIT 1),"
    " (SELECT last_channel FROM sessions WHERE session_key = k),"
    " (SELECT last_to FROM sessions WHERE session_key = k)"
    " FROM keys WHERE k IS NOT NULL"
)

#: PostgreSQL's planner, told that a listing walks an index: with few matching rows expected it
#: would otherwise read them all through a bitmap and sort them, which is what grows with the
#: store. Set for the listing's transaction only (`SET LOCAL`).
POSTGRES_WALK = (
    "SET LOCAL enable_sort = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_seqscan = off"
)


def sessions_query(*, cursor: str | None, limit: int, placeholder: Placeholder) -> tuple[str, list]:
    """Sessions with a transcript, by key, after the key `cursor` (`limit + 1` rows)."""
    sql = SESSIONS_QUERY.format(after=placeholder(1), limit=placeholder(2))
    return sql, [cursor or "", limit + 1]


class ListingShortcuts:
    """The store's older listing calls, each one `admin_list` with its filters."""

    async def admin_list(
        self, name: str, filters: Filters, *, limit: int, cursor: str | None
    ) -> Page:
        raise NotImplementedError

    async def list_events(self, session: str, *, limit: int, cursor: str | None) -> Page:
        return await self.admin_list(
            "events", Filters({"session": session}), limit=limit, cursor=cursor
        )

    async def list_runs(
        self, *, limit: int, cursor: str | None, state: str | None, agent: str | None = None
    ) -> Page:
        equal = {k: v for k, v in (("state", state), ("agent_id", agent)) if v is not None}
        return await self.admin_list("runs", Filters(equal), limit=limit, cursor=cursor)

    async def request_log(self, *, limit: int, cursor: str | None) -> Page:
        return await self.admin_list("requests", Filters(), limit=limit, cursor=cursor)

    async def list_heartbeats(self, *, limit: int) -> list[HeartbeatRecord]:
        page = await self.admin_list("heartbeats", Filters(), limit=limit, cursor=None)
        return list(page.items)

    async def list_deliveries(
        self, *, limit: int, cursor: str | None, run_id: str | None = None, state: str | None = None
    ) -> Page:
        equal = {k: v for k, v in (("run_id", run_id), ("state", state)) if v is not None}
        return await self.admin_list("deliveries", Filters(equal), limit=limit, cursor=cursor)


# --- what the admin API lists --------------------------------------------------------------------

LISTINGS: dict[str, tuple[Listing, Callable[[Any], Any]]] = {
    "events": (
        Listing("events", EVENT_COLUMNS, "created_at", frozenset({"session", "source"})),
        event_record,
    ),
    "runs": (
        Listing(
            "runs",
            RUN_COLUMNS,
            "created_at",
            frozenset({"state", "agent_id", "rule_id", "session_key", "channel"}),
        ),
        run_record,
    ),
    "deliveries": (
        Listing(
            "deliveries",
            f"seq, {DELIVERY_COLUMNS}",
            "created_at",
            # `delivery_id` is unique: its index finds the one row (an alert's deliveries)
            frozenset({"state", "channel", "run_id", "delivery_id"}),
        ),
        lambda r: delivery_record(tuple(r)[1:]),
    ),
    "heartbeats": (  # one every few minutes: small enough to filter without an index
        Listing("heartbeats", f"seq, {HEARTBEAT_COLUMNS}", "started_at", frozenset({"state"})),
        lambda r: heartbeat_record(tuple(r)[1:]),
    ),
    "requests": (
        Listing(
            "request_log", f"seq, {LOG_COLUMNS}", "at", frozenset({"status", "rule_id", "path"})
        ),
        lambda r: request_record(tuple(r)[1:]),
    ),
    "turns": (
        Listing("turns", TURN_COLUMNS, "created_at", frozenset({"session_key"})),
        turn_record,
    ),
    "audit": (
        Listing("audit", AUDIT_COLUMNS, "at", frozenset({"actor", "action", "outcome"})),
        audit_record,
    ),
    "alerts": (
        Listing("alerts", f"seq, {ALERT_COLUMNS}", "opened_at", frozenset({"state", "rule"})),
        alert_record,
    ),
}


# --- sending failed work back to the queue -----------------------------------------------------


@attrs.frozen
class Retryable:
    """How a table's failed rows go back to the queue: its id and error columns, and what a
    retry sets (`{now}` is the time of the retry)."""

    listing: Listing
    id_column: str
    error_column: str
    reset: str


RETRYABLE = {
    "run": Retryable(
        LISTINGS["runs"][0],
        "run_id",
        "error",
        # `held` while a pause holds the run (`UPDATE runs ... WHERE seq = ...`)
        f"state = {requeued_state('runs')}, started_at = NULL, finished_at = NULL,"
        " lease_until = NULL, reply = NULL, error = NULL",
    ),
    "delivery": Retryable(
        LISTINGS["deliveries"][0],
        "delivery_id",
        "last_error",
        "state = 'pending', next_attempt_at = {now}, updated_at = {now}, lease_until = NULL",
    ),
}


def retry_pick_query(
    kind: str, req: RetryRequest, placeholder: Placeholder
) -> tuple[str, list[Any]]:
    """The rows a retry takes, oldest first: seq, id, state, error, attempts."""
    spec = RETRYABLE[kind]
    arg = Arguments(placeholder)
    states = ", ".join(arg(s) for s in req.states)
    where = [f"state IN ({states})"]
    if req.target_id is not None:
        where.append(f"{spec.id_column} = {arg(req.target_id)}")
    if req.filters is not None:
        where += equal_conditions(spec.listing, req.filters, arg)
        where += window_conditions(spec.listing, req.filters, arg)
    sql = (
        f"SELECT seq, {spec.id_column}, state, {spec.error_column}, attempts"
        f" FROM {spec.listing.table} WHERE {' AND '.join(where)} ORDER BY seq"
    )
    if req.limit is not None:
        sql += f" LIMIT {arg(req.limit)}"
    return sql, arg.values


def retry_update(kind: str, placeholder: Placeholder) -> tuple[str, bool]:
    """Send one row back to the queue: the statement, and whether its arguments are
    (now, seq) rather than (seq,)."""
    spec = RETRYABLE[kind]
    uses_now = "{now}" in spec.reset
    reset = spec.reset.format(now=placeholder(1))
    seq = placeholder(2 if uses_now else 1)
    return f"UPDATE {spec.listing.table} SET {reset} WHERE seq = {seq}", uses_now


def retry_log(placeholder: Placeholder) -> str:
    values = ", ".join(placeholder(n) for n in range(1, 8))
    return f"INSERT INTO retries ({RETRY_COLUMNS}) VALUES ({values})"


# --- kept payloads -------------------------------------------------------------------------------

PAYLOAD_COLUMNS = "request_id, path, query, headers, body, created_at"


def payload_row(p: StoredPayload) -> tuple[Any, ...]:
    return (p.request_id, p.path, p.query, json.dumps(p.headers), p.body, p.created_at)


def payload_record(row: Any) -> StoredPayload:
    r = list(row)
    headers = tuple((str(k), str(v)) for k, v in json.loads(r[3]))
    return StoredPayload(r[0], r[1], r[2], headers, bytes(r[4]), r[5])


# --- delivery attempts (the console's run page) --------------------------------------------------

ATTEMPT_COLUMNS = "delivery_id, at, channel, recipient, outcome, error"


def attempts_query(count: int, placeholder: Placeholder) -> str:
    marks = ", ".join(placeholder(i + 1) for i in range(count))
    return (
        f"SELECT {ATTEMPT_COLUMNS} FROM delivery_attempts WHERE delivery_id IN ({marks})"
        " ORDER BY seq"
    )


# --- activity over time (the console's charts) --------------------------------------------------

FAILED_RUN_STATES = ("failed", "timed_out")


def activity_query(
    name: str, *, since: float, width: float, failed: bool, placeholder: Placeholder
) -> tuple[str, list[Any]]:
    """How many rows of listing `name` were created in each `width`-second bucket from `since` on
    (`failed`: only failed or timed-out runs, failed deliveries): one pass over the creation-time
    index."""
    listing, _ = LISTINGS[name]
    t = listing.time_column
    since_p, width_p = placeholder(1), placeholder(2)
    if placeholder is postgres_placeholder:
        bucket = f"CAST(floor(({t} - {since_p}) / {width_p}) AS INTEGER)"
    else:  # SQLite: the difference is never negative, so truncation is floor
        bucket = f"CAST(({t} - {since_p}) / {width_p} AS INTEGER)"
    where = f"{t} >= {since_p}"
    if failed:
        where += " AND state IN ('failed', 'timed_out')"
    sql = f"SELECT {bucket} AS b, count(*) FROM {listing.table} WHERE {where} GROUP BY b"
    return sql, [since, width]
