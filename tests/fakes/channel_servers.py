"""Loopback fakes of the messaging APIs hookwise delivers to, one small HTTP server per channel.

Each fake implements the part of its API hookwise uses, as the real service does: the auth check
(a wrong credential gets the API's real 401 or error body), the service's input rules (checked
against its published description in `tests/fakes/api_specs/` and the documented limits beyond
it), success answers in the API's real shape with message ids, error answers for unknown
recipients (`server.missing.add(id)`), and scriptable failures (`rate_limit`, `fail`, `script`;
see `tests/fakes/fake_http.py`). `server.config()` gives a `channels.<id>` mapping that points
the channel at the fake. Use `start(name)` or the `running(name)` context manager, or the
`channel_server` fixture in tests/channels/conftest.py.

The fakes live in `chat_fakes` (Telegram, Discord, Slack, Mattermost), `phone_fakes`
(WhatsApp, Signal, BlueBubbles, Teams), `github_fake` and `gitlab_fake`; this module is their one import path.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from tests.fakes.chat_fakes import (
    DiscordFake,
    MattermostFake,
    SlackFake,
    TelegramFake,
    telegram_visible_text,
)
from tests.fakes.fake_http import FakeServer, Recorded, Reply
from tests.fakes.github_fake import GitHubFake
from tests.fakes.gitlab_fake import GitLabFake
from tests.fakes.phone_fakes import BlueBubblesFake, SignalFake, TeamsFake, WhatsAppFake

FAKES: dict[str, type[FakeServer]] = {
    cls.name: cls
    for cls in (
        TelegramFake,
        WhatsAppFake,
        DiscordFake,
        SlackFake,
        SignalFake,
        BlueBubblesFake,
        TeamsFake,
        MattermostFake,
        GitHubFake,
        GitLabFake,
    )
}


def start(name: str, **kwargs: Any) -> FakeServer:
    """Start the fake of the channel `name` (canonical id); stop it with `.stop()`."""
    return FAKES[name](**kwargs).start()


@contextlib.contextmanager
def running(name: str, **kwargs: Any) -> Iterator[FakeServer]:
    """The fake of channel `name`, running for the duration of the block."""
    server = start(name, **kwargs)
    try:
        yield server
    finally:
        server.stop()


__all__ = [
    "FAKES",
    "BlueBubblesFake",
    "DiscordFake",
    "FakeServer",
    "MattermostFake",
    "Recorded",
    "Reply",
    "SignalFake",
    "SlackFake",
    "TeamsFake",
    "TelegramFake",
    "WhatsAppFake",
    "running",
    "start",
    "telegram_visible_text",
]
