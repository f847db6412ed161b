"""Coalescing per key: what both stores share to fold a burst of requests into one run.

A mapping with `coalesce` (`hookwise.engine.config.mapping.CoalesceConfig`) writes its first
request's run with a `not_before` (now + window) that the claim respects, its rendered key and
its `coalesce_until` (now + maxWait). A later request of the same mapping, key and sender (who
the door verified, `hookwise.server.store.senders`: a sender never joins another's run, whose
spend and hold are that sender's), while that run is still waiting (`queued` or `held`) and its
window open (`not_before` in the future), joins it instead of writing a run: in the same
transaction as its request-log line, it replaces the run's message (`keep: latest`) or adds its
own to a bounded digest (`keep: all`), and pushes `not_before` to now + window, never past
`coalesce_until`. The join is done by the store under its write serialisation (SQLite's single
writer, a row lock on PostgreSQL), so two processes receiving the same key join one run.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

import attrs

from ...engine.config.mapping import COALESCE_DIGEST_MAX_CHARS, COALESCE_DIGEST_MAX_ITEMS

#: a rendered key longer than this is stored as its SHA-256 (a payload chooses the key's length)
MAX_KEY_CHARS = 200


def stored_key(rendered: str) -> str:
    """A rendered coalesce key as the store keeps it: trimmed, bounded in length, and printable
    (a key with a control character, which PostgreSQL's text may refuse, is kept as its hash)."""
    key = rendered.strip()
    if len(key) <= MAX_KEY_CHARS and key.isprintable():
        return key
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


@attrs.frozen
class CoalesceSpec:
    """A request's coalescing: its mapping's rendered key, window, maxWait and keep."""

    key: str
    window: float
    max_wait: float
    keep: Literal["latest", "all"] = "latest"


@attrs.frozen
class Joinable:
    """A waiting run a request may join (read under the store's write serialisation)."""

    run_id: str
    session_key: str
    parts: str | None
    coalesce_until: float


def first_parts(spec: CoalesceSpec, message: str) -> str | None:
    """The digest state a coalescing run starts with (`keep: all` only)."""
    if spec.keep != "all":
        return None
    return json.dumps({"omitted": 0, "items": [message]})


def joined(spec: CoalesceSpec, parts: str | None, message: str) -> tuple[str, str | None]:
    """The run's message and digest state once `message` joined it."""
    if spec.keep != "all":
        return message, None
    state: dict[str, Any] = json.loads(parts) if parts else {"omitted": 0, "items": []}
    items: list[str] = [*state.get("items", []), message]
    omitted = int(state.get("omitted", 0))
    while len(items) > 1 and (
        len(items) > COALESCE_DIGEST_MAX_ITEMS or sum(map(len, items)) > COALESCE_DIGEST_MAX_CHARS
    ):
        items.pop(0)
        omitted += 1
    new_parts = json.dumps({"omitted": omitted, "items": items})
    return digest(items, omitted), new_parts


def digest(items: list[str], omitted: int) -> str:
    """The message a `keep: all` run gives the model: every kept payload's message, oldest first,
    each under a numbered line, and how many older ones were left out."""
    total = len(items) + omitted
    head = f"{total} events were coalesced into this run"
    if omitted:
        head += f" (the oldest {omitted} left out; the newest {len(items)} follow)"
    lines = [head + ", oldest first:"]
    for n, text in enumerate(items, start=omitted + 1):
        lines.append(f"\n--- event {n} of {total} ---\n{text}")
    return "\n".join(lines)


def joined_body(body: bytes, new_run_id: str, new_session: str, into: Joinable) -> bytes:
    """The answer of a request that joined `into`: its own answer with the run (and session)
    it would have written replaced by the joined one's. Both were made for this request only
    (fresh ids), so the replacement touches nothing else."""
    out = body.replace(new_run_id.encode(), into.run_id.encode())
    if new_session != into.session_key:
        out = out.replace(json.dumps(new_session).encode(), json.dumps(into.session_key).encode())
    return out
