"""The SQLite writer in a process of its own (`store.writer: process`, the default): the
gateway's side, `ProcessWriter` (the interface of `GroupCommitWriter`), and the process's,
`main`, which runs a `GroupCommitWriter` on the write connection.

Why a process: in the gateway, the writer thread needs the GIL around every statement it runs
and after every batch it commits, and under load the event loop holds the GIL; each batch then
waits up to a switch interval for it, twice, and the loop sits idle while its requests wait for
that commit. In a process of its own the writer never waits for the gateway's GIL: `/hooks/wake`
took 26-30% more requests per second here (see the README's performance section).

Frames (a 4-byte big-endian length, then a pickle) go over the process's stdin and stdout.
Gateway to writer: a list of jobs `(id, rows, call, one_statement)`, sent once per turn of the
event loop: `id` 0 for a job nobody awaits, `rows` as `(sink key, row)` pairs (`inserts.SINKS`),
or `call`, a pickled function of the cursor (`writes`: module-level functions, never closures);
a `Late` argument is worked out as the job leaves. Writer to gateway: `("ready", None)` once the
connection is open and migrated (or `("failed", message)`), `("done", [(id, ok, value or
error)])` after each commit, and `("log", (level, logger, message))` for its log lines, which
the gateway writes as its own.

Life: the process ignores SIGINT and SIGTERM (a signal to the whole process group must not stop
it before the gateway's last writes) and stops when its stdin closes: the gateway closes it on
the way out, or the gateway died (`kill -9`), and the process commits what it has and exits.
When the process dies, every write waiting on it fails (an accepted request is answered with
an error, never acknowledged unwritten) and the gateway starts a new one, logging both.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from hookwise.server.store.sqlite.inserts import SINKS
from hookwise.server.store.sqlite.writer import (
    MAX_BATCH,
    GroupCommitWriter,
    Job,
    Late,
    Result,
    Rows,
)

T = TypeVar("T")
log = logging.getLogger("hookwise.store")

_LENGTH = struct.Struct(">I")
#: the writer process's program (`-c`: the module is not run as `__main__`, which would load
#: it a second time beside the package's own import of it)
_ENTRY = f"import sys; from {__name__} import main; sys.exit(main(sys.argv[1:]))"
#: how long the gateway waits for the writer to commit what it has and exit, on the way out
STOP_TIMEOUT = 30.0
#: waits between attempts to start a new writer after one died (seconds, growing)
RESTART_DELAYS = (0.0, 0.5, 1.0, 2.0, 5.0)


class WriterGone(RuntimeError):
    """The writer process exited before it answered for a write."""


# --- the gateway's side ------------------------------------------------------------------------


class _Pickler(pickle.Pickler):
    """Pickles a job's call, working out its `Late` arguments."""

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, Late):
            return ("late", obj())
        return None


def _pickle_call(fn: Callable[[Any], Any]) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(fn)
    return buf.getvalue()


class _FromWriter(asyncio.Protocol):
    """The writer's stdout: frames, handed to the `ProcessWriter`."""

    def __init__(self, owner: ProcessWriter) -> None:
        self._owner = owner
        self._buf = bytearray()

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        while len(buf) >= 4:
            (size,) = _LENGTH.unpack_from(buf)
            if len(buf) < 4 + size:
                break
            frame = bytes(buf[4 : 4 + size])
            del buf[: 4 + size]
            self._owner._on_frame(pickle.loads(frame))

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
        self._proc: subprocess.Popen[bytes] | None = None
        self._transport: asyncio.WriteTransport | None = None
        self._read_transport: asyncio.BaseTransport | None = None
        #: jobs not sent yet: (id, rows, fn, one_statement, future, value for a row job)
        self._unsent: list[_Unsent] = []
        #: sent jobs by id: (future, value for a row job, is a row job)
        self._waiting: dict[int, tuple[asyncio.Future[Any], Any, bool]] = {}
        self._next_id = 1
        self._flush_scheduled = False
        self._closing = False
        self._exited: asyncio.Event | None = None
        self._restarts = 0
        self._restarting: asyncio.Task[None] | None = None
        #: time.monotonic() of the last exchange with the writer; maintenance waits for quiet
        self.last_batch_at = 0.0

    @property
    def alive(self) -> bool:
        """A writer process is running and connected."""
        return self._transport is not None and self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # starting and stopping

    async def open(self) -> None:
        """Start the writer process; returns once it has opened (and migrated) the database,
        raising what it failed with otherwise."""
        self._loop = asyncio.get_running_loop()
        await self._spawn()

    async def _spawn(self) -> None:
        assert self._loop is not None
        cmd = [
            sys.executable,
            "-c",
            _ENTRY,
            str(self._path),
            self._synchronous,
            "shared" if self._shared() else "alone",
        ]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        assert proc.stdout is not None and proc.stdin is not None
        try:
            first = await self._loop.run_in_executor(None, _first_answer, proc.stdout.fileno())
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        if first[0] != "ready":
            proc.stdin.close()
            await self._loop.run_in_executor(None, proc.wait)
            error = first[1]
            if isinstance(error, BaseException):
                raise error  # what opening the database failed with (SchemaTooNew, ...)
            raise RuntimeError(f"the SQLite writer process could not start: {error}")
        self._proc = proc
        self._exited = asyncio.Event()
        self._read_transport, _ = await self._loop.connect_read_pipe(
            lambda: _FromWriter(self), proc.stdout
        )
        self._transport, _ = await self._loop.connect_write_pipe(asyncio.Protocol, proc.stdin)
        self.last_batch_at = time.monotonic()
        if self._unsent:
            self._schedule_flush()

    async def close(self) -> None:
        """Send what is waiting, let the writer commit it and exit, and wait for it."""
        self._closing = True
        if self._restarting is not None:
            self._restarting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._restarting
        if self._transport is None or self._proc is None:
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
            self._proc.kill()
        assert self._loop is not None
        await self._loop.run_in_executor(None, self._proc.wait)

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
        frame = []
        waiting = self._waiting
        for job_id, rows, fn, one_statement, fut, value in jobs:
            if rows is not None:
                frame.append((job_id, [(s.key, r) for s, r in rows], None, False))
            else:
                try:
                    call = _pickle_call(fn)
                except Exception as e:  # a job that cannot be sent fails alone
                    _fail(fut, e)
                    continue
                frame.append((job_id, None, call, one_statement))
            if fut is not None:
                waiting[job_id] = (fut, value, rows is not None)
        data = pickle.dumps(frame, protocol=pickle.HIGHEST_PROTOCOL)
        self._transport.write(_LENGTH.pack(len(data)) + data)
        self.last_batch_at = time.monotonic()

    # answers

    def _on_frame(self, frame: tuple[str, Any]) -> None:
        kind, data = frame
        if kind == "done":
            self.last_batch_at = time.monotonic()
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

    def _on_lost(self) -> None:
        """The writer's stdout ended: it exited (or is about to)."""
        proc = self._proc
        self._transport = None
        if self._exited is not None:
            self._exited.set()
        if self._closing:
            return
        code: int | str | None = None
        if proc is not None:
            try:
                code = proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                code = "unknown (still running)"
                proc.kill()
        lost = list(self._waiting.items())
        self._waiting.clear()
        error = WriterGone(f"the SQLite writer process exited (code {code}) before answering")
        for _, (fut, _, _) in lost:
            if not fut.done():
                fut.set_exception(error)
        log.error(
            "the SQLite writer process %s exited with code %s: %d writes failed; starting a new one",
            proc.pid if proc is not None else "?",
            code,
            len(lost),
        )
        assert self._loop is not None
        self._restarting = self._loop.create_task(self._restart(), name="hookwise-writer-restart")

    async def _restart(self) -> None:
        for attempt, delay in enumerate(RESTART_DELAYS, 1):
            await asyncio.sleep(delay)
            try:
                await self._spawn()
            except Exception as e:
                log.error("starting the SQLite writer process failed (attempt %d): %s", attempt, e)
                continue
            self._restarts += 1
            log.warning("the SQLite writer process %s is running again", self.pid)
            self._restarting = None
            return
        unsent, self._unsent = self._unsent, []
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


def _read_exactly(fd: int, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        chunk = os.read(fd, size - len(out))
        if not chunk:
            raise EOFError("the writer process ended its output")
        out += chunk
    return bytes(out)


def _first_answer(fd: int) -> tuple[str, Any]:
    """The writer's first answer other than a log line (read before its pipe joins the loop)."""
    while True:
        try:
            (size,) = _LENGTH.unpack(_read_exactly(fd, 4))
            kind, data = pickle.loads(_read_exactly(fd, size))
        except EOFError:
            return ("failed", "it exited before it was ready")
        if kind == "log":
            _log_from_writer(*data)
            continue
        return kind, data


# --- the writer process ------------------------------------------------------------------------


class _Answers:
    """The process's stdout: whole frames, one writer at a time."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()
        self.broken = False

    def send(self, frame: tuple[str, Any]) -> None:
        if frame[0] == "done" and not all(ok for _, ok, _ in frame[1]):
            frame = ("done", [r if r[1] else _picklable(r) for r in frame[1]])
        try:
            data = pickle.dumps(frame, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            if frame[0] != "done":
                raise
            data = pickle.dumps(("done", [_picklable(r) for r in frame[1]]))
        out = memoryview(_LENGTH.pack(len(data)) + data)
        with self._lock:
            if self.broken:
                return
            try:
                while out:
                    out = out[os.write(self._fd, out) :]
            except OSError:  # the gateway is gone: what it awaited no longer matters
                self.broken = True


def _round_trips(value: Any) -> bool:
    """`value` pickles, and unpickles (an exception whose `__init__` takes more than its
    message pickles, then fails to load)."""
    try:
        pickle.loads(pickle.dumps(value))
    except Exception:
        return False
    return True


def _picklable(answer: tuple[int, bool, Any]) -> tuple[int, bool, Any]:
    if _round_trips(answer[2]):
        return answer
    value = answer[2]
    return (answer[0], False, RuntimeError(f"{type(value).__name__}: {value}"))


class _ToGateway(logging.Handler):
    """The process's log records, sent to the gateway to be written as its own."""

    def __init__(self, answers: _Answers) -> None:
        super().__init__()
        self._answers = answers

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            message = f"{message} ({type(exc).__name__}: {exc})"
        self._answers.send(("log", (record.levelno, record.name, message)))


def _unpickle_call(data: bytes) -> Callable[[Any], Any]:
    unpickler = pickle.Unpickler(io.BytesIO(data))
    unpickler.persistent_load = lambda pid: pid[1]  # type: ignore[method-assign]
    return unpickler.load()  # type: ignore[no-any-return]


class _Frames:
    """The frames on the process's stdin."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buf = bytearray()

    def _complete(self) -> bool:
        buf = self._buf
        return len(buf) >= 4 and len(buf) >= 4 + _LENGTH.unpack_from(buf)[0]

    def ready(self) -> bool:
        """A whole frame can be taken without waiting."""
        while not self._complete():
            if not select.select([self._fd], [], [], 0)[0]:
                return False
            if not self._read():
                return False
        return True

    def wait(self) -> Any:
        """The next frame, waiting for it; EOFError at the end of the input."""
        while not self._complete():
            if not self._read():
                raise EOFError
        (size,) = _LENGTH.unpack_from(self._buf)
        frame = pickle.loads(bytes(self._buf[4 : 4 + size]))
        del self._buf[: 4 + size]
        return frame

    def _read(self) -> bool:
        chunk = os.read(self._fd, 1 << 16)
        self._buf += chunk
        return bool(chunk)


def _jobs(frame: Any, answers: _Answers) -> list[Job[Any]]:
    """A frame's jobs, ready for the writer (a call that does not unpickle fails alone)."""
    jobs: list[Job[Any]] = []
    for job_id, rows, call, one_statement in frame:
        if rows is not None:
            jobs.append(Job(None, job_id or None, [(SINKS[k], r) for k, r in rows]))  # type: ignore[arg-type]
            continue
        try:
            fn = _unpickle_call(call)
        except Exception as e:
            if job_id:
                answers.send(("done", [(job_id, False, e)]))
            else:
                log.error("background write not loaded: %s", type(e).__name__)
            continue
        jobs.append(Job(fn, job_id or None, one_statement=one_statement))
    return jobs


def main(argv: list[str]) -> int:
    """The writer process: `<database> <synchronous> alone|shared`."""
    from hookwise.server.store.sqlite.connect import BATCH, WriteLock, connect_writer

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    path, synchronous, mode = Path(argv[0]), argv[1], argv[2]
    answers = _Answers(os.dup(sys.stdout.fileno()))
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print must not break a frame
    root = logging.getLogger()
    root.handlers[:] = [_ToGateway(answers)]
    root.setLevel(logging.INFO)
    lock = WriteLock(path)

    def deliver(results: list[Result]) -> None:
        answers.send(
            (
                "done",
                [
                    (job_id, error is None, value if error is None else error)
                    for job_id, value, error in results
                ],
            )
        )

    writer = GroupCommitWriter(
        lambda: connect_writer(path, synchronous, lock),
        name="hookwise-sqlite-writer",
        exclusive=lock if mode == "shared" else None,
        batch=BATCH,
        deliver=deliver,
    )
    try:
        conn = writer.connect()
    except Exception as e:
        answers.send(("failed", e if _round_trips(e) else f"{type(e).__name__}: {e}"))
        return 1
    answers.send(("ready", None))
    frames = _Frames(sys.stdin.fileno())
    try:
        while True:
            batch = _jobs(frames.wait(), answers)
            while len(batch) < MAX_BATCH and frames.ready():  # what else arrived meanwhile
                batch += _jobs(frames.wait(), answers)
            if batch:
                writer.run_batch(conn, batch)
    except EOFError:
        pass  # the gateway closed our stdin, or died: everything it sent is written
    finally:
        conn.close()
        lock.close()
    return 0
