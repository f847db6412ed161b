"""Fixtures for channel tests: loopback fakes of each messaging API, and a way to send.

`channel_server("telegram")` starts that API's fake (tests/fakes/channel_servers.py) and stops it
after the test; `deliver(channel, to, text)` runs one `send` with a fresh httpx client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from hookwise.server.channels.base import Channel, SendResult
from tests.fakes.channel_servers import FAKES, FakeServer


@pytest.fixture
def channel_server() -> Iterator[Callable[..., FakeServer]]:
    started: list[FakeServer] = []

    def start(name: str, **kwargs: Any) -> FakeServer:
        server = FAKES[name](**kwargs).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def send_now(channel: Channel, to: str, text: str, **kwargs: Any) -> SendResult:
    async def go() -> SendResult:
        async with httpx.AsyncClient(timeout=10) as client:
            return await channel.send(client, to, text, **kwargs)

    return asyncio.run(go())


@pytest.fixture
def deliver() -> Callable[..., SendResult]:
    return send_now
