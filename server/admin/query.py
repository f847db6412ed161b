"""The admin API's filters: the values each accepts, checked before any query (a bad value is
`400 invalid_query` naming the parameter and what it allows), turned into store `Filters`.

Filter names are the API's (`rule`, `session`, ...); `FILTER_COLUMNS` maps them to the store's
columns. A filter a listing does not take is not a parameter of its route.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote

from litestar.params import Parameter
from litestar.types import Scope

from ...engine.errors import RequestError
from ..store.records import Filters

RUN_STATES = (
    "queued",
    "held",
    "running",
    "awaiting_approval",
    "succeeded",
    "failed",
    "timed_out",
)
RETRYABLE_RUN_STATES = ("failed", "timed_out")
DELIVERY_STATES = ("pending", "sent", "skipped", "failed")
RETRYABLE_DELIVERY_STATES = ("failed",)
HEARTBEAT_STATES = ("succeeded", "failed", "timed_out", "started")

FILTER_COLUMNS = {
    "state": "state",
    "agent": "agent_id",
    "rule": "rule_id",
    "session": "session_key",
    "channel": "channel",
    "status": "status",
    "runId": "run_id",
    "path": "path",
    "source": "source",
    "actor": "actor",
    "action": "action",
    "outcome": "outcome",
}

MAX_LIMIT = 500
MAX_FILTER_LENGTH = 512


def state_parameter(allowed: Sequence[str], what: str) -> Any:
    return Parameter(
        query="state",
        default=None,
        description=f"only {what} in this state",
        schema_extra={"enum": list(allowed)},
    )


def text_parameter(description: str, *, query: str | None = None) -> Any:
    return Parameter(
        query=query, default=None, max_length=MAX_FILTER_LENGTH, description=description
    )


def time_parameter(query: str, description: str) -> Any:
    return Parameter(query=query, default=None, description=description)


LIMIT = Parameter(default=50, ge=1, le=MAX_LIMIT, description="items per page")
CURSOR = Parameter(
    default=None,
    pattern=r"^\d{1,18}$",  # below 2**63: every store can compare it
    description="the `nextCursor` of the previous page",
)
SINCE = time_parameter("since", "created at or after this ISO-8601 time (UTC if no offset)")
UNTIL = time_parameter("until", "created before this ISO-8601 time (UTC if no offset)")


def refuse_nul(path_params: dict[str, Any], query: Any) -> None:
    """No stored id or text holds a NUL (PostgreSQL cannot): a path naming one is `404
    not_found`, a query value with one `400 invalid_query`, before any store is asked."""
    for name, value in path_params.items():
        if isinstance(value, str) and "\x00" in value:
            raise RequestError(404, "not_found", f"no item has this {name}")
    for name, value in query.multi_items():
        if "\x00" in value or "\x00" in name:
            raise RequestError(400, "invalid_query", f"{name} must not hold a NUL", field=name)


def check_choice(
    name: str, value: str | None, allowed: Sequence[str], *, code: str = "invalid_query"
) -> str | None:
    """`value` when it is one of `allowed` (or None), else `400 <code>` naming both."""
    if value is None or value in allowed:
        return value
    raise RequestError(400, code, f"{name} must be one of: {', '.join(allowed)}", field=name)


def epoch(name: str, t: dt.datetime | None) -> float | None:
    """An ISO time as epoch seconds; a time without an offset is UTC."""
    if t is None:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    try:
        return t.timestamp()
    except (OverflowError, OSError, ValueError):  # pragma: no cover - out of the platform's range
        raise RequestError(400, "invalid_query", f"{name} is out of range", field=name) from None


def filters(
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    *,
    code: str = "invalid_query",
    **equal: Any,
) -> Filters:
    """Store filters from the API's (None = not given); `until` must follow `since`."""
    for name, value in equal.items():
        if isinstance(value, str) and "\x00" in value:
            raise RequestError(400, code, f"{name} must not hold a NUL", field=name)
    start, end = epoch("since", since), epoch("until", until)
    if start is not None and end is not None and end <= start:
        raise RequestError(400, code, "until must be later than since", field="until")
    return Filters(
        {FILTER_COLUMNS[k]: v for k, v in equal.items() if v is not None}, since=start, until=end
    )


def key_in_path(scope: Scope, prefix: str, parsed: str) -> str:
    """A session key at the end of the request's path, exactly as the client encoded it (keys are
    data: `/`, `#`, `:`, spaces, non-ASCII). The route's `path` parameter has been normalised
    (`a//b/` -> `/a/b`, `%252F` decoded twice), so the key is read from the raw path after
    `prefix` and decoded once; `parsed` (less its leading slash) when there is no raw path."""
    raw = scope.get("raw_path", b"").decode("latin-1").split("?", 1)[0]
    root = scope.get("root_path", "")
    at = raw.find(prefix, len(root) if raw.startswith(root) else 0)
    if not raw or at < 0:
        return parsed[1:] if parsed.startswith("/") else parsed
    return unquote(raw[at + len(prefix) :], encoding="utf-8", errors="surrogateescape")
