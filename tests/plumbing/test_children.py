"""The one child-process helper (hookwise.plumbing.children), on real child processes: spawn,
the ready handshake, reaping and how a child ended, forwarding signals, stopping, and restarting
with the one back-off."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import pytest

from hookwise.plumbing.backoff import Backoff
from hookwise.plumbing.children import (
    PIPE,
    Child,
    NotReady,
    arestart,
    describe_exit,
    forward,
    restart,
    stop_all,
)

#: a child that says it is ready, then echoes the signals it gets (SIGHUP) until SIGTERM
ECHO = """
import signal, sys, time
signal.signal(signal.SIGHUP, lambda s, f: print("got", signal.Signals(s).name, flush=True))
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""


def _line(out) -> str:
    return out.readline().decode().strip()


@pytest.mark.parametrize(
    ("code", "shown"),
    [
        (None, "running"),
        (0, "exit code 0"),
        (3, "exit code 3"),
        (-9, "signal SIGKILL"),
        (-15, "signal SIGTERM"),
        (-99, "signal 99"),
    ],
)
def test_how_a_process_ended_is_one_phrase(code: int | None, shown: str) -> None:
    assert describe_exit(code) == shown


def test_a_child_answers_its_handshake_and_is_reaped_by_the_signal_given() -> None:
    child = Child(Child.python("-c", ECHO), stdout=PIPE)
    try:
        assert child.handshake(_line, 30) == "ready"
        assert child.alive
    finally:
        how = child.reap(5, signum=signal.SIGTERM)
    assert how == "signal SIGTERM"
    assert not child.alive
    assert child.proc.stdout is not None and child.proc.stdout.closed


def test_a_silent_child_is_not_ready_and_is_killed_when_reaped() -> None:
    child = Child(Child.python("-c", "import time; time.sleep(60)"), stdout=PIPE)
    with pytest.raises(NotReady):
        child.handshake(_line, 0.3)
    assert child.alive  # the caller decides: here, reaping kills it
    assert child.reap() == "signal SIGKILL"


def test_a_child_that_exits_before_its_handshake_says_how() -> None:
    child = Child(Child.python("-c", "import sys; sys.exit(3)"), stdout=PIPE)
    assert child.handshake(_line, 30) == ""  # end of file: it said nothing
    assert child.reap(5) == "exit code 3"


def test_reaping_closes_the_childs_stdin_first_so_a_child_that_reads_it_exits_by_itself() -> None:
    reads = "import sys; sys.stdin.buffer.read(); sys.exit(4)"  # exits at the end of its input
    child = Child(Child.python("-c", reads), stdin=PIPE, stdout=PIPE)
    assert child.reap(30) == "exit code 4"  # not SIGKILL: it saw its input end
    assert child.proc.stdin is not None and child.proc.stdin.closed


def test_a_handshake_needs_the_childs_stdout() -> None:
    child = Child(Child.python("-c", "pass"))
    try:
        with pytest.raises(ValueError, match="stdout"):
            child.handshake(_line, 1)
    finally:
        child.reap(5)


def test_a_child_can_import_what_its_parent_imports() -> None:
    code = "import os; print(os.environ.get('PYTHONPATH', ''), flush=True)"
    child = Child(Child.python("-c", code), stdout=PIPE, python_path=True, env={"X": "1"})
    try:
        seen = child.handshake(_line, 30).split(os.pathsep)
    finally:
        child.reap(5)
    assert [p for p in sys.path if p] == seen


def test_signals_are_forwarded_to_every_running_child_and_not_to_the_dead() -> None:
    children = [Child(Child.python("-c", ECHO), stdout=PIPE) for _ in range(2)]
    dead = Child(Child.python("-c", "pass"), stdout=PIPE)
    try:
        for child in children:
            assert child.handshake(_line, 30) == "ready"
        dead.wait(30)
        forward([*children, dead], signal.SIGHUP)
        for child in children:
            assert child.handshake(_line, 30) == "got SIGHUP"
        assert dead.send(signal.SIGHUP) is False
    finally:
        for child in [*children, dead]:
            child.reap()


def test_stopping_kills_the_children_that_do_not_stop_in_time() -> None:
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    obedient = Child(Child.python("-c", ECHO), stdout=PIPE)
    deaf = Child(Child.python("-c", stubborn), stdout=PIPE)
    for child in (obedient, deaf):
        assert child.handshake(_line, 30) == "ready"
    stop_all([obedient, deaf], signal.SIGTERM, timeout=1.0)
    assert obedient.proc.returncode == -signal.SIGTERM
    assert deaf.proc.returncode == -signal.SIGKILL


class Flaky:
    """A start that fails `failures` times, then returns "up"."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise OSError(f"failure {self.calls}")
        return "up"


POLICY = Backoff(base=0.1, cap=0.3, jitter=0.0)


def test_a_restart_waits_the_back_off_between_failures_and_reports_each() -> None:
    waits: list[float] = []
    failed: list[tuple[int, str]] = []
    start = Flaky(3)
    got = restart(
        start,
        policy=POLICY,
        sleep=waits.append,
        on_failure=lambda n, e: failed.append((n, str(e))),
    )
    assert got == "up" and start.calls == 4
    assert waits == pytest.approx([0.1, 0.2, 0.3])
    assert failed == [(1, "failure 1"), (2, "failure 2"), (3, "failure 3")]


def test_a_restart_gives_up_after_its_attempts_and_when_stopped() -> None:
    waits: list[float] = []
    start = Flaky(10)
    assert restart(start, policy=POLICY, attempts=3, sleep=waits.append) is None
    assert start.calls == 3 and waits == pytest.approx([0.1, 0.2])
    never = Flaky(0)
    assert restart(never, policy=POLICY, stopped=lambda: True, sleep=waits.append) is None
    assert never.calls == 0


def test_a_restart_lets_other_errors_through() -> None:
    def broken() -> str:
        raise KeyError("not a start failure")

    with pytest.raises(KeyError):
        restart(broken, policy=POLICY, retry_on=(OSError,), sleep=lambda _s: None)


def test_an_async_restart_waits_the_same_back_off() -> None:
    start = Flaky(2)
    failed: list[int] = []

    async def start_async() -> str:
        return start()

    async def main() -> tuple[str | None, float]:
        loop = asyncio.get_running_loop()
        began = loop.time()
        got = await arestart(
            start_async, policy=POLICY, attempts=5, on_failure=lambda n, _e: failed.append(n)
        )
        return got, loop.time() - began

    got, took = asyncio.run(main())
    assert got == "up" and failed == [1, 2]
    assert took >= 0.1 + 0.2 - 0.01  # it slept the two waits (a floor: no timed upper bound)
