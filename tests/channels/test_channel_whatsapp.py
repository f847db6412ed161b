"""WhatsApp adapter against the Cloud API fake: exact request, formatting, throttling codes."""

from __future__ import annotations

import pytest

from hookwise.engine.errors import ConfigError
from hookwise.server.channels import DeliveryError, load_channels
from tests.fakes.channel_servers import Reply


def whatsapp(server):
    return load_channels({"whatsapp": server.config()})["whatsapp"]


def test_send_posts_a_text_message_to_the_phone_number_id(channel_server, deliver):
    server = channel_server("whatsapp")
    result = deliver(whatsapp(server), "+15551234567", "Deploy **done**: [log](https://x.io/l)")
    (req,) = server.requests
    assert req.method == "POST"
    assert req.path == "/v23.0/106540352242922/messages"  # the default: a current version
    assert req.headers["authorization"] == f"Bearer {server.access_token}"
    assert req.json == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": "15551234567",
        "type": "text",
        "text": {"preview_url": False, "body": "Deploy *done*: log (https://x.io/l)"},
    }
    assert result.message_ids == ("wamid.HBgL15551234567FQIAERgS00000000000000000001",)


def test_the_api_version_is_configurable(channel_server, deliver):
    server = channel_server("whatsapp", version="v24.0", pinned_version=True)
    deliver(whatsapp(server), "+15551234567", "hi")
    assert server.requests[0].path == "/v24.0/106540352242922/messages"


@pytest.mark.parametrize(
    "key, value", [("apiVersion", "23.0"), ("apiVersion", "v23"), ("phoneNumberId", "abc")]
)
def test_a_malformed_api_version_or_phone_number_id_is_a_config_error(key, value):
    config = {"accessToken": "t", "phoneNumberId": "106540352242922", key: value}
    with pytest.raises(ConfigError) as caught:
        load_channels({"whatsapp": config})
    assert caught.value.issues[0].path == f"channels.whatsapp.{key}"


def test_a_throttling_code_is_retryable_even_with_status_400(channel_server, deliver):
    server = channel_server("whatsapp")
    body = {"error": {"message": "(#131056) Pair rate limit hit", "code": 131056}}
    server.script(Reply(400, body))
    with pytest.raises(DeliveryError) as caught:
        deliver(whatsapp(server), "+15551234567", "hi")
    assert caught.value.retryable is True
    assert caught.value.message == "whatsapp answered 400: (#131056) Pair rate limit hit"


def test_an_invalid_parameter_is_permanent(channel_server, deliver):
    server = channel_server("whatsapp", phone_number_id="999")
    channel = load_channels({"whatsapp": server.config() | {"phoneNumberId": "123"}})["whatsapp"]
    with pytest.raises(DeliveryError) as caught:
        deliver(channel, "+15551234567", "hi")
    assert caught.value.retryable is False
    assert "Object with ID '123' does not exist" in caught.value.message


@pytest.mark.parametrize(
    "to, ok",
    [("+15551234567", True), ("15551234567", True), ("+4915112345678", True),
     ("+0551234567", False), ("555-1234", False), ("+1555", False), ("user@example.com", False)],
)  # fmt: skip
def test_recipient_forms(to, ok, channel_server):
    assert (whatsapp(channel_server("whatsapp")).validate_recipient(to) is None) is ok
