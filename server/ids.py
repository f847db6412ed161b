"""Identifiers: time-ordered UUIDv7 strings for events, runs, deliveries and requests.

A UUIDv7 starts with the Unix time in milliseconds, so ids made one after another sort one after
another: a unique index on them takes each insert at its end (one hot page) instead of on a
random page of a tree that no longer fits in memory, as random UUIDv4 values did. Within one
millisecond a 12-bit counter (RFC 9562, method 1) keeps ids of this process increasing; the
remaining 62 bits are random, cut from a buffer of OS randomness refilled 256 ids at a time
(`uuid.uuid4()` reads the OS for every id: a system call each time).
"""

from __future__ import annotations

import os
import threading
import time

_BATCH = 256
_VARIANT = {c: "89ab"[int(c, 16) & 3] for c in "0123456789abcdef"}  # RFC 9562 variant, 2 bits
_lock = threading.Lock()
_random = ""  # hex digits of OS randomness, _DIGITS per id
_DIGITS = 19  # 3 to seed the counter in a new millisecond, 16 for the 62 random bits
_offset = 0
_last_ms = 0
_counter = 0
_prefix_ms = -1
_prefix = ""


def new_id(now_ns: int | None = None) -> str:
    """A UUID (version 7) in its canonical text form; `now_ns` (default: the clock) for tests.

    Built as text: the millisecond's part is formatted once per millisecond, the random part is
    cut from a hex string, so an id costs a few string operations (it is made several times per
    request)."""
    global _random, _offset, _last_ms, _counter, _prefix_ms, _prefix
    ms = (time.time_ns() if now_ns is None else now_ns) // 1_000_000
    with _lock:
        if _offset + _DIGITS > len(_random):
            _random, _offset = os.urandom(_DIGITS * _BATCH // 2 + 1).hex(), 0
        rand = _random[_offset : _offset + _DIGITS]
        _offset += _DIGITS
        if ms <= _last_ms:  # same millisecond (or the clock went back): count on
            _counter += 1
            if _counter > 0xFFF:  # 4096 ids in one millisecond: borrow the next one
                _last_ms += 1
                _counter = 0
            ms = _last_ms
        else:
            _last_ms, _counter = ms, int(rand[:3], 16) & 0x3FF  # random start, room to count
        counter = _counter
        if ms != _prefix_ms:
            h = f"{ms & 0xFFFF_FFFF_FFFF:012x}"
            _prefix, _prefix_ms = f"{h[:8]}-{h[8:]}-7", ms
        prefix = _prefix
    return f"{prefix}{counter:03x}-{_VARIANT[rand[3]]}{rand[4:7]}-{rand[7:]}"
