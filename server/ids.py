"""Identifiers: random UUIDv4 strings for events, runs and deliveries, cheap on the hot path.

`uuid.uuid4()` reads 16 bytes from the OS for every id (a system call each time); ids here are
cut from a buffer of OS randomness refilled 256 ids at a time, with the same distribution.
"""

from __future__ import annotations

import os
import threading

_BATCH = 256
_lock = threading.Lock()
_buffer = b""
_offset = 0


def new_id() -> str:
    """A random UUID (version 4) in its canonical text form."""
    global _buffer, _offset
    with _lock:
        if _offset >= len(_buffer):
            _buffer, _offset = os.urandom(16 * _BATCH), 0
        raw = bytearray(_buffer[_offset : _offset + 16])
        _offset += 16
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
