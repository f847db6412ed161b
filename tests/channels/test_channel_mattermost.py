"""Mattermost plugin against the REST v4 fake: exact request, limiter headers."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from hookwise.server.channels import DeliveryError, load_channels
from tests.fakes.channel_servers import Reply


def mattermost(server):
    return load_channels({"mattermost": server.config()})["mattermost"]


def test_send_posts_markdown_to_api_v4_posts(channel_server, deliver):
    server = channel_server("mattermost")
    text = "### Build\n\n**green** :tada:\n\n| a | b |\n|---|---|\n| 1 | 2 |"
    result = deliver(mattermost(server), "channel:4xp9fdt77pncbef59f4k1qe83o", text)
    (req,) = server.requests
    assert req.method == "POST"
    assert req.path == "/api/v4/posts"
    assert req.headers["authorization"] == f"Bearer {server.bot_token}"
    assert req.json == {"channel_id": "4xp9fdt77pncbef59f4k1qe83o", "message": text}
    assert result.message_ids == ("00000000000000000000000001",)


def test_a_limiter_answer_without_retry_after_uses_x_ratelimit_reset(channel_server, deliver):
    server = channel_server("mattermost")
    server.script(Reply(429, "limit exceeded\n", {"X-Ratelimit-Reset": "3"}))
    with pytest.raises(DeliveryError) as caught:
        deliver(mattermost(server), "4xp9fdt77pncbef59f4k1qe83o", "hi")
    assert caught.value.retryable is True
    assert caught.value.retry_after == 3.0
    assert caught.value.message == "mattermost answered 429: limit exceeded"


def test_splits_at_the_mattermost_post_limit(channel_server, deliver):
    server = channel_server("mattermost")
    deliver(mattermost(server), "4xp9fdt77pncbef59f4k1qe83o", ("word " * 4000).strip())
    assert [len(r.json["message"]) for r in server.sends] == [16379, 3619]


@pytest.mark.parametrize(
    "to, ok",
    [
        ("4xp9fdt77pncbef59f4k1qe83o", True),
        ("channel:4xp9fdt77pncbef59f4k1qe83o", True),
        ("town-square", False),
        ("4XP9FDT77PNCBEF59F4K1QE83O", False),
        ("user:4xp9fdt77pncbef59f4k1qe83o", True),
        ("@alice", True),
        ("user:@alice.b", True),
        ("@", False),
        ("user:alice", False),
        ("@Alice", False),
    ],
)
def test_recipient_forms(to, ok, channel_server):
    assert (mattermost(channel_server("mattermost")).validate_recipient(to) is None) is ok


def test_a_user_gets_a_direct_channel_looked_up_once(channel_server):
    server = channel_server("mattermost")
    channel = mattermost(server)

    async def go():
        async with httpx.AsyncClient() as client:
            await channel.send(client, "@alice", "one")
            await channel.send(client, "user:a11ce000000000000000000000", "two")

    asyncio.run(go())
    paths = [(r.method, r.path) for r in server.requests]
    assert paths == [
        ("GET", "/api/v4/users/username/alice"),
        ("GET", "/api/v4/users/me"),
        ("POST", "/api/v4/channels/direct"),
        ("POST", "/api/v4/posts"),
        ("POST", "/api/v4/posts"),
    ]
    assert server.requests[2].json == [server.bot_user_id, "a11ce000000000000000000000"]
    dm = next(iter(server.direct.values()))
    assert [r.json for r in server.sends] == [
        {"channel_id": dm, "message": "one"},
        {"channel_id": dm, "message": "two"},
    ]


def test_an_unknown_username_is_a_permanent_error(channel_server, deliver):
    server = channel_server("mattermost")
    with pytest.raises(DeliveryError) as caught:
        deliver(mattermost(server), "@nobody", "hi")
    assert caught.value.retryable is False
    assert caught.value.message == "mattermost answered 404: Unable to find user."
    assert server.sends == []
