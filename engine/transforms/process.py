"""One sandbox worker process as the pool sees it (the process, its pipes, the calls it holds,
what recycling needs to know of it: calls taken, resident memory), and a call in flight. See
`pool`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
from collections import deque
from typing import Any

from ...plumbing.children import DEVNULL, PIPE, Child, NotReady
from .wire import WireClosed, read_reply, write_all

START_TIMEOUT_S = 30.0
_PIPE_SIZE = 1024 * 1024
_F_SETPIPE_SZ = 1031
_PAGE = os.sysconf("SC_PAGE_SIZE")


class Call:
    """A call sent to a worker: its request frame, deadline, transform name and future."""

    __slots__ = ("deadline_s", "frame", "future", "name")

    def __init__(self, frame: bytes, deadline_s: float, name: str, future: Any) -> None:
        self.frame = frame
        self.deadline_s = deadline_s  # the time limit plus grace, counted from when it starts
        self.name = name
        self.future: asyncio.Future[Any] = future


class WorkerProcess:
    """One worker process and its pipes."""

    def __init__(self, memory_mb: int) -> None:
        self.child = Child(
            Child.python("-m", "hookwise.engine.transforms.worker", str(memory_mb)),
            stdin=PIPE,
            stdout=PIPE,
            stderr=DEVNULL,
            new_session=True,  # a Ctrl-C to the gateway's group is the gateway's to handle
        )
        self.proc = self.child.proc
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.wfd = self.proc.stdin.fileno()
        self.rfd = self.proc.stdout.fileno()
        with contextlib.suppress(OSError):
            import fcntl

            fcntl.fcntl(self.wfd, _F_SETPIPE_SZ, _PIPE_SIZE)
        self.inflight: deque[Call] = deque()
        self.head_started = 0.0
        self.timed_out = False
        self.buried = False
        self.buffer = bytearray()  # replies read but not yet taken
        self.loop: asyncio.AbstractEventLoop | None = None  # where its replies are read
        self.calls = 0  # calls sent to it
        self.ready_rss = 0  # its resident memory when it became ready, in bytes
        self.renewing = False  # a replacement is being started
        self.retired = False  # its replacement serves: it takes no new calls

    def rss(self) -> int:
        """Resident memory now, in bytes (0 if it cannot be read)."""
        try:
            with open(f"/proc/{self.proc.pid}/statm", encoding="ascii") as statm:
                return int(statm.read().split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):
            return 0

    def wait_ready(self) -> None:
        try:
            reply = self.child.handshake(lambda out: read_reply(out.fileno()), START_TIMEOUT_S)
        except NotReady:
            raise WireClosed("the worker did not start in time") from None
        if reply[0] != "ready":
            raise WireClosed("the worker did not start")

    def request(self, frame: bytes, timeout: float) -> Any:
        """A synchronous round trip (loads, before the worker serves calls)."""
        write_all(self.wfd, frame)
        ready, _, _ = select.select([self.rfd], [], [], timeout)
        if not ready:
            raise WireClosed("the worker did not answer in time")
        return read_reply(self.rfd)

    def kill(self) -> None:
        self.child.kill()

    def reap(self) -> str:
        """Kill it (if it still runs), wait for it, close its pipes; how it ended."""
        return self.child.reap()
