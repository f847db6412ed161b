"""Checking session lanes from what a fake model server saw.

Each run's message carries a tag `[lane <session> <n>]` (n: its place in the session, from 0).
`model_calls` reads, from the fake's recorded spans, each call's own tag and the tags of the
history it was sent; `assert_serial_and_seen` asserts the session-lane guarantees: the calls of
one session never overlap, come in acceptance order, and each saw every predecessor's turn.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import attrs

_TAG = re.compile(r"\[lane (\S+) (\d+)\]")


def tag(session: str, n: int) -> str:
    return f"[lane {session} {n}]"


@attrs.frozen
class Call:
    """One model call of a tagged run."""

    session: str
    n: int
    began: float
    ended: float
    #: the tags found in the history sent with it (earlier turns)
    seen: tuple[tuple[str, int], ...]


def model_calls(spans: list[tuple[float, float, Any]]) -> list[Call]:
    """The tagged calls among a fake model server's spans, by start time."""
    calls = []
    for began, ended, body in spans:
        messages = body.get("messages", []) if isinstance(body, dict) else []
        users = [m["content"] for m in messages if m.get("role") == "user"]
        if not users or not (own := _TAG.search(str(users[-1]))):
            continue
        seen = tuple(
            (m.group(1), int(m.group(2)))
            for text in users[:-1]
            for m in [_TAG.search(str(text))]
            if m
        )
        calls.append(Call(own.group(1), int(own.group(2)), began, ended, seen))
    return sorted(calls, key=lambda c: c.began)


def assert_serial_and_seen(calls: list[Call], sessions: dict[str, int]) -> None:
    """Every session of `sessions` (key -> its number of runs) had exactly its runs called, one
    at a time, in order, each seeing the turns of all its predecessors and of no other session.
    A call that failed and was made again (a run taken over) counts once: its last call."""
    for session, count in sessions.items():
        own = [c for c in calls if c.session == session]
        last = {c.n: c for c in own}
        assert sorted(last) == list(range(count)), (session, [c.n for c in own])
        for before, after in itertools.pairwise(own):
            assert before.ended <= after.began, f"calls of {session} overlapped: {before} {after}"
        for n, call in last.items():
            assert call.seen == tuple((session, k) for k in range(n)), (session, n, call.seen)
        order = [c.n for c in own]
        assert order == sorted(order), (session, order)
