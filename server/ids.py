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
_lock = threading.Lock()
_buffer = b""
_offset = 0
_last_ms = 0
_counter = 0


def new_id(now_ns: int | None = None) -> str:
    """A UUID (version 7) in its canonical text form; `now_ns` (default: the clock) for tests."""
    global _buffer, _offset, _last_ms, _counter
    ms = (time.time_ns() if now_ns is None else now_ns) // 1_000_000
    with _lock:
        if _offset >= len(_buffer):
            _buffer, _offset = os.urandom(8 * _BATCH), 0
        rand = int.from_bytes(_buffer[_offset : _offset + 8], "big")
        _offset += 8
        if ms <= _last_ms:  # same millisecond (or the clock went back): count on
            _counter += 1
            if _counter > 0xFFF:  # 4096 ids in one millisecond: borrow the next one
                _last_ms += 1
                _counter = 0
            ms = _last_ms
        else:
            _last_ms, _counter = ms, rand >> 52 & 0x3FF  # random start, room to count
    value = (
        (ms & 0xFFFF_FFFF_FFFF) << 80
        | 0x7 << 76  # version 7
        | _counter << 64
        | 0b10 << 62  # RFC 9562 variant
        | rand & 0x3FFF_FFFF_FFFF_FFFF
    )
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
