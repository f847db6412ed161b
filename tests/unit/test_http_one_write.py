"""`server.http._OneWrite`: a response's head leaves with its body in one write.

The transport here is a recording stand-in for asyncio's (an interface of the standard library,
not one of ours); the whole protocol is exercised through the real server by tests/door."""

from __future__ import annotations

import asyncio
from typing import Any

from hookwise.server.ingress.http import _OneWrite

HEAD = b"HTTP/1.1 200 OK\\r\\ncontent-length: 2\\r\\n\\r\\n"


class Recording:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def _run(steps: Any) -> Recording:
    transport = Recording()

    async def main() -> None:
        await steps(_OneWrite(transport, asyncio.get_running_loop()), transport)  # type: ignore[arg-type]

    asyncio.run(main())
    return transport


def test_head_and_body_leave_in_one_write() -> None:
    async def steps(w: _OneWrite, t: Recording) -> None:
        w.write(HEAD)
        assert t.writes == []
        w.write(b"{}")
        assert t.writes == [HEAD + b"{}"]

    _run(steps)


def test_a_head_without_a_body_yet_leaves_at_the_next_turn_of_the_loop() -> None:
    async def steps(w: _OneWrite, t: Recording) -> None:
        w.write(HEAD)
        await asyncio.sleep(0)
        assert t.writes == [HEAD]
        w.write(b"{}")
        assert t.writes == [HEAD, b"{}"]

    _run(steps)


def test_100_continue_is_not_held() -> None:
    async def steps(w: _OneWrite, t: Recording) -> None:
        w.write(b"HTTP/1.1 100 Continue\\r\\n\\r\\n")
        assert t.writes == [b"HTTP/1.1 100 Continue\\r\\n\\r\\n"]
        w.write(HEAD)
        w.write(b"{}")
        assert t.writes[1:] == [HEAD + b"{}"]

    _run(steps)


def test_close_sends_a_held_head_first_and_the_rest_passes_through() -> None:
    async def steps(w: _OneWrite, t: Recording) -> None:
        w.write(HEAD)
        assert not w.is_closing()
        w.close()
        assert (t.writes, t.closed, w.is_closing()) == ([HEAD], True, True)
        await asyncio.sleep(0)
        assert t.writes == [HEAD]  # the scheduled flush found nothing left to send

    _run(steps)
