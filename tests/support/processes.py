"""A process's children and whether a process still runs, read from /proc (Linux)."""

from __future__ import annotations

from pathlib import Path


def children(pid: int) -> list[int]:
    """The pids of `pid`'s child processes (every thread's)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended while the list was read (it has no children now)
    return found


def running(pid: int) -> bool:
    """`pid` is a process that has not exited (a zombie has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def writer_of(gateway_pid: int) -> int:
    """The pid of a gateway's SQLite writer process (its child running `writer_child`)."""
    for pid in children(gateway_pid):
        if b"writer_child" in Path(f"/proc/{pid}/cmdline").read_bytes():
            return pid
    raise AssertionError("the gateway has no SQLite writer process")


def sandbox_workers(gateway_pid: int) -> set[int]:
    """The pids of a gateway's sandbox worker processes (its children running
    `hookwise.engine.transforms.worker`)."""
    found = set()
    for pid in children(gateway_pid):
        try:
            if b"transforms.worker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.add(pid)
        except OSError:
            pass  # a worker being stopped
    return found
