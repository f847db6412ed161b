"""Teams adapter against the Entra token + Bot Framework connector fake: tokens and activities."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from hookwise.engine.errors import ConfigError
from hookwise.server.channels import DeliveryError, load_channels
from hookwise.server.channels.msteams import MSTeamsChannel, MSTeamsConfig
from tests.fakes.channel_servers import TeamsFake


def teams(server):
    return load_channels({"msteams": server.config()})["msteams"]


def send_all(channel, *sends):
    async def go():
        async with httpx.AsyncClient() as client:
            return [await channel.send(client, to, text) for to, text in sends]

    return asyncio.run(go())


def test_send_gets_a_token_then_posts_a_markdown_activity(channel_server, deliver):
    server = channel_server("msteams")
    result = deliver(teams(server), "19:abc123@thread.tacv2", "**Incident** resolved")
    token_req, activity = server.requests
    assert token_req.method == "POST"
    assert token_req.path == f"/{server.tenant_id}/oauth2/v2.0/token"
    assert token_req.form == {
        "grant_type": "client_credentials",
        "client_id": server.app_id,
        "client_secret": server.app_password,
        "scope": "https://api.botframework.com/.default",
    }
    assert activity.method == "POST"
    assert activity.raw_path == "/v3/conversations/19%3Aabc123%40thread.tacv2/activities"
    assert activity.headers["authorization"] == f"Bearer {server.issued[0]}"
    assert activity.json == {
        "type": "message",
        "text": "**Incident** resolved",
        "textFormat": "markdown",
    }
    assert result.message_ids == ("1:2",)


def test_the_token_is_reused_until_it_expires(channel_server):
    server = channel_server("msteams", token_lifetime=3600)
    now = [1000.0]
    channel = MSTeamsChannel(teams(server).config, clock=lambda: now[0])
    send_all(channel, ("19:a@thread.tacv2", "one"), ("19:a@thread.tacv2", "two"))
    assert len(server.issued) == 1
    now[0] += 3600 - 61  # still more than a minute left
    send_all(channel, ("19:a@thread.tacv2", "three"))
    assert len(server.issued) == 1
    now[0] += 2  # within the last minute: fetch a fresh one
    send_all(channel, ("19:a@thread.tacv2", "four"))
    assert len(server.issued) == 2
    assert server.sends[-1].headers["authorization"] == f"Bearer {server.issued[1]}"


def test_a_401_from_the_connector_fetches_a_new_token_once(channel_server):
    server = channel_server("msteams")
    channel = teams(server)
    send_all(channel, ("19:a@thread.tacv2", "one"))
    server.revoke_tokens()
    (result,) = send_all(channel, ("19:a@thread.tacv2", "two"))
    assert len(server.issued) == 2
    assert [r.headers["authorization"] for r in server.sends[1:]] == [
        f"Bearer {server.issued[0]}",
        f"Bearer {server.issued[1]}",
    ]
    assert len(result.message_ids) == 1


def test_a_token_endpoint_outage_is_retryable(channel_server, deliver):
    server = channel_server("msteams")
    server.script(server.server_error_reply(), when=server.is_token)
    with pytest.raises(DeliveryError) as caught:
        deliver(teams(server), "19:a@thread.tacv2", "hi")
    assert caught.value.retryable is True
    assert caught.value.message.startswith(
        "msteams: getting a bot token failed: msteams answered 502"
    )
    assert server.sends == []


def test_a_conversation_id_with_a_reply_thread_is_encoded(channel_server, deliver):
    server = channel_server("msteams")
    deliver(teams(server), "conversation:19:abc@thread.skype;messageid=1700", "hi")
    assert server.sends[0].path == "/v3/conversations/19:abc@thread.skype;messageid=1700/activities"
    assert "%3B" in server.sends[0].raw_path


def test_auth_url_defaults_to_the_tenant_token_endpoint():
    config = MSTeamsConfig(app_id="a", app_password="p", tenant_id="contoso.onmicrosoft.com")
    assert config.token_url == (
        "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token"
    )
    assert config.connector_url == "https://smba.trafficmanager.net/teams"


def test_base_url_is_accepted_as_the_service_url(channel_server, deliver):
    server = channel_server("msteams")
    config = server.config()
    config["baseUrl"] = config.pop("serviceUrl")
    deliver(load_channels({"teams": config})["msteams"], "19:a@thread.tacv2", "hi")
    assert len(server.sends) == 1


@pytest.mark.parametrize(
    "to, ok",
    [("19:abc123@thread.tacv2", True), ("a:1xYz-AbC", True), ("conversation:19:x@thread.v2", True),
     ("19:abc 123", False), ("", False), ("a/b", False)],
)  # fmt: skip
def test_recipient_forms(to, ok):
    server = TeamsFake()
    channel = MSTeamsChannel(MSTeamsConfig(server.app_id, server.app_password, server.tenant_id))
    assert (channel.validate_recipient(to) is None) is ok


def test_concurrent_sends_share_one_token_refresh(channel_server):
    server = channel_server("msteams")
    channel = teams(server)

    async def go():
        async with httpx.AsyncClient() as client:
            sends = [channel.send(client, f"19:c{i}@thread.tacv2", f"m{i}") for i in range(6)]
            return await asyncio.gather(*sends)

    results = asyncio.run(go())
    assert len(results) == 6
    assert len(server.issued) == 1
    assert len([r for r in server.requests if server.is_token(r)]) == 1
    assert {r.headers["authorization"] for r in server.sends} == {f"Bearer {server.issued[0]}"}


def test_a_conversation_uses_its_own_configured_service_url(channel_server, deliver):
    server = channel_server("msteams")
    server.regions["19:emea@thread.tacv2"] = "emea"
    config = server.config() | {
        "conversations": {"19:emea@thread.tacv2": server.service_url("emea") + "/"}
    }
    channel = load_channels({"msteams": config})["msteams"]
    deliver(channel, "19:emea@thread.tacv2", "to Europe")
    deliver(channel, "19:home@thread.tacv2", "to the default")
    emea, home = server.sends
    assert emea.raw_path == "/emea/v3/conversations/19%3Aemea%40thread.tacv2/activities"
    assert home.raw_path == "/v3/conversations/19%3Ahome%40thread.tacv2/activities"


def test_without_its_service_url_a_regional_conversation_is_not_found(channel_server, deliver):
    server = channel_server("msteams")
    server.regions["19:emea@thread.tacv2"] = "emea"
    with pytest.raises(DeliveryError) as caught:
        deliver(teams(server), "19:emea@thread.tacv2", "lost")
    assert caught.value.status == 404


@pytest.mark.parametrize(
    "conversations, problem",
    [
        ({"19:a@thread.tacv2": "ftp://x"}, "must be an absolute http:// or https:// URL"),
        ({"bad id/x": "https://smba.trafficmanager.net/emea"}, "is not a conversation id"),
    ],
)
def test_configured_service_urls_are_checked(conversations, problem):
    config = {"appId": "a", "appPassword": "p", "tenantId": "t", "conversations": conversations}
    with pytest.raises(ConfigError) as caught:
        load_channels({"msteams": config})
    (issue,) = caught.value.issues
    assert issue.path.startswith("channels.msteams.conversations.")
    assert issue.message == problem
