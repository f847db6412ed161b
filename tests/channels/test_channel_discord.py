"""Discord adapter against the REST v10 fake: exact request, DMs, rate-limit body, form errors."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from hookwise.server.channels import DeliveryError, load_channels
from tests.fakes.channel_servers import Reply


def discord(server):
    return load_channels({"discord": server.config()})["discord"]


def test_send_posts_the_markdown_unchanged_with_mentions_disabled(channel_server, deliver):
    server = channel_server("discord")
    text = "**Build** failed @everyone, see `log`"
    result = deliver(discord(server), "channel:123456789012345678", text)
    (req,) = server.requests
    assert req.method == "POST"
    assert req.path == "/api/v10/channels/123456789012345678/messages"
    assert req.headers["authorization"] == f"Bot {server.token}"
    assert req.headers["user-agent"].startswith("DiscordBot (")
    assert req.json == {"content": text, "allowed_mentions": {"parse": []}}
    assert result.message_ids == ("1200000000000000001",)


def test_a_bare_snowflake_is_a_channel(channel_server, deliver):
    server = channel_server("discord")
    deliver(discord(server), "123456789012345678", "hi")
    assert server.requests[0].path == "/api/v10/channels/123456789012345678/messages"


def test_a_user_gets_a_dm_channel_opened_once(channel_server):
    server = channel_server("discord")
    channel = discord(server)

    async def go():
        async with httpx.AsyncClient() as client:
            await channel.send(client, "user:223456789012345678", "one")
            await channel.send(client, "user:223456789012345678", "two")

    asyncio.run(go())
    opened, first, second = server.requests
    assert opened.path == "/api/v10/users/@me/channels"
    assert opened.json == {"recipient_id": "223456789012345678"}
    dm = server.dm_channels["223456789012345678"]
    assert first.path == second.path == f"/api/v10/channels/{dm}/messages"
    assert [first.json["content"], second.json["content"]] == ["one", "two"]


def test_rate_limit_uses_the_precise_retry_after_of_the_body(channel_server, deliver):
    server = channel_server("discord")
    server.rate_limit(retry_after=0.75)  # the header says 1, rounded up
    with pytest.raises(DeliveryError) as caught:
        deliver(discord(server), "123456789012345678", "hi")
    assert caught.value.retry_after == 0.75
    assert caught.value.message == "discord answered 429: You are being rate limited."


def test_an_invalid_form_body_names_the_field(channel_server, deliver):
    server = channel_server("discord")
    errors = {
        "content": {"_errors": [{"code": "X", "message": "Must be 2000 or fewer in length."}]}
    }
    server.script(Reply(400, {"message": "Invalid Form Body", "code": 50035, "errors": errors}))
    with pytest.raises(DeliveryError) as caught:
        deliver(discord(server), "123456789012345678", "hi")
    assert caught.value.message == (
        "discord answered 400: Invalid Form Body (content: Must be 2000 or fewer in length.)"
    )
    assert caught.value.retryable is False


def test_an_unknown_user_for_a_dm_is_permanent(channel_server, deliver):
    server = channel_server("discord")
    server.missing.add("223456789012345678")
    with pytest.raises(DeliveryError) as caught:
        deliver(discord(server), "user:223456789012345678", "hi")
    assert caught.value.message == "discord answered 400: Invalid Recipient(s)"
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "to, ok",
    [("channel:123456789012345678", True), ("user:123456789012345678", True),
     ("123456789012345678", True), ("#general", False), ("channel:abc", False),
     ("role:123456789012345678", False), ("0123456789012345678", False),
     ("18446744073709551615", True), ("18446744073709551616", False),
     ("123456789012345678901", False)],
)  # fmt: skip
def test_recipient_forms(to, ok, channel_server):
    assert (discord(channel_server("discord")).validate_recipient(to) is None) is ok
