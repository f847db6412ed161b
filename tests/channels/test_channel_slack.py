"""Slack adapter against the Web API fake: exact request, mrkdwn, DMs, `ok: false` errors."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from hookwise.server.channels import DeliveryError, load_channels
from tests.fakes.channel_servers import Reply


def slack(server):
    return load_channels({"slack": server.config()})["slack"]


def test_send_posts_mrkdwn_to_chat_post_message(channel_server, deliver):
    server = channel_server("slack")
    text = "**Deploy** of <api> done & [logs](https://ci.example.com/r?a=1&b=2)\n- one\n- two"
    result = deliver(slack(server), "channel:C0123456789", text)
    (req,) = server.requests
    assert req.method == "POST"
    assert req.path == "/api/chat.postMessage"
    assert req.headers["authorization"] == f"Bearer {server.bot_token}"
    assert req.headers["content-type"] == "application/json; charset=utf-8"
    assert req.json == {
        "channel": "C0123456789",
        "text": "*Deploy* of &lt;api&gt; done &amp; <https://ci.example.com/r?a=1&amp;b=2|logs>\n"
        "• one\n• two",
        "mrkdwn": True,
    }
    assert result.message_ids == ("1700000000.000001",)


def test_a_user_gets_a_dm_opened_with_conversations_open_once(channel_server):
    server = channel_server("slack")
    channel = slack(server)

    async def go():
        async with httpx.AsyncClient() as client:
            await channel.send(client, "user:U0123ABCDEF", "one")
            await channel.send(client, "U0123ABCDEF", "two")  # a bare user id is a user too

    asyncio.run(go())
    opened, first, second = server.requests
    assert opened.path == "/api/conversations.open"
    assert opened.json == {"users": "U0123ABCDEF"}
    assert first.json["channel"] == second.json["channel"] == "D0123ABCDEF"


def test_a_transient_slack_error_in_a_200_is_retryable(channel_server, deliver):
    server = channel_server("slack")
    server.script(Reply(200, {"ok": False, "error": "internal_error"}))
    with pytest.raises(DeliveryError) as caught:
        deliver(slack(server), "C0123456789", "hi")
    assert caught.value.retryable is True
    assert caught.value.message == "slack answered 200: internal_error"


def test_a_missing_token_is_not_authed(channel_server, deliver):
    server = channel_server("slack")
    server.script(Reply(200, {"ok": False, "error": "not_authed"}))
    with pytest.raises(DeliveryError) as caught:
        deliver(slack(server), "C0123456789", "hi")
    assert caught.value.retryable is False
    assert caught.value.message.endswith("not_authed")


@pytest.mark.parametrize(
    "to, ok",
    [("channel:C0123456789", True), ("C0123456789", True), ("G0123456789", True),
     ("D0123456789", True), ("user:U0123ABCDEF", True), ("W0123ABCDEF", True),
     ("#general", True), ("channel:#ops-alerts", True), ("#General", False), ("#", False),
     ("channel:c0123456789", False), ("user:", False), ("X0123456789", False),
     ("channel:U0123ABCDEF", False), ("user:C0123456789", False), ("C012", False),
     ("C" + "0" * 40, False)],
)  # fmt: skip
def test_recipient_forms(to, ok, channel_server):
    assert (slack(channel_server("slack")).validate_recipient(to) is None) is ok


def test_a_channel_name_is_sent_as_is(channel_server, deliver):
    server = channel_server("slack")
    result = deliver(slack(server), "#general", "hi")
    (req,) = server.requests
    assert req.json["channel"] == "#general"
    assert result.message_ids == ("1700000000.000001",)


def test_parts_are_at_most_4000_characters_after_escaping(channel_server, deliver):
    server = channel_server("slack")
    text = " ".join(["a<b>&c"] * 1500)  # 10,499 characters; escaping nearly triples them
    deliver(slack(server), "C0123456789", text)
    sent = [r.json["text"] for r in server.sends]
    assert len(sent) > 3
    assert all(len(t) <= 4000 for t in sent)
    assert " ".join(sent).split() == ["a&lt;b&gt;&amp;c"] * 1500
