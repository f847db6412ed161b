"""Signal adapter against the signal-cli REST API fake: exact request, groups, styled and plain text."""

from __future__ import annotations

import pytest

from hookwise.server.channels import DeliveryError, load_channels
from tests.fakes.channel_servers import Reply


def signal(server):
    return load_channels({"signal": server.config()})["signal"]


def test_send_posts_styled_text_from_the_account_to_v2_send(channel_server, deliver):
    server = channel_server("signal")
    result = deliver(
        signal(server), "+15551234567", "**Alarm**: disk at 91% ([graph](https://g.io))"
    )
    (req,) = server.requests
    assert req.method == "POST"
    assert req.path == "/v2/send"
    assert req.json == {
        "message": "**Alarm**: disk at 91% (graph (https://g.io))",
        "number": "+15550001111",
        "recipients": ["+15551234567"],
        "text_mode": "styled",
    }
    # what Signal shows: the text without the markup, "Alarm" in bold
    assert server.shown == [("Alarm: disk at 91% (graph (https://g.io))", ["0:5:BOLD"])]
    assert result.message_ids == ("1700000000001",)


def test_each_style_reaches_signal_and_styles_never_nest(channel_server, deliver):
    server = channel_server("signal")
    text = "# Report\n\n*all* ~~old~~ `df -h` and *a **b** c*\n\n```\nok\n```"
    deliver(signal(server), "+15551234567", text)
    [(shown, styles)] = server.shown
    assert shown == "Report\n\nall old df -h and a b c\n\nok"
    assert styles == [
        "0:6:BOLD",
        "8:3:ITALIC",
        "12:3:STRIKETHROUGH",
        "16:5:MONOSPACE",
        "28:1:BOLD",  # inside the italic span: only the inner style is kept
        "33:2:MONOSPACE",
    ]


@pytest.mark.parametrize(
    "text, plain",
    [
        ("**Price**: 2 * 3", "Price: 2 * 3"),
        ("a | b", "a | b"),
        ("see ~bob/notes", "see ~bob/notes"),
        ("| a | b |\n|---|---|\n| 1 | 2 |", "a | b\n--+--\n1 | 2"),
    ],
)
def test_a_literal_markup_character_sends_plain_text_so_nothing_vanishes(
    text, plain, channel_server, deliver
):
    """The styled mode takes every `*`, `|`, `~` and backtick for markup and drops it: a text that
    holds one literally goes in the normal mode, markdown markup removed."""
    server = channel_server("signal")
    deliver(signal(server), "+15551234567", text)
    (req,) = server.requests
    assert "text_mode" not in req.json
    assert server.shown == [(plain, [])]


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


def test_a_transient_400_is_retried_and_a_permanent_one_is_not(channel_server, deliver):
    server = channel_server("signal")
    server.transient_failure()
    with pytest.raises(DeliveryError) as caught:
        deliver(signal(server), "+15551234567", "hi")
    assert caught.value.status == 400
    assert caught.value.retryable is True
    assert "timed out" in caught.value.message
    server.missing.add("+15551234567")
    with pytest.raises(DeliveryError) as caught:
        deliver(signal(server), "+15551234567", "hi")
    assert caught.value.retryable is False
    assert 'Unregistered user "+15551234567"' in caught.value.message


@pytest.mark.parametrize(
    "text, retryable",
    [
        ("Failed to send message: java.net.SocketTimeoutException: timeout", True),
        ("Failed to send message: Connection reset by peer", True),
        ("Failed to send message: [502] Bad response: 502 Bad Gateway", True),
        ('Failed to send message: Untrusted Identity for "+15551234567"', False),
        ("Failed to send message: Invalid group id", False),
        ("Failed to send message: Proof required (captcha)", False),
        ("something nobody has seen before", False),
    ],
)
def test_400s_are_classified_by_signal_clis_error_text(text, retryable, channel_server, deliver):
    server = channel_server("signal")
    server.script(Reply(400, {"error": text, "account": server.account}))
    with pytest.raises(DeliveryError) as caught:
        deliver(signal(server), "+15551234567", "hi")
    assert caught.value.retryable is retryable


def test_a_429_without_retry_after_is_retryable_and_leaves_the_wait_to_the_backoff(
    channel_server, deliver
):
    server = channel_server("signal")
    server.rate_limit()
    with pytest.raises(DeliveryError) as caught:
        deliver(signal(server), "+15551234567", "hi")
    assert (caught.value.status, caught.value.retryable, caught.value.retry_after) == (
        429,
        True,
        None,
    )


def test_the_development_lines_201_with_an_array_is_a_success(channel_server, deliver):
    server = channel_server("signal", answer_form="array")
    result = deliver(signal(server), "+15551234567", "hi")
    assert result.message_ids == ("1700000000001",)
    assert len(server.sends) == 1
