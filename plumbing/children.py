"""The one child-process helper: what the three supervisors (the SQLite writer process, the
sandbox's JS workers, the gateway's `--workers`) share.

- **Spawn.** `Child(argv, ...)` starts a process with the pipes the caller asks for; the
  Python that runs hookwise, with the caller's `sys.path` on `PYTHONPATH` when asked
  (`python_path=True`), so a child imports the same tree as its parent.
- **Ready handshake.** `Child.handshake(read, timeout)` waits (at most `timeout`) for the
  child's stdout to be readable and hands it to `read`, which reads the child's first answer
  (a frame, a line) and returns it; `NotReady` when nothing came in time or the child ended.
- **Reap.** `Child.reap(grace)` ends it (its stdin closed, then, after `grace` seconds, SIGKILL),
  waits for it, closes its pipes and says how it ended: `exit code 3`, `signal SIGKILL`
  (`describe_exit`).
- **Forward signals.** `forward(children, signum)` sends a signal to every child still running;
  `on_signals(signums, handler)` installs one handler for several signals.
- **Restart with the one back-off.** `restart(start, policy=...)` (a thread) and `arestart`
  (a coroutine) call `start` until it returns, waiting `policy`'s back-off between failures,
  with an optional limit of attempts; each failure is reported to `on_failure` (the caller
  logs it with its ids).

It imports neither `engine` nor `server`: both use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import IO, Any, TypeVar

from .backoff import NO_DRAW, Backoff, Retries

T = TypeVar("T")

PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL


class NotReady(Exception):
    """The child did not complete its ready handshake (it ended, or was too slow)."""


def describe_exit(code: int | None) -> str:
    """How a process ended, for a log line: `exit code N`, `signal SIGKILL`, `running`."""
    if code is None:
        return "running"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


class Child:
    """One child process (see the module docstring). `proc` is the `subprocess.Popen`."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        stdin: int | None = None,
        stdout: int | None = None,
        stderr: int | None = None,
        pass_fds: Sequence[int] = (),
        env: dict[str, str] | None = None,
        python_path: bool = False,
        new_session: bool = False,
    ) -> None:
        if python_path:
            env = dict(os.environ if env is None else env)
            env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self.proc: subprocess.Popen[bytes] = subprocess.Popen(
            list(argv),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            pass_fds=tuple(pass_fds),
            env=env,
            close_fds=True,
            start_new_session=new_session,
        )
        self.started_at = time.monotonic()

    @staticmethod
    def python(*args: str) -> list[str]:
        """The argv of this Python with `args` (`-m module ...`, `-c code ...`)."""
        return [sys.executable, *args]

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    # the ready handshake -------------------------------------------------------------------

    def handshake(self, read: Callable[[IO[bytes]], T], timeout: float) -> T:
        """The child's first answer: waits at most `timeout` s for its stdout to be readable,
        then `read(stdout)`. Raises `NotReady` if nothing came in time (the child is left
        running: the caller reaps it); what `read` raises passes through."""
        out = self.proc.stdout
        if out is None:
            raise ValueError("a handshake needs the child's stdout (stdout=PIPE)")
        ready, _, _ = select.select([out], [], [], max(0.0, timeout))
        if not ready:
            raise NotReady(f"no answer in {timeout:g} s")
        return read(out)

    # signals and reaping -------------------------------------------------------------------

    def send(self, signum: int) -> bool:
        """Send `signum` if the child still runs; whether it was sent."""
        if self.proc.poll() is not None:
            return False
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signum)
            return True
        return False

    def kill(self) -> None:
        self.send(signal.SIGKILL)

    def close_stdin(self) -> None:
        """End the child's stdin (a child that reads it to its end then exits)."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def wait(self, timeout: float | None = None) -> int | None:
        """Its exit code, waiting at most `timeout` s (None: still running)."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def reap(self, grace: float = 0.0, *, signum: int | None = None) -> str:
        """End the child and wait for it: its stdin closed and `signum` sent (if any), then up
        to `grace` s for it to exit by itself, then SIGKILL. Closes its pipes; returns
        `describe_exit` of it."""
        self.close_stdin()
        if signum is not None:
            self.send(signum)
        if grace > 0:
            self.wait(grace)
        self.kill()
        code = self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        return describe_exit(code)


def forward(children: Iterable[Child], signum: int) -> None:
    """Send `signum` to every child still running."""
    for child in children:
        child.send(signum)


def on_signals(signums: Iterable[int], handler: Callable[[int], None]) -> None:
    """Install `handler(signum)` for each of `signums` (main thread only)."""
    for signum in signums:
        signal.signal(signum, lambda s, _frame: handler(s))


def stop_all(children: Sequence[Child], signum: int | None, timeout: float) -> None:
    """Send `signum` (if any) to every child, give them `timeout` s in all to exit, then kill
    the ones left; every one is waited for."""
    if signum is not None:
        forward(children, signum)
    deadline = time.monotonic() + timeout
    for child in children:
        if child.wait(max(0.1, deadline - time.monotonic())) is None:
            child.kill()
            child.proc.wait()


# restarting ----------------------------------------------------------------------------------


def restart(
    start: Callable[[], T],
    *,
    policy: Backoff,
    retry_on: tuple[type[BaseException], ...] = (Exception,),
    attempts: int | None = None,
    stopped: Callable[[], bool] = lambda: False,
    on_failure: Callable[[int, BaseException], None] = lambda _n, _e: None,
    sleep: Callable[[float], Any] = time.sleep,
    rand: Callable[[], float] = NO_DRAW,
    first_wait: bool = False,
) -> T | None:
    """Call `start()` until it returns (its value), waiting `policy`'s back-off after each
    failure in `retry_on` (`on_failure(attempt, error)` first, 1-based). None when `stopped()`
    or after `attempts` failures. With `first_wait`, the back-off's first wait comes before
    the first attempt too."""
    retries = Retries(policy, rand)
    attempt = 0
    if first_wait:
        sleep(retries.next())
    while not stopped():
        attempt += 1
        try:
            return start()
        except retry_on as e:
            on_failure(attempt, e)
        if attempts is not None and attempt >= attempts:
            return None
        if stopped():
            return None
        sleep(retries.next())
    return None


async def arestart(
    start: Callable[[], Awaitable[T]],
    *,
    policy: Backoff,
    retry_on: tuple[type[BaseException], ...] = (Exception,),
    attempts: int | None = None,
    stopped: Callable[[], bool] = lambda: False,
    on_failure: Callable[[int, BaseException], None] = lambda _n, _e: None,
    rand: Callable[[], float] = NO_DRAW,
    first_wait: bool = False,
) -> T | None:
    """`restart` for a coroutine `start` (the waits are `asyncio.sleep`)."""
    retries = Retries(policy, rand)
    attempt = 0
    if first_wait:
        await asyncio.sleep(retries.next())
    while not stopped():
        attempt += 1
        try:
            return await start()
        except retry_on as e:
            on_failure(attempt, e)
        if attempts is not None and attempt >= attempts:
            return None
        if stopped():
            return None
        await asyncio.sleep(retries.next())
    return None


__all__ = [
    "DEVNULL",
    "PIPE",
    "Child",
    "NotReady",
    "arestart",
    "describe_exit",
    "forward",
    "on_signals",
    "restart",
    "stop_all",
]
