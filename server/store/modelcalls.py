"""Model calls as stored (`model_calls`) and the circuit breakers of models (`model_breakers`).

One row per call of a run or a heartbeat (`owner_id`: ids are unique across both), by the run's
attempt (a run sent back to the queue tries again), numbered in the order made: its model, outcome (`ok`, `error`, `skipped`: an open breaker kept it from being
made), error class, duration, the tokens the provider reported and the cost. A run's usage is
the sum of its rows (`Usage.of`); a heartbeat's calls are attempt 0. Written when each call ends, so what a run spent is on record
even when the run itself never finishes.

A breaker row per `provider/model` that failed lately; none is a closed breaker. `after_failure`
is the one rule both stores apply inside a write transaction, so every process counts the same
failures: `failures` unavailable failures within `window` open it for `cooldown`; past that it is
half-open, and one call (the store's `breaker_probe`, a compare-and-set) may try it: a success
removes the row, a failure opens it again for another cooldown.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import attrs

#: the columns a record is written and read as (the call's `seq` is the `call_seq` column: the
#: table's own `seq` orders its rows for retention)
COLUMNS = (
    "owner_id, attempt, call_seq, model, agent_id, rule_id, outcome, error_class, status, error, started_at,"
    " duration_ms, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost,"
    " sender"
)
WIDTH = COLUMNS.count(",") + 1
#: a budget's spend (`Store.spend`): tokens in and out, and cost, since a window's start; the
#: column of `model_calls` a scope is counted by, and the scope's kind in `budget_usage`
SPEND_COLUMNS = {
    "rule_id": "mapping",
    "agent_id": "agent",
    # budgets by sender (`hookwise.server.store.senders`): a heartbeat's calls have no sender
    "rule_id || '/' || sender": "mapping-sender",
    "agent_id || '/' || sender": "agent-sender",
}
#: the column (or expression) of `model_calls` a scope of each kind is counted by
SPEND_COLUMN = {kind: column for column, kind in SPEND_COLUMNS.items()}
SPEND = (
    "SELECT COALESCE(SUM(COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0)), 0),"
    " COALESCE(SUM(cost), 0) FROM model_calls WHERE {column} = {name} AND started_at >= {since}"
    " AND owner_id <> {exclude}"
)
#: seconds of one running total of `budget_usage`: the calls that started in one bucket
BUCKET = 60.0
#: the spend from the running totals: the whole buckets since the window's start (`edge`, the
#: first bucket boundary at or after it), plus the calls between the start and that boundary
#: (less than one bucket of records, from `model_calls`): exact, and bounded by the window's
#: buckets rather than by its calls
SPEND_FAST = (
    "SELECT COALESCE(SUM(t), 0), COALESCE(SUM(c), 0) FROM ("
    " SELECT tokens AS t, cost AS c FROM budget_usage"
    " WHERE kind = {kind} AND name = {name} AND bucket >= {edge}"
    " UNION ALL"
    " SELECT COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0), COALESCE(cost, 0)"
    " FROM model_calls WHERE {column} = {name} AND started_at >= {since} AND started_at < {edge}"
    ") AS spent"
)
#: add a call's spend to its bucket's running total (SQLite 3.24+ and PostgreSQL alike)
USAGE_ADD = (
    "INSERT INTO budget_usage (kind, name, bucket, tokens, cost) VALUES ({}, {}, {}, {}, {})"
    " ON CONFLICT (kind, name, bucket) DO UPDATE SET"
    " tokens = budget_usage.tokens + excluded.tokens, cost = budget_usage.cost + excluded.cost"
)


#: the senders that spent most in a mapping or agent (`Store.top_senders`), by the running
#: totals of its by-sender kind named `<name>/<sender>`: the name starts `<name>/` and the rest
#: holds no `/` (a sender never does; a mapping id may: `a/b`'s senders are not `a`'s).
#: Numbered placeholders (`$n` or `?n`, one used twice): kind, prefix length, prefix, since,
#: limit
TOP_SENDERS = (
    "SELECT name, SUM(tokens), SUM(cost) FROM budget_usage WHERE kind = {0} AND"
    " substr(name, 1, {1}) = {2} AND replace(substr(name, {1} + 1), '/', '') = substr(name, {1} + 1)"
    " AND bucket >= {3} GROUP BY name ORDER BY SUM(tokens) DESC, SUM(cost) DESC, name LIMIT {4}"
)


def spend_sql(column: str, name: str, since: str, exclude: str) -> str:
    """The spend query over `column` (one of `SPEND_COLUMNS`) with the store's placeholders,
    reading every record of the window (used when a run's own records are left out)."""
    if column not in SPEND_COLUMNS:
        raise ValueError(f"no budget counts by {column!r}")
    return SPEND.format(column=column, name=name, since=since, exclude=exclude)


def spend_fast_sql(column: str, kind: str, name: str, since: str, edge: str) -> str:
    """The spend query from the running totals (`SPEND_FAST`) with the store's placeholders."""
    if column not in SPEND_COLUMNS:
        raise ValueError(f"no budget counts by {column!r}")
    return SPEND_FAST.format(column=column, kind=kind, name=name, since=since, edge=edge)


def bucket_edge(since: float) -> float:
    """The first bucket boundary at or after `since`."""
    return math.ceil(since / BUCKET) * BUCKET


def usage_of(record: ModelCallRecord, sign: int = 1) -> list[tuple[str, str, float, int, float]]:
    """What `record` adds to the running totals (`sign` -1: takes away, a record replaced):
    (kind, name, bucket, tokens, cost) per scope it counts for, in a fixed order (so that
    concurrent writers lock the totals' rows in the same order); none when it spent nothing."""
    tokens = (record.input_tokens or 0) + (record.output_tokens or 0)
    cost = record.cost or 0.0
    if not tokens and not cost:
        return []
    bucket = math.floor(record.started_at / BUCKET) * BUCKET
    scopes = [("agent", record.agent_id)]
    if record.rule_id is not None:
        scopes.append(("mapping", record.rule_id))
    if record.sender is not None:
        scopes.append(("agent-sender", f"{record.agent_id}/{record.sender}"))
        if record.rule_id is not None:
            scopes.append(("mapping-sender", f"{record.rule_id}/{record.sender}"))
    return sorted((kind, name, bucket, sign * tokens, sign * cost) for kind, name in scopes)


BREAKER_COLUMNS = (
    "model, state, failures, window_start, open_until, probe_until, last_error_class, updated_at"
)
BREAKER_WIDTH = BREAKER_COLUMNS.count(",") + 1


@attrs.frozen
class ModelCallRecord:
    """One model call (or a model skipped) of a run or heartbeat."""

    owner_id: str
    attempt: int
    seq: int
    model: str
    agent_id: str
    rule_id: str | None
    outcome: str
    error_class: str | None
    status: int | None
    error: str | None
    started_at: float
    duration_ms: float | None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost: float | None = None
    #: who sent the run (`hookwise.server.store.senders`); None: a heartbeat's call
    sender: str | None = None

    def row(self) -> tuple[Any, ...]:
        return attrs.astuple(self)

    @classmethod
    def from_row(cls, row: Any) -> ModelCallRecord:
        return cls(*row)

    @property
    def reported(self) -> bool:
        """Whether the provider reported the call's tokens."""
        return self.input_tokens is not None or self.output_tokens is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "seq": self.seq,
            "model": self.model,
            "outcome": self.outcome,
            "errorClass": self.error_class,
            "status": self.status,
            "error": self.error,
            "startedAt": self.started_at,
            "durationMs": self.duration_ms,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "cacheReadTokens": self.cache_read_tokens,
            "cacheWriteTokens": self.cache_write_tokens,
            "cost": self.cost,
        }


@attrs.frozen
class Usage:
    """The sum of calls: tokens of each kind (None when no call reported any), and the cost
    (None when no call reported tokens, or one that did has no price)."""

    calls: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost: float | None = None

    @classmethod
    def of(cls, calls: Iterable[ModelCallRecord]) -> Usage:
        made = [c for c in calls if c.outcome != "skipped"]
        reported = [c for c in made if c.reported]

        def total(name: str) -> int | None:
            values = [getattr(c, name) for c in reported if getattr(c, name) is not None]
            return sum(values) if values else None

        priced = reported and all(c.cost is not None for c in reported)
        return cls(
            calls=len(made),
            input_tokens=total("input_tokens"),
            output_tokens=total("output_tokens"),
            cache_read_tokens=total("cache_read_tokens"),
            cache_write_tokens=total("cache_write_tokens"),
            cost=round(sum(c.cost or 0.0 for c in reported), 10) if priced else None,
        )


@attrs.frozen
class BreakerPolicy:
    """`models.breaker`: `failures` in `window` seconds open it for `cooldown` seconds."""

    failures: int = 5
    window: float = 60.0
    cooldown: float = 30.0

    @property
    def enabled(self) -> bool:
        return self.failures > 0


@attrs.frozen
class BreakerRecord:
    """A model's breaker. `state` is `closed` (failures counted in the window) or `open`; an
    open breaker whose `open_until` has passed is half-open (`state_at`)."""

    model: str
    state: str
    failures: int
    window_start: float
    open_until: float | None
    probe_until: float | None
    last_error_class: str | None
    updated_at: float

    def row(self) -> tuple[Any, ...]:
        return attrs.astuple(self)

    @classmethod
    def from_row(cls, row: Any) -> BreakerRecord:
        return cls(*row)

    def state_at(self, now: float) -> str:
        """`closed`, `open` or `half_open` at `now`."""
        if self.state != "open":
            return "closed"
        return "open" if self.open_until is not None and now < self.open_until else "half_open"


def after_failure(
    row: BreakerRecord | None, *, model: str, now: float, policy: BreakerPolicy, error_class: str
) -> BreakerRecord:
    """The breaker after one more unavailable failure of `model` (see the module)."""
    if row is not None and row.state == "open":
        # the half-open probe (or a call that started before it opened) failed: open again
        return attrs.evolve(
            row,
            failures=row.failures + 1,
            open_until=now + policy.cooldown,
            probe_until=None,
            last_error_class=error_class,
            updated_at=now,
        )
    if row is None or now - row.window_start > policy.window:
        row = BreakerRecord(model, "closed", 0, now, None, None, None, now)
    failures = row.failures + 1
    opened = failures >= policy.failures
    return attrs.evolve(
        row,
        state="open" if opened else "closed",
        failures=failures,
        open_until=now + policy.cooldown if opened else None,
        probe_until=None,
        last_error_class=error_class,
        updated_at=now,
    )
