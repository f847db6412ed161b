"""The sandbox tier: a supervised pool of worker processes that run transforms.

A `WorkerPool` belongs to one rule set's `TransformHost`. It starts `size` worker processes
(`hookwise.engine.transforms.worker`) the first time a transform is loaded, loads every transform
into every worker, and sends each call to a worker:

- **Dispatch.** A call goes to the worker with the fewest calls in flight (ties: the first), so
  sequential calls meet the same warm context; a worker takes a second call behind the one it
  runs (pipelining keeps it busy while the gateway handles the reply). With every worker full,
  calls wait in one queue; a call that waits longer than its busy limit fails with 503
  `transform_busy`.
- **Timing.** A caller that sets `executions` learns when and in which worker each of its calls
  ran (the worker measures it; see `executions`); otherwise a call sends and gets nothing more.
- **Replies** are read on the caller's event loop (`add_reader` on each worker's pipe): no thread
  hop and no GIL hand-off on the hot path. The pool serves one event loop at a time (the
  server's); a call from another loop moves the readers there.
- **Watchdog.** A thread checks every `_WATCH_S` the call each worker is running against its
  deadline, the call's time limit plus `GRACE_S`. V8 stops ordinary runaway code at the limit
  itself; a call still running at the deadline (inside a built-in such as
  `Array.prototype.fill`, or a Python function that never returns) has its worker killed
  (SIGKILL): that request gets 504 `transform_timeout` at once, not when the worker has
  finished dying (the kernel frees a large heap first, which takes a second or more).
- **Deaths.** A worker that dies (its memory ceiling, a V8 fatal error, a crash) fails the call it
  was running with 500 `transform_failed`; calls queued behind it go back to the shared queue,
  unharmed. A replacement worker is started at once (on a thread: starting takes a while) and
  loads every transform again; a worker that cannot start is retried with a back-off, and calls
  meanwhile go to the others (or wait).
  Every death is logged with the worker's pid, how it ended and the transform's name (never the
  payload).
- **Recycling.** V8 does not give memory back: under steady load a worker's resident memory grows
  by about a kilobyte a call and stays there when the load stops (measured with `bench/soak.py`).
  So a worker that has taken `recycle_calls` calls, or whose resident memory has grown
  `recycle_mb` MiB past what it was when it became ready (checked every `_RSS_EVERY` calls), is
  replaced: a fresh worker is started beside it (on a thread), and once it serves, the old one
  takes no new calls, finishes the ones it holds, and is stopped. No call fails for it, and the
  pool never runs short of a worker during the swap.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import threading
import time
from collections import deque
from typing import Any

from ...plumbing.backoff import Backoff
from ...plumbing.children import restart
from .base import (
    TransformBusy,
    TransformFailed,
    TransformLoadError,
    TransformTimedOut,
)
from .executions import executions, report
from .process import Call, WorkerProcess
from .wire import (
    WireClosed,
    request_frame,
    take_reply,
    write_all,
)

log = logging.getLogger("hookwise.sandbox")

GRACE_S = 0.25
"""How long past its time limit a call may run before its worker is killed."""
DEPTH = 2
"""Calls in flight per worker: the one it runs and one waiting in its pipe."""
PIPELINE_MAX = 256 * 1024
"""A larger request is only sent to an idle worker (it must not wait in a full pipe)."""
LOAD_TIMEOUT_S = 60.0
RESTART = Backoff(base=0.1, cap=5.0, jitter=0.0)
"""Waits between attempts to start a replacement worker: 0.1 s, doubling, at most 5 s."""
_WATCH_S = 0.02
_RSS_EVERY = 1000
_READ_SIZE = 256 * 1024


class WorkerPool:
    """Sandbox worker processes for one rule set's transforms (see the module docstring)."""

    def __init__(
        self, *, size: int, memory_mb: int, recycle_calls: int = 0, recycle_mb: int = 0
    ) -> None:
        self._size = max(1, size)
        self._memory_mb = memory_mb
        self._recycle_calls = recycle_calls  # 0: never for its calls
        self._recycle_bytes = recycle_mb * 1024 * 1024  # 0: never for its memory
        self._lock = threading.Lock()
        self._specs: dict[int, bytes] = {}
        self._workers: list[WorkerProcess] = []
        self._queue: deque[Call] = deque()
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._stop = threading.Event()
        self._watchdog: threading.Thread | None = None

    # --- loading (synchronous: rules compile before anything is served) ----------------------

    def load(self, spec: dict[str, Any]) -> int:
        """Load a transform into every worker; its id for `call`. `TransformLoadError` when the
        module cannot be loaded (the same in every worker)."""
        if self._loop is not None:
            raise TransformLoadError("transforms load before the rule set serves calls")
        tid = next(self._ids)
        frame = request_frame(["load", tid, spec])
        if self._watchdog is None:
            for _ in range(self._size):
                self._workers.append(self._spawn(initial=True))
            self._watchdog = threading.Thread(
                target=self._watch, name="hookwise-sandbox-watchdog", daemon=True
            )
            self._watchdog.start()
        for worker in self._workers:
            try:
                reply = worker.request(frame, LOAD_TIMEOUT_S)
            except (WireClosed, OSError) as exc:
                reply = ["err", "load", f"the sandbox worker failed while loading it: {exc}"]
            if reply[0] != "ok":
                raise TransformLoadError(str(reply[2]))
        with self._lock:
            self._specs[tid] = frame
        return tid

    def _spawn(self, *, initial: bool = False) -> WorkerProcess:
        """A started worker with every transform loaded (blocking); raises `WireClosed`."""
        worker = WorkerProcess(self._memory_mb)
        try:
            worker.wait_ready()
            with self._lock:
                specs = list(self._specs.values())
            for frame in specs:
                reply = worker.request(frame, LOAD_TIMEOUT_S)
                if reply[0] != "ok":
                    raise WireClosed(f"loading a transform failed: {reply[2]}")
            worker.ready_rss = worker.rss()
        except (WireClosed, OSError) as exc:
            how = worker.reap()
            if initial:
                raise TransformLoadError(f"a sandbox worker did not start: {exc} ({how})") from None
            raise WireClosed(f"{exc} ({how})") from None
        return worker

    # --- calls (on the event loop) ---------------------------------------------------------

    async def call(self, tid: int, message: Any, timeout_ms: int, name: str) -> Any:
        """Run one call in a worker; the value the transform produced, or a `TransformError`."""
        if self._closed:
            raise TransformFailed("transform is closed (the rule set was replaced)")
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._bind(loop)
        limit = timeout_ms / 1000
        timed = executions.get()  # None unless the caller asks when the call ran
        frame = request_frame(
            ["call", tid, message, timeout_ms]
            if timed is None
            else ["call", tid, message, timeout_ms, 1]
        )
        call = Call(frame, limit + GRACE_S, name, loop.create_future())
        with self._lock:
            worker = self._pick(len(frame))
            if worker is None:
                self._queue.append(call)
            else:
                self._send(worker, call)
        busy = max(5.0, 5 * limit)
        try:
            async with asyncio.timeout(busy + limit + GRACE_S + 1.0):
                reply = await call.future
        except TimeoutError:
            with self._lock:
                queued = call in self._queue
                if queued:
                    self._queue.remove(call)
            if queued:
                raise TransformBusy("no transform worker became free in time") from None
            raise TransformTimedOut(f"transform ran past its {timeout_ms} ms limit") from None
        if timed is not None:
            report(timed, reply)
        if reply[0] == "ok":
            return reply[1]
        kind, reason, detail = reply[1], reply[2], reply[3]
        if kind == "timeout":
            raise TransformTimedOut(str(reason))
        raise TransformFailed(str(reason), detail=None if detail is None else str(detail))

    def _bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Read every worker's replies on `loop` from now on."""
        self._loop = loop
        with self._lock:
            workers = list(self._workers)
        for worker in workers:
            self._attach(worker)

    def _attach(self, worker: WorkerProcess) -> None:
        loop = self._loop
        assert loop is not None
        old = worker.loop
        if old is not None and old is not loop and not old.is_closed():
            with contextlib.suppress(Exception):
                old.remove_reader(worker.rfd)
        if old is not loop:
            loop.add_reader(worker.rfd, self._readable, worker)
            worker.loop = loop

    def _pick(self, size: int) -> WorkerProcess | None:
        best: WorkerProcess | None = None
        for worker in self._workers:
            if worker.retired:
                continue
            n = len(worker.inflight)
            if n == 0:
                return worker
            if n < DEPTH and size <= PIPELINE_MAX and (best is None or n < len(best.inflight)):
                best = worker
        return best

    def _send(self, worker: WorkerProcess, call: Call) -> None:
        """Write a call to a worker (lock held). A broken pipe shows as the worker's end."""
        if not worker.inflight:
            worker.head_started = time.monotonic()
        worker.inflight.append(call)
        with contextlib.suppress(OSError):
            write_all(worker.wfd, call.frame)
        worker.calls += 1
        if not worker.renewing and self._worn(worker):
            worker.renewing = True
            threading.Thread(
                target=self._replace, args=(worker,), name="hookwise-sandbox-start", daemon=True
            ).start()

    def _worn(self, worker: WorkerProcess) -> bool:
        """The worker is due for replacement (see Recycling in the module docstring)."""
        if self._recycle_calls and worker.calls >= self._recycle_calls:
            return True
        if self._recycle_bytes and worker.calls % _RSS_EVERY == 0 and worker.ready_rss:
            return worker.rss() - worker.ready_rss >= self._recycle_bytes
        return False

    def _feed(self, worker: WorkerProcess) -> None:
        """Hand queued calls to a worker with room (lock held)."""
        while (
            not worker.retired
            and self._queue
            and (
                not worker.inflight
                or (len(worker.inflight) < DEPTH and len(self._queue[0].frame) <= PIPELINE_MAX)
            )
        ):
            self._send(worker, self._queue.popleft())

    def _readable(self, worker: WorkerProcess) -> None:
        """Replies (or the end) from a worker, on the event loop: one read, every complete
        reply in it."""
        try:
            chunk = os.read(worker.rfd, _READ_SIZE)
        except OSError:
            chunk = b""
        if not chunk:
            self._bury(worker)
            return
        worker.buffer += chunk
        while True:
            try:
                reply = take_reply(worker.buffer)
            except WireClosed:
                worker.kill()  # it speaks nonsense: the end of it shows on the next read
                return
            if reply is None:
                return
            with self._lock:
                if not worker.inflight:
                    continue
                call = worker.inflight.popleft()
                worker.head_started = time.monotonic()
                self._feed(worker)
                done = worker.retired and not worker.inflight
            if not call.future.done():
                call.future.set_result(reply)
            if done:
                self._dismiss(worker)
                return

    # --- deaths ----------------------------------------------------------------------------

    def _watch(self) -> None:
        """Kill a worker whose running call passed its deadline (the loop then sees its end)."""
        while not self._stop.wait(_WATCH_S):
            now = time.monotonic()
            with self._lock:
                for worker in self._workers:
                    head = worker.inflight[0] if worker.inflight else None
                    if (
                        head
                        and not worker.timed_out
                        and now >= worker.head_started + head.deadline_s
                    ):
                        worker.timed_out = True
                        worker.kill()
                        # answered now: the worker's end shows only once the kernel has freed
                        # its memory (a second or more for a large heap), which the request
                        # does not wait for
                        limit_ms = round((head.deadline_s - GRACE_S) * 1000)
                        _fail(
                            head, TransformTimedOut(f"transform ran past its {limit_ms} ms limit")
                        )

    def _bury(self, worker: WorkerProcess) -> None:
        """A worker ended (killed, died, or the pool closed): settle its calls, replace it.
        Runs on the worker's event loop."""
        if worker.buried:
            return
        worker.buried = True
        if worker.loop is not None and not worker.loop.is_closed():
            with contextlib.suppress(Exception):
                worker.loop.remove_reader(worker.rfd)
        how = worker.reap()
        with self._lock:
            if worker in self._workers:
                self._workers.remove(worker)
            calls = list(worker.inflight)
            worker.inflight.clear()
            closed = self._closed
            if not closed:
                self._queue.extendleft(reversed(calls[1:]))  # not started: another worker runs them
                for other in self._workers:
                    self._feed(other)
        if closed:
            for call in calls:
                _fail(call, TransformFailed("transform is closed (the rule set was replaced)"))
            return
        if calls:
            head = calls[0]
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
        if worker.renewing:
            return  # its replacement is being started already (see `_worn`)
        threading.Thread(target=self._replace, name="hookwise-sandbox-start", daemon=True).start()

    def _dismiss(self, worker: WorkerProcess) -> None:
        """Stop a retired worker that holds no call (on its event loop)."""
        worker.buried = True
        if worker.loop is not None and not worker.loop.is_closed():
            with contextlib.suppress(Exception):
                worker.loop.remove_reader(worker.rfd)
        with self._lock:
            if worker in self._workers:
                self._workers.remove(worker)
        rss = worker.rss()
        worker.reap()
        log.info(
            "sandbox worker %d recycled after %d calls (resident memory %d MiB, %d MiB at start)",
            worker.proc.pid,
            worker.calls,
            rss >> 20,
            worker.ready_rss >> 20,
        )

    def _replace(self, old: WorkerProcess | None = None) -> None:
        """Start a replacement worker (on its own thread), then let it serve on the loop; with
        `old`, a worn worker that is retired once the new one serves."""
        worker = restart(
            self._spawn,
            policy=RESTART,
            retry_on=(WireClosed,),
            stopped=lambda: self._closed,
            on_failure=lambda _n, exc: log.error(
                "a sandbox worker did not start: %s; retrying", exc
            ),
        )
        if worker is None:
            return
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._enlist, worker, old)
                return
            except RuntimeError:  # the loop closed meanwhile
                pass
        with self._lock:  # no loop serves calls now: the next call's loop attaches it
            closed = self._closed
            if not closed:
                self._workers.append(worker)
            if old is not None and old in self._workers:
                self._workers.remove(old)  # it holds no call: nothing is served without a loop
        if closed:
            worker.reap()
        if old is not None:
            old.reap()

    def _enlist(self, worker: WorkerProcess, old: WorkerProcess | None = None) -> None:
        if self._closed:
            worker.reap()
            return
        with self._lock:
            self._workers.append(worker)
        self._attach(worker)
        idle = None
        with self._lock:
            if old is not None and not old.buried:
                old.retired = True
                idle = old if not old.inflight else None
            self._feed(worker)
        if idle is not None:
            self._dismiss(idle)

    def close(self) -> None:
        """Stop every worker; calls still waiting fail with `transform_failed`."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            workers = list(self._workers)
            self._workers.clear()
            queued = list(self._queue)
            self._queue.clear()
        self._stop.set()
        for call in queued:
            _fail(call, TransformFailed("transform is closed (the rule set was replaced)"))
        for worker in workers:
            worker.child.close_stdin()  # the worker reads end-of-file and exits
        deadline = time.monotonic() + 2.0
        for worker in workers:
            worker.child.wait(max(0.0, deadline - time.monotonic()))
            loop = worker.loop
            if loop is None or loop.is_closed() or _running_loop() is loop:
                self._bury(worker)
            else:
                try:
                    loop.call_soon_threadsafe(self._bury, worker)
                except RuntimeError:
                    worker.reap()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _fail(call: Call, error: Exception) -> None:
    future = call.future
    loop = future.get_loop()
    if loop.is_closed():
        return

    def settle() -> None:
        if not future.done():
            future.set_exception(error)

    if _running_loop() is loop:
        settle()
    else:
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle)
