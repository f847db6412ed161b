"""iMessage adapter against the BlueBubbles fake: exact request, chat guids, temp guids."""

from __future__ import annotations

import uuid

import pytest

from hookwise.server.channels import load_channels
from tests.fakes.channel_servers import Reply


def imessage(server, **extra):
    return load_channels({"imessage": server.config() | extra})["imessage"]


def test_send_posts_plain_text_to_the_direct_chat_of_a_phone_number(channel_server, deliver):
    server = channel_server("imessage")
    result = deliver(imessage(server), "+15551234567", "Your **package** has shipped")
    (req,) = server.requests
    assert req.method == "POST"
    assert req.path == "/api/v1/message/text"
    assert req.query == {"password": server.password}
    body = req.json
    temp_guid = body.pop("tempGuid")
    assert uuid.UUID(temp_guid).version == 4
    assert body == {"chatGuid": "iMessage;-;+15551234567", "message": "Your package has shipped"}
    assert result.message_ids == ("FAKE-00000001-0000-0000-0000-000000000000",)


def test_each_part_gets_its_own_temp_guid(channel_server, deliver):
    server = channel_server("imessage")
    deliver(imessage(server), "+15551234567", "a" * 3000 + "\n\n" + "b" * 3000)
    guids = [r.json["tempGuid"] for r in server.requests]
    assert len(guids) == 2 and len(set(guids)) == 2


@pytest.mark.parametrize(
    "to, chat_guid",
    [
        ("friend@example.com", "iMessage;-;friend@example.com"),
        ("iMessage;+;chat123456789", "iMessage;+;chat123456789"),
        ("SMS;-;+15551234567", "SMS;-;+15551234567"),
    ],
)
def test_handles_and_chat_guids(to, chat_guid, channel_server, deliver):
    server = channel_server("imessage")
    deliver(imessage(server), to, "hi")
    assert server.requests[0].json["chatGuid"] == chat_guid


def test_the_configured_send_method_is_passed(channel_server, deliver):
    server = channel_server("imessage")
    deliver(imessage(server, method="private-api"), "+15551234567", "hi")
    assert server.requests[0].json["method"] == "private-api"


def test_a_success_without_the_sent_message_uses_the_temp_guid(channel_server, deliver):
    server = channel_server("imessage")
    server.script(Reply(200, {"status": 200, "message": "Message sent!"}))
    result = deliver(imessage(server), "+15551234567", "hi")
    assert result.message_ids == (server.requests[0].json["tempGuid"],)


@pytest.mark.parametrize(
    "to, ok",
    [("+15551234567", True), ("a.b@example.co.uk", True), ("iMessage;-;+15551234567", True),
     ("15551234567", False), ("not an address", False), ("Telegram;-;x", False)],
)  # fmt: skip
def test_recipient_forms(to, ok, channel_server):
    assert (imessage(channel_server("imessage")).validate_recipient(to) is None) is ok
