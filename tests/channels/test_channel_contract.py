"""Behaviour every channel shares, table-driven over all ten against their loopback fakes.

Per channel: a valid recipient, how the fake names it, the credential key to spoil, and the
API's own text for a missing recipient and for a bad credential.
"""

from __future__ import annotations

import asyncio

import attrs
import httpx
import pytest

from hookwise.server.channels import DeliveryError, load_channels


@attrs.frozen
class Case:
    channel: str
    to: str
    fake_recipient: str  # how the fake sees `to`, for `hookwise.server.missing`
    credential: str  # config key holding the secret
    missing_text: str
    missing_status: int
    bad_credential_text: str
    bad_credential_status: int
    rate_limit_retry_after: float | None  # what the channel reports for the fake's 429(retry=2)


CASES = [
    Case(
        "telegram", "-1001234567890", "-1001234567890", "botToken",
        "Bad Request: chat not found", 400, "Unauthorized", 401, 2.0,
    ),
    Case(
        "whatsapp", "+15551234567", "15551234567", "accessToken",
        "(#131030) Recipient phone number not in allowed list", 400,
        "Invalid OAuth access token - Cannot parse access token", 401, None,
    ),
    Case(
        "discord", "channel:123456789012345678", "123456789012345678", "token",
        "Unknown Channel", 404, "401: Unauthorized", 401, 2.0,
    ),
    Case(
        "slack", "channel:C0123456789", "C0123456789", "botToken",
        "channel_not_found", 200, "invalid_auth", 200, 2.0,
    ),
    Case(
        "signal", "+15551234567", "+15551234567", "account",
        'Failed to send message: Unregistered user "+15551234567"', 400,
        "User +15559999999 is not registered.", 400, None,  # its 429 has no Retry-After
    ),
    Case(
        "imessage", "+15551234567", "iMessage;-;+15551234567", "password",
        "Chat does not exist!", 400, "Unauthorized", 401, None,  # 504, no rate limit
    ),
    Case(
        "msteams", "19:abc123@thread.tacv2", "19:abc123@thread.tacv2", "appPassword",
        "ConversationNotFound Conversation not found.", 404,
        "invalid_client: AADSTS7000215: Invalid client secret provided.", 401, 2.0,
    ),
    Case(
        "mattermost", "channel:4xp9fdt77pncbef59f4k1qe83o", "4xp9fdt77pncbef59f4k1qe83o",
        "botToken", "You do not have the appropriate permissions.", 403,
        "Invalid or expired session, please login again.", 401, 2.0,
    ),
    Case(
        "github", "acme/gateway#42", "acme/gateway#42", "token",
        "Not Found", 404, "Bad credentials", 401, 2.0,
    ),
    Case(
        "gitlab", "acme/gateway!7", "acme/gateway!7", "token",
        "404 Not found", 404, "401 Unauthorized", 401, 2.0,
    ),
]  # fmt: skip

ids = [c.channel for c in CASES]


def channel_for(server, **override):
    config = server.config() | override
    return load_channels({server.name: config})[server.name]


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_a_short_message_is_one_request_and_returns_its_message_id(case, channel_server, deliver):
    server = channel_server(case.channel)
    result = deliver(channel_for(server), case.to, "Build 42 passed.")
    assert len(server.sends) == 1
    assert len(result.message_ids) == 1 and result.message_ids[0]


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_a_long_message_is_split_into_several_sends_in_order(case, channel_server, deliver):
    server = channel_server(case.channel)
    channel = channel_for(server)
    paragraph_len = channel.max_chars * 6 // 10
    paragraphs = [f"part{i} " + "x" * (paragraph_len - 6) for i in range(3)]
    result = deliver(channel, case.to, "\n\n".join(paragraphs))
    assert len(server.sends) == 3
    assert len(result.message_ids) == 3 and len(set(result.message_ids)) == 3
    bodies = [r.body.decode() for r in server.sends]
    for i, body in enumerate(bodies):
        assert f"part{i} " in body
        assert f"part{i + 1} " not in body


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_rate_limit_is_retryable_with_retry_after(case, channel_server, deliver):
    server = channel_server(case.channel)
    server.rate_limit(times=1, retry_after=2)
    with pytest.raises(DeliveryError) as caught:
        deliver(channel_for(server), case.to, "hello")
    assert caught.value.retryable is True
    assert caught.value.status == (504 if case.channel == "imessage" else 429)
    assert caught.value.retry_after == case.rate_limit_retry_after
    # the limit passes: the next attempt is delivered
    assert len(deliver(channel_for(server), case.to, "hello").message_ids) == 1


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_server_error_is_retryable(case, channel_server, deliver):
    server = channel_server(case.channel)
    server.fail(times=1)
    with pytest.raises(DeliveryError) as caught:
        deliver(channel_for(server), case.to, "hello")
    assert caught.value.retryable is True
    assert caught.value.status is not None and caught.value.status >= 500
    assert caught.value.retry_after is None


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_unknown_recipient_is_permanent_with_the_api_text(case, channel_server, deliver):
    server = channel_server(case.channel)
    server.missing.add(case.fake_recipient)
    with pytest.raises(DeliveryError) as caught:
        deliver(channel_for(server), case.to, "hello")
    error = caught.value
    assert error.retryable is False
    assert error.status == case.missing_status
    assert error.message == f"{case.channel} answered {case.missing_status}: {case.missing_text}"


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_a_wrong_credential_is_permanent_and_never_quoted(case, channel_server, deliver):
    server = channel_server(case.channel)
    wrong = "+15559999999" if case.credential == "account" else "wrong-secret-value-123"
    with pytest.raises(DeliveryError) as caught:
        deliver(channel_for(server, **{case.credential: wrong}), case.to, "hello")
    error = caught.value
    assert error.retryable is False
    assert error.status == case.bad_credential_status
    assert case.bad_credential_text in error.message
    if case.credential != "account":
        assert wrong not in error.message
        assert server.config()[case.credential] not in error.message


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_an_unreachable_api_is_retryable_and_the_message_holds_no_secret(case, channel_server):
    server = channel_server(case.channel)
    channel = channel_for(server)
    secret = server.config()[case.credential]
    server.stop()  # nothing listens on the port any more

    async def go():
        async with httpx.AsyncClient(timeout=5) as client:
            return await channel.send(client, case.to, "hello")

    with pytest.raises(DeliveryError) as caught:
        asyncio.run(go())
    assert caught.value.retryable is True
    assert caught.value.status is None
    assert secret not in caught.value.message
    assert caught.value.message.startswith(f"{case.channel}: could not reach the API")


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_a_failure_part_way_reports_the_parts_sent_and_a_retry_resumes(
    case, channel_server, deliver
):
    server = channel_server(case.channel)
    channel = channel_for(server)
    text = "\n\n".join(f"part{i} " + "y" * (channel.max_chars * 6 // 10) for i in range(3))
    server.script(server.server_error_reply(), when=lambda r: len(server.sends) == 2)
    with pytest.raises(DeliveryError) as caught:
        deliver(channel, case.to, text)
    assert len(caught.value.sent_ids) == 1
    resumed = deliver(channel, case.to, text, skip_parts=len(caught.value.sent_ids))
    assert len(resumed.message_ids) == 2
    delivered = [r.body.decode() for r in server.sends]
    assert ["part0 " in delivered[0], "part1 " in delivered[1]] == [True, True]  # 1st, failed
    assert "part1 " in delivered[2] and "part2 " in delivered[3]


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_an_invalid_recipient_is_refused_without_a_request(case, channel_server, deliver):
    server = channel_server(case.channel)
    channel = channel_for(server)
    assert channel.validate_recipient(case.to) is None
    problem = channel.validate_recipient("not a recipient!")
    assert problem and "recipient" in problem
    with pytest.raises(DeliveryError) as caught:
        deliver(channel, "not a recipient!", "hello")
    assert caught.value.retryable is False
    assert problem in caught.value.message
    assert server.requests == []


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_an_empty_message_is_refused_without_a_request(case, channel_server, deliver):
    server = channel_server(case.channel)
    with pytest.raises(DeliveryError) as caught:
        deliver(channel_for(server), case.to, " \n\n ")
    assert caught.value.retryable is False
    assert server.requests == []
