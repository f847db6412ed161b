"""Signal adapter against the signal-cli REST API fake: exact request, groups, plain text."""

from __future__ import annotations

import pytest

from hookwise.server.channels import load_channels


def signal(server):
    return load_channels({"signal": server.config()})["signal"]


def test_send_posts_plain_text_from_the_account_to_v2_send(channel_server, deliver):
    server = channel_server("signal")
    result = deliver(
        signal(server), "+15551234567", "**Alarm**: disk at 91% ([graph](https://g.io))"
    )
    (req,) = server.requests
    assert req.method == "POST"
    assert req.path == "/v2/send"
    assert req.json == {
        "message": "Alarm: disk at 91% (graph (https://g.io))",
        "number": "+15550001111",
        "recipients": ["+15551234567"],
    }
    assert result.message_ids == ("1700000000001",)


def test_a_group_id_is_a_recipient(channel_server, deliver):
    server = channel_server("signal")
    group = "group.dGVzdGdyb3VwaWQxMjM0NTY3ODkwMTIzNDU2Nzg5MA=="
    deliver(signal(server), group, "hi")
    assert server.requests[0].json["recipients"] == [group]


@pytest.mark.parametrize(
    "to, ok",
    [("+15551234567", True), ("group.dGVzdGdyb3Vw", True), ("15551234567", False),
     ("group.", False), ("user:bob", False)],
)  # fmt: skip
def test_recipient_forms(to, ok, channel_server):
    assert (signal(channel_server("signal")).validate_recipient(to) is None) is ok
