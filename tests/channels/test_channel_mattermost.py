"""Mattermost plugin against the REST v4 fake: exact request, limiter headers."""

from __future__ import annotations

import pytest

from hookwise.server.channels import DeliveryError, load_channels
from tests.fakes.channel_servers import Reply


def mattermost(server):
    return load_channels({"mattermost": server.config()})["mattermost"]


def test_send_posts_markdown_to_api_v4_posts(channel_server, deliver):
    server = channel_server("mattermost")
    text = "### Build\n**green** :tada:"
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
        ("user:4xp9fdt77pncbef59f4k1qe83o", False),
    ],
)
def test_recipient_forms(to, ok, channel_server):
    assert (mattermost(channel_server("mattermost")).validate_recipient(to) is None) is ok
