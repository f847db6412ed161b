"""The sandbox tier: a supervised pool of worker processes that run transforms.

A `WorkerPool` belongs to one rule set's `TransformHost`. It starts `size` worker processes
(`hookwise.engine.transforms.worker`) the first time a transform is loaded, loads every transform
into every worker, and sends each call to a worker:

- **Dispatch.** A call goes to the worker with the fewest calls in flight (ties: the first), so
  sequential calls meet the same warm context; a worker takes a second call behind the one it
  runs (pipelining keeps it busy while the gateway handles the reply). With every worker full,
  calls wait in one queue; a call that waits longer than its busy limit fails with 503
  `transform_busy`.
- **Watchdog.** Each worker has a reader thread that waits for the reply of the call the worker
  is running with a deadline of the call's time limit plus `GRACE_S`. V8 stops ordinary runaway
  code at the limit itself; a call still running at the deadline (inside a built-in such as
  `Array.prototype.fill`, or a Python function that never returns) has its worker killed
  (SIGKILL): that request gets 504 `transform_timeout`.
- **Deaths.** A worker that dies (its memory ceiling, a V8 fatal error, a crash) fails the call it
  was running with 500 `transform_failed`; calls queued behind it go back to the shared queue,
  unharmed. A replacement worker is started at once and loads every transform again; a worker
  that cannot start is retried with a back-off, and calls meanwhile go to the others (or wait).
  Every death is logged with the worker's pid, how it ended and the transform's name (never the
  payload).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import select
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from typing import Any

from hookwise.engine.transforms import (
    TransformBusy,
    TransformFailed,
    TransformLoadError,
    TransformTimedOut,
)
from hookwise.engine.transforms.wire import WireClosed, read_reply, request_frame, write_all

log = logging.getLogger("hookwise.sandbox")

GRACE_S = 0.25
"""How long past its time limit a call may run before its worker is killed."""
DEPTH = 2
"""Calls in flight per worker: the one it runs and one waiting in its pipe."""
PIPELINE_MAX = 256 * 1024
"""A larger request is only sent to an idle worker (it must not wait in a full pipe)."""
START_TIMEOUT_S = 30.0
LOAD_TIMEOUT_S = 60.0
_IDLE_POLL_S = 0.1
_PIPE_SIZE = 1024 * 1024
_F_SETPIPE_SZ = 1031


class _Call:
    __slots__ = ("deadline_s", "frame", "future", "name", "op")

    def __init__(self, op: str, frame: bytes, deadline_s: float, name: str) -> None:
        self.op = op
        self.frame = frame
        self.deadline_s = deadline_s  # the time limit plus grace, counted from when it starts
        self.name = name
        self.future: concurrent.futures.Future[Any] = concurrent.futures.Future()


class _Worker:
    """One worker process and its reader/watchdog thread."""

    def __init__(self, memory_mb: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hookwise.engine.transforms.worker", str(memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,  # a Ctrl-C to the gateway's group is the gateway's to handle
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.wfd = self.proc.stdin.fileno()
        self.rfd = self.proc.stdout.fileno()
        with contextlib.suppress(OSError):
            import fcntl

            fcntl.fcntl(self.wfd, _F_SETPIPE_SZ, _PIPE_SIZE)
        self.inflight: deque[_Call] = deque()
        self.head_started = 0.0
        self.timed_out = False
        self.loaded: set[int] = set()

    def wait_ready(self) -> None:
        ready, _, _ = select.select([self.rfd], [], [], START_TIMEOUT_S)
        if not ready:
            raise WireClosed("the worker did not start in time")
        reply = read_reply(self.rfd)
        if reply[0] != "ready":
            raise WireClosed("the worker did not start")

    def request(self, frame: bytes, timeout: float) -> Any:
        """A synchronous round trip, before the reader thread runs (start-up loads)."""
        write_all(self.wfd, frame)
        ready, _, _ = select.select([self.rfd], [], [], timeout)
        if not ready:
            raise WireClosed("the worker did not answer in time")
        return read_reply(self.rfd)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGKILL)

    def reap(self) -> str:
        code = self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                assert stream is not None
                stream.close()
        if code < 0:
            try:
                return f"signal {signal.Signals(-code).name}"
            except ValueError:
                return f"signal {-code}"
        return f"exit code {code}"


class WorkerPool:
    """Sandbox worker processes for one rule set's transforms (see the module docstring)."""

    def __init__(self, *, size: int, memory_mb: int) -> None:
        self._size = max(1, size)
        self._memory_mb = memory_mb
        self._lock = threading.Lock()
        self._specs: dict[int, bytes] = {}
        self._workers: list[_Worker] = []
        self._queue: deque[_Call] = deque()
        self._ids = itertools.count(1)
        self._started = False
        self._closed = False
        self._threads: list[threading.Thread] = []

    # --- loading (synchronous: rules compile before anything serves) -------------------------

    def load(self, spec: dict[str, Any]) -> int:
        """Load a transform into every worker; its id for `call`. `TransformLoadError` when the
        module cannot be loaded (the same in every worker)."""
        tid = next(self._ids)
        frame = request_frame(["load", tid, spec])
        if not self._started:
            self._started = True
            for _ in range(self._size):
                self._start_worker(initial=True)
        with self._lock:
            self._specs[tid] = frame
            calls = [self._control(w, tid, frame) for w in self._workers]
        try:
            replies = [c.future.result(LOAD_TIMEOUT_S) for c in calls]
        except concurrent.futures.TimeoutError:
            replies = [["err", "load", "loading took too long", None]]
        except TransformFailed as exc:
            replies = [["err", "load", f"the worker died while loading it ({exc.reason})", None]]
        for reply in replies:
            if reply[0] != "ok":
                with self._lock:
                    self._specs.pop(tid, None)
                raise TransformLoadError(str(reply[2]))
        return tid

    def _control(self, worker: _Worker, tid: int, frame: bytes) -> _Call:
        """Send a load to a running worker, ahead of the depth limit (lock held)."""
        call = _Call("load", frame, LOAD_TIMEOUT_S, f"load #{tid}")
        self._send(worker, call)
        worker.loaded.add(tid)
        return call

    # --- calls -----------------------------------------------------------------------------

    async def call(self, tid: int, message: Any, timeout_ms: int, name: str) -> Any:
        """Run one call in a worker; the value the transform produced, or a `TransformError`."""
        if self._closed:
            raise TransformFailed("transform is closed (the rule set was replaced)")
        limit = timeout_ms / 1000
        call = _Call(
            "call", request_frame(["call", tid, message, timeout_ms]), limit + GRACE_S, name
        )
        with self._lock:
            worker = self._pick(len(call.frame))
            if worker is None:
                self._queue.append(call)
            else:
                self._send(worker, call)
        busy = max(5.0, 5 * limit)
        try:
            async with asyncio.timeout(busy + limit + GRACE_S + 1.0):
                reply = await asyncio.wrap_future(call.future)
        except TimeoutError:
            with self._lock:
                queued = call in self._queue
                if queued:
                    self._queue.remove(call)
            if queued:
                raise TransformBusy("no transform worker became free in time") from None
            raise TransformTimedOut(f"transform ran past its {timeout_ms} ms limit") from None
        if reply[0] == "ok":
            return reply[1]
        _, kind, reason, detail = reply
        if kind == "timeout":
            raise TransformTimedOut(str(reason))
        raise TransformFailed(str(reason), detail=None if detail is None else str(detail))

    def _pick(self, size: int) -> _Worker | None:
        best: _Worker | None = None
        for worker in self._workers:
            n = len(worker.inflight)
            if n == 0:
                return worker
            if n < DEPTH and size <= PIPELINE_MAX and (best is None or n < len(best.inflight)):
                best = worker
        return best

    def _send(self, worker: _Worker, call: _Call) -> None:
        """Write a call to a worker (lock held). A broken pipe is the reader's to handle."""
        if not worker.inflight:
            worker.head_started = time.monotonic()
        worker.inflight.append(call)
        with contextlib.suppress(OSError):
            write_all(worker.wfd, call.frame)

    # --- workers ---------------------------------------------------------------------------

    def _start_worker(self, *, initial: bool = False) -> bool:
        """Start a worker, load every transform into it and let it serve; False if it failed."""
        worker = _Worker(self._memory_mb)
        try:
            worker.wait_ready()
            with self._lock:
                specs = dict(self._specs)
            for tid, frame in specs.items():
                reply = worker.request(frame, LOAD_TIMEOUT_S)
                if reply[0] != "ok":
                    raise WireClosed(f"loading a transform failed: {reply[2]}")
                worker.loaded.add(tid)
        except (WireClosed, OSError) as exc:
            worker.kill()
            how = worker.reap()
            if initial:
                raise TransformLoadError(f"a sandbox worker did not start: {exc} ({how})") from None
            log.error("a sandbox worker did not start: %s (%s)", exc, how)
            return False
        with self._lock:
            if self._closed:
                worker.kill()
                worker.reap()
                return True
            for tid, frame in self._specs.items():  # loaded while this worker started
                if tid not in worker.loaded:
                    self._control(worker, tid, frame)
            self._workers.append(worker)
            self._feed(worker)
        thread = threading.Thread(
            target=self._read,
            args=(worker,),
            name=f"hookwise-sandbox-{worker.proc.pid}",
            daemon=True,
        )
        self._threads.append(thread)
        thread.start()
        return True

    def _feed(self, worker: _Worker) -> None:
        """Hand queued calls to a worker with room (lock held)."""
        while self._queue and (
            not worker.inflight
            or (len(worker.inflight) < DEPTH and len(self._queue[0].frame) <= PIPELINE_MAX)
        ):
            self._send(worker, self._queue.popleft())

    def _read(self, worker: _Worker) -> None:
        """Replies of one worker, and its watchdog."""
        while True:
            with self._lock:
                head = worker.inflight[0] if worker.inflight else None
                deadline = worker.head_started + head.deadline_s if head is not None else None
            wait = _IDLE_POLL_S if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                ready, _, _ = select.select([worker.rfd], [], [], wait)
            except (OSError, ValueError):
                break
            if not ready:
                if deadline is not None and time.monotonic() >= deadline:
                    with self._lock:
                        still = bool(worker.inflight) and worker.inflight[0] is head
                    if still:
                        worker.timed_out = True
                        worker.kill()
                        break
                if self._closed:
                    break
                continue
            try:
                reply = read_reply(worker.rfd)
            except (WireClosed, OSError):
                break
            with self._lock:
                call = worker.inflight.popleft()
                worker.head_started = time.monotonic()
                self._feed(worker)
            if not call.future.done():
                call.future.set_result(reply)
        self._bury(worker)

    def _bury(self, worker: _Worker) -> None:
        """A worker ended (killed, died, or the pool closed): settle its calls, replace it."""
        worker.kill()
        how = worker.reap()
        with self._lock:
            if worker in self._workers:
                self._workers.remove(worker)
            calls = list(worker.inflight)
            worker.inflight.clear()
            head, rest = (calls[0], calls[1:]) if calls else (None, [])
            closed = self._closed
            if not closed:
                self._queue.extendleft(reversed(rest))  # not started: another worker runs them
                for other in self._workers:
                    self._feed(other)
        if closed:
            for call in calls:
                _fail(call, TransformFailed("transform is closed (the rule set was replaced)"))
            return
        if head is not None:
            if worker.timed_out:
                limit_ms = round((head.deadline_s - GRACE_S) * 1000)
                log.warning(
                    "sandbox worker %d killed: %s ran past its %d ms limit",
                    worker.proc.pid,
                    head.name,
                    limit_ms,
                )
                _fail(head, TransformTimedOut(f"transform ran past its {limit_ms} ms limit"))
            else:
                log.warning(
                    "sandbox worker %d died (%s) while running %s", worker.proc.pid, how, head.name
                )
                _fail(
                    head,
                    TransformFailed(
                        "transform's sandbox worker died (memory ceiling or fatal V8 error)"
                    ),
                )
        else:
            log.warning("sandbox worker %d ended (%s); replacing it", worker.proc.pid, how)
        delay = 0.1
        while not self._closed and not self._start_worker():
            time.sleep(delay)
            delay = min(5.0, delay * 2)

    def close(self) -> None:
        """Stop every worker; calls still waiting fail with `transform_failed`."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            workers = list(self._workers)
            queued = list(self._queue)
            self._queue.clear()
        for call in queued:
            _fail(call, TransformFailed("transform is closed (the rule set was replaced)"))
        for worker in workers:
            with contextlib.suppress(OSError):
                assert worker.proc.stdin is not None
                worker.proc.stdin.close()  # the worker reads end-of-file and exits
        deadline = time.monotonic() + 2.0
        for worker in workers:
            try:
                worker.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                worker.kill()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=5)


def _fail(call: _Call, error: Exception) -> None:
    if not call.future.done():
        call.future.set_exception(error)
