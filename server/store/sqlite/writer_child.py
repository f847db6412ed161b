"""SQLite's writer process (see `writer_process` for why, and `writer_wire` for its frames):
`main` opens the write connection (WAL, migrations, the batch statement), then writes each
batch of jobs the gateway sends with `GroupCommitWriter`'s batch logic, on one thread, and
answers for it.

It ignores SIGINT and SIGTERM (a signal to the whole process group must not stop it before
the gateway's last writes) and stops when its stdin closes: the gateway closes it on the way
out, or the gateway died (`kill -9`); it has written everything it received by then.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from .inserts import SINKS
from .writer import MAX_BATCH, GroupCommitWriter, Job, Result
from .writer_wire import (
    NO_FRAME,
    round_trips,
    take_frame,
    unpickle_call,
)
from .writer_wire import frame as frame_of

log = logging.getLogger("hookwise.store")

#: seconds a thread holds the interpreter while another waits for it (see `main`)
SWITCH_INTERVAL = 0.0002


class _Answers:
    """The process's stdout: whole frames, from the main thread (log lines) and the flusher's
    (a batch's results, once synced): one at a time."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()
        self.broken = False

    def send(self, answer: tuple[str, Any]) -> None:
        if answer[0] == "done" and not all(ok for _, ok, _ in answer[1]):
            answer = ("done", [r if r[1] else _picklable(r) for r in answer[1]])
        try:
            data = frame_of(answer)
        except Exception:
            if answer[0] != "done":
                raise
            data = frame_of(("done", [_picklable(r) for r in answer[1]]))
        out = memoryview(data)
        with self._lock:
            if self.broken:
                return
            try:
                while out:
                    out = out[os.write(self._fd, out) :]
            except OSError:  # the gateway is gone: what it awaited no longer matters
                self.broken = True


def _picklable(answer: tuple[int, bool, Any]) -> tuple[int, bool, Any]:
    if round_trips(answer[2]):
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


class _Frames:
    """The frames on the process's stdin."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buf = bytearray()

    def now(self) -> Any:
        """The next frame if it can be had without waiting, else `NO_FRAME`."""
        while (found := take_frame(self._buf)) is NO_FRAME:
            if not select.select([self._fd], [], [], 0)[0] or not self._read():
                break
        return found

    def wait(self) -> Any:
        """The next frame, waiting for it; EOFError at the end of the input."""
        while (found := take_frame(self._buf)) is NO_FRAME:
            if not self._read():
                raise EOFError
        return found

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
            fn = unpickle_call(call)
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
    from .connect import BATCH, WriteLock, connect_writer, wal_to_sync

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    path, synchronous, mode = Path(argv[0]), argv[1], argv[2]
    # the flusher's thread takes the interpreter back after each fsync to answer for it: the
    # batches on the main thread must not keep it waiting a whole default interval (5 ms)
    sys.setswitchinterval(SWITCH_INTERVAL)
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
        wal=wal_to_sync(path, synchronous),
        marks=True,  # each batch's times, for a traced request's `store.commit` span
    )
    try:
        conn = writer.connect()
    except Exception as e:
        answers.send(("failed", e if round_trips(e) else f"{type(e).__name__}: {e}"))
        return 1
    answers.send(("ready", None))
    frames = _Frames(sys.stdin.fileno())
    try:
        while True:
            batch = _jobs(frames.wait(), answers)
            while len(batch) < MAX_BATCH:  # what else arrived meanwhile
                more = frames.now()
                if more is NO_FRAME:
                    break
                batch += _jobs(more, answers)
            if batch:
                writer.run_batch(conn, batch)
    except EOFError:
        pass  # the gateway closed our stdin, or died: everything it sent is written
    finally:
        writer.disconnect(conn)
        lock.close()
    return 0
