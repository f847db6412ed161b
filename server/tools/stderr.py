"""A stdio tool server's stderr: read by a thread, each line logged, the last ones kept.

Each line is cut at `STDERR_LINE` bytes (the rest dropped and counted in
`hookwise_tool_output_dropped{what="stderr_bytes"}`), escaped and logged at INFO; the last
`STDERR_TAIL` lines are kept so that a server that died can say why (`hookwise tools list`).
Apart from the MCP SDK (`stdio`): a connection holds its `StderrTail` from the start, and a
gateway without tool servers never loads the SDK.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, BinaryIO

from .. import metrics
from ..logs import escape_control

log = logging.getLogger("hookwise.tools")

#: a stderr line is cut at this many bytes; the rest of it is dropped and counted
STDERR_LINE = 8192
#: the last stderr lines kept to say why a server died
STDERR_TAIL = 5


class StderrTail:
    """What a server wrote last to stderr, and how much of it was dropped (thread-safe)."""

    def __init__(self) -> None:
        self._lines: deque[str] = deque(maxlen=STDERR_TAIL)
        self._lock = threading.Lock()
        self.closed = threading.Event()
        self.dropped = 0

    def add(self, line: str) -> None:
        with self._lock:
            self._lines.append(line)

    def clear(self) -> None:
        with self._lock:
            self._lines.clear()
        self.closed.clear()

    def lines(self) -> list[str]:
        with self._lock:
            return list(self._lines)


def stderr_lines(server: str, stream: BinaryIO, tail: StderrTail) -> None:
    """Log `stream`'s lines until EOF, each cut at `STDERR_LINE` bytes (run in a thread)."""
    try:
        while True:
            raw = stream.readline(STDERR_LINE)
            if not raw:
                break
            dropped = 0
            if not raw.endswith(b"\n"):  # cut: skip to the end of this line, counting
                while True:
                    rest = stream.readline(STDERR_LINE)
                    dropped += len(rest)
                    if not rest or rest.endswith(b"\n"):
                        break
            line = escape_control(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
            if dropped:
                tail.dropped += dropped
                metrics.tool_output_dropped(server, "stderr_bytes", dropped)
                line += f" [hookwise: line cut, {dropped} more bytes dropped]"
            if line:
                tail.add(line[:500])
                log.info("MCP server %s stderr: %s", server, line)
    finally:
        tail.closed.set()


def start_stderr_thread(name: str, tail: StderrTail) -> tuple[Any, Callable[[], None]]:
    """A pipe whose write end is the child's stderr, read by a thread into the log and `tail`;
    the write end (to give the child) and a function that closes it."""
    read_fd, write_fd = os.pipe()
    tail.clear()
    reader = os.fdopen(read_fd, "rb")

    def run() -> None:
        with reader:
            stderr_lines(name, reader, tail)

    threading.Thread(target=run, daemon=True, name=f"mcp-{name}").start()
    errlog = os.fdopen(write_fd, "w")
    return errlog, errlog.close
