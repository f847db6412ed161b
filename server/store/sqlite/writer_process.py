"""The SQLite writer in a process of its own (`store.writer: process`, the default): the
gateway's side, `ProcessWriter` (the interface of `GroupCommitWriter`), and the process's,
`writer_child.main`, which runs `GroupCommitWriter`'s batches on the write connection.

Why a process: in the gateway, the writer thread needs the GIL around every statement it runs
and after every batch it commits, and under load the event loop holds the GIL; each batch then
waits up to a switch interval for it, twice, and the loop sits idle while its requests wait for
that commit. In a process of its own the writer never waits for the gateway's GIL: `/hooks/wake`
took 26-30% more requests per second here (see docs/performance.md).

The two talk in frames over the process's stdin and stdout (`writer_wire`); the process's
side is `writer_child`.

The gateway closes the process's stdin on the way out (or dies), and the process exits once
it has written what it received. When the process dies, every write waiting on it fails (an accepted request is answered with
an error, never acknowledged unwritten) and the gateway starts a new one, logging both.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

from ....plumbing.backoff import Backoff
from ....plumbing.children import PIPE, Child, NotReady, arestart, describe_exit
from ..commits import Commit, commits
from .writer import Rows
from .writer_wire import NO_FRAME, WriterGone, frame, pickle_call, read_frame, take_frame

T = TypeVar("T")
log = logging.getLogger("hookwise.store")

#: the writer process's program (`-c`: the module is not run as `__main__`, which would load
#: it a second time beside the package's own import of it)
_ENTRY = (
    "import sys; from hookwise.server.store.sqlite.writer_child import main;"
    " sys.exit(main(sys.argv[1:]))"
)
#: how long the gateway waits for the writer to commit what it has and exit, on the way out
STOP_TIMEOUT = 30.0
#: how long a new writer may take to open (and migrate) the database and say so: its ready
#: handshake; a writer silent past it is killed and the start fails, never awaited for ever
START_TIMEOUT = 600.0
#: how long a writer that failed to open the database is given to exit before it is killed
FAILED_EXIT = 5.0
#: after a writer died: a new one at once, then waits of 0.5 s, doubling, at most 5 s
RESTART = Backoff(base=0.5, cap=5.0, jitter=0.0)
#: attempts to start a new writer after one died, before writes fail
RESTART_ATTEMPTS = 5


class _FromWriter(asyncio.Protocol):
    """The writer's stdout: frames, handed to the `ProcessWriter`."""

    def __init__(self, owner: ProcessWriter) -> None:
        self._owner = owner
        self._buf = bytearray()

    def data_received(self, data: bytes) -> None:
        self._buf += data
        while (answer := take_frame(self._buf)) is not NO_FRAME:
            self._owner._on_frame(answer)

    def connection_lost(self, exc: Exception | None) -> None:
        self._owner._on_lost()


class ProcessWriter:
    """The gateway's handle on the writer process: the interface of `GroupCommitWriter`
    (`submit`, `submit_nowait`, `submit_rows`, `submit_rows_nowait`, `last_batch_at`)."""

    def __init__(self, path: Path, *, synchronous: str, shared: Callable[[], bool]) -> None:
        self._path = path
        self._synchronous = synchronous
        self._shared = shared
        self._loop: asyncio.AbstractEventLoop | None = None
        self._child: Child | None = None
        self._transport: asyncio.WriteTransport | None = None
        #: jobs not sent yet: (id, rows, fn, one_statement, future, value for a row job)
        self._unsent: list[_Unsent] = []
        #: sent jobs by id: (future, value for a row job, is a row job)
        self._waiting: dict[int, tuple[asyncio.Future[Any], Any, bool]] = {}
        #: sent or unsent jobs whose caller asked when they were committed (`store.commits`)
        self._timed: dict[int, list[Commit]] = {}
        self._next_id = 1
        self._flush_scheduled = False
        self._closing = False
        self._exited: asyncio.Event | None = None
        self._restarting: asyncio.Task[None] | None = None
        #: time.monotonic() of the last exchange with the writer; maintenance waits for quiet
        self.last_batch_at = 0.0

    @property
    def alive(self) -> bool:
        """A writer process is running and connected."""
        return self._transport is not None and self._child is not None and self._child.alive

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    # starting and stopping

    async def open(self) -> None:
        """Start the writer process; returns once it has opened (and migrated) the database,
        raising what it failed with otherwise."""
        self._loop = asyncio.get_running_loop()
        await self._spawn()

    async def _spawn(self) -> None:
        assert self._loop is not None
        argv = Child.python(
            "-c",
            _ENTRY,
            str(self._path),
            self._synchronous,
            "shared" if self._shared() else "alone",
        )
        child = Child(argv, stdin=PIPE, stdout=PIPE, python_path=True)
        proc = child.proc
        assert proc.stdout is not None and proc.stdin is not None
        try:  # the ready handshake: its first answer (`ready`, or why it could not open)
            first = await self._loop.run_in_executor(
                None, child.handshake, _first_answer, START_TIMEOUT
            )
        except NotReady as e:
            ended = await self._loop.run_in_executor(None, child.reap)
            raise RuntimeError(
                f"the SQLite writer process could not start: {e} ({ended})"
            ) from None
        except BaseException:
            child.reap()
            raise
        if first[0] != "ready":  # it exits once its stdin ends (killed if it does not)
            await self._loop.run_in_executor(None, child.reap, FAILED_EXIT)
            error = first[1]
            if isinstance(error, BaseException):
                raise error  # what opening the database failed with (SchemaTooNew, ...)
            raise RuntimeError(f"the SQLite writer process could not start: {error}")
        self._child = child
        self._exited = asyncio.Event()
        await self._loop.connect_read_pipe(lambda: _FromWriter(self), proc.stdout)
        self._transport, _ = await self._loop.connect_write_pipe(asyncio.Protocol, proc.stdin)
        self.last_batch_at = time.monotonic()
        if self._unsent:
            self._schedule_flush()

    async def _spawn_started(self) -> bool:
        await self._spawn()
        return True

    async def close(self) -> None:
        """Send what is waiting, let the writer commit it and exit, and wait for it."""
        self._closing = True
        if self._restarting is not None:
            self._restarting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._restarting
        if self._transport is None or self._child is None:
            unsent, self._unsent = self._unsent, []
            for job in unsent:  # stopping while a new writer was being started
                _fail(job[4], WriterGone("the store closed before the writer process was back"))
            return
        self._flush()
        self._transport.close()  # the writer's stdin ends: it commits what it has and exits
        assert self._exited is not None
        try:
            async with asyncio.timeout(STOP_TIMEOUT):
                await self._exited.wait()
        except TimeoutError:
            log.error("the SQLite writer process did not stop in %g s; killed", STOP_TIMEOUT)
            self._child.kill()
        assert self._loop is not None
        await self._loop.run_in_executor(None, self._child.wait)

    # submitting

    def submit(self, fn: Callable[[Any], T], *, one_statement: bool = False) -> asyncio.Future[T]:
        """Run `fn(cursor)` (picklable: a module-level function or a partial of one) in the
        writer's next batch; the future resolves after the commit."""
        fut = self._future()
        self._add(fut, None, fn, one_statement, None)
        return fut

    def submit_nowait(self, fn: Callable[[Any], Any], *, one_statement: bool = False) -> None:
        """Run `fn(cursor)` in the next batch; nobody waits for it."""
        self._add(None, None, fn, one_statement, None)

    def submit_rows(self, rows: Rows, value: T) -> asyncio.Future[T]:
        """Insert `rows` in the next batch; the future resolves to `value` after the commit."""
        fut = self._future()
        self._add(fut, rows, None, False, value)
        return fut

    def submit_rows_nowait(self, rows: Rows) -> None:
        """Insert `rows` in the next batch; nobody waits for it."""
        self._add(None, rows, None, False, None)

    def _future(self) -> asyncio.Future[Any]:
        assert self._loop is not None, "writer not started"
        return self._loop.create_future()

    def _add(
        self,
        fut: asyncio.Future[Any] | None,
        rows: Rows | None,
        fn: Any,
        one_statement: bool,
        value: Any,
    ) -> None:
        if self._restarting is None and self._transport is None:
            error = WriterGone("the SQLite writer process is not running")
            if fut is None:
                log.error("background write refused: %s", error)
            else:
                fut.set_exception(error)
            return
        job_id = 0
        if fut is not None:
            job_id = self._next_id
            self._next_id += 1
            timed = commits.get()
            if timed is not None:
                self._timed[job_id] = timed
        self._unsent.append((job_id, rows, fn, one_statement, fut, value))
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled and self._transport is not None:
            self._flush_scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        """Send every job submitted during this turn of the loop, as one frame."""
        self._flush_scheduled = False
        if not self._unsent or self._transport is None:
            return
        jobs, self._unsent = self._unsent, []
        sent: list[tuple[int, Any, Any, bool]] = []
        waiting = self._waiting
        for job_id, rows, fn, one_statement, fut, value in jobs:
            if rows is not None:
                sent.append((job_id, [(s.key, r) for s, r in rows], None, False))
            else:
                try:
                    call = pickle_call(fn)
                except Exception as e:  # a job that cannot be sent fails alone
                    _fail(fut, e)
                    self._timed.pop(job_id, None)
                    continue
                sent.append((job_id, None, call, one_statement))
            if fut is not None:
                waiting[job_id] = (fut, value, rows is not None)
        self._transport.write(frame(sent))
        self.last_batch_at = time.monotonic()

    # answers

    def _on_frame(self, frame: tuple[str, Any]) -> None:
        kind, data = frame
        if kind == "done":
            self.last_batch_at = time.monotonic()
            if self._timed:
                self._commits(data)
            waiting = self._waiting
            for job_id, ok, answer in data:
                found = waiting.pop(job_id, None)
                if found is None:
                    continue
                fut, value, is_rows = found
                if fut.done():
                    continue
                if not ok:
                    fut.set_exception(answer)
                else:
                    fut.set_result(value if is_rows else answer)
        elif kind == "log":
            _log_from_writer(*data)

    def _commits(self, results: list[tuple[int, bool, Any]]) -> None:
        """Tell the callers that asked (`store.commits`) which batch committed their write:
        each batch's results follow its mark (job id 0; see `writer_wire`)."""
        timed = self._timed
        batch: Commit | None = None
        for job_id, ok, answer in results:
            if job_id == 0:
                batch = Commit(answer[0], answer[1], answer[2], self.pid) if ok else None
                continue
            sink = timed.pop(job_id, None)
            if sink is not None and ok and batch is not None:
                sink.append(batch)

    def _on_lost(self) -> None:
        """The writer's stdout ended: it exited (or is about to)."""
        child = self._child
        self._transport = None
        if self._exited is not None:
            self._exited.set()
        if self._closing:
            return
        lost = list(self._waiting.values())
        self._waiting.clear()
        self._timed.clear()
        error = WriterGone("the SQLite writer process exited before answering")
        for fut, _, _ in lost:
            if not fut.done():
                fut.set_exception(error)
        assert self._loop is not None and child is not None
        self._restarting = self._loop.create_task(
            self._restart(child, len(lost)), name="hookwise-writer-restart"
        )

    async def _restart(self, gone: Child, failed: int) -> None:
        """Log how the writer process `gone` ended (`failed` writes with it), then start a new
        one; the writes submitted meanwhile wait for it."""
        assert self._loop is not None
        code = await self._loop.run_in_executor(None, gone.wait, 5.0)
        if code is None:  # its output closed but it lives on: it cannot be trusted
            gone.reap()
            ended = "an unknown end (killed: it closed its output and did not exit)"
        else:
            ended = describe_exit(code)
        log.error(
            "the SQLite writer process %s exited with %s: %d writes failed; starting a new one",
            gone.pid,
            ended,
            failed,
        )

        def not_started(attempt: int, e: BaseException) -> None:
            log.error("starting the SQLite writer process failed (attempt %d): %s", attempt, e)

        started = await arestart(
            self._spawn_started, policy=RESTART, attempts=RESTART_ATTEMPTS, on_failure=not_started
        )
        if started:
            log.warning("the SQLite writer process %s is running again", self.pid)
            self._restarting = None
            return
        unsent, self._unsent = self._unsent, []
        self._timed.clear()
        for job in unsent:
            _fail(job[4], WriterGone("the SQLite writer process could not be started"))
        log.critical("the SQLite writer process could not be started again: writes fail")
        self._restarting = None


_Unsent = tuple[int, "Rows | None", Any, bool, "asyncio.Future[Any] | None", Any]


def _fail(fut: asyncio.Future[Any] | None, error: BaseException) -> None:
    if fut is None:
        log.error("background write not sent: %s: %s", type(error).__name__, error)
    elif not fut.done():
        fut.set_exception(error)


def _log_from_writer(level: int, name: str, message: str) -> None:
    logging.getLogger(name).log(level, "%s", message)


def _first_answer(out: IO[bytes]) -> tuple[str, Any]:
    """The writer's first answer other than a log line (read before its pipe joins the loop:
    exactly its frames, nothing past them)."""
    fd = out.fileno()
    while True:
        try:
            kind, data = read_frame(fd)
        except EOFError:
            return ("failed", "it exited before it was ready")
        if kind == "log":
            _log_from_writer(*data)
            continue
        return kind, data
