"""The fakes against the services' published descriptions (tests/fakes/api_specs/).

Two things are checked for every fake: each answer it gives (successes, errors, rate limits)
validates against the schema the description gives for that operation and status; and a request
the real service refuses (the description's required fields and types, and the documented rules
beyond it: lengths, nesting, id formats) is refused by the fake too.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from hookwise.server.channels import DeliveryError, load_channels
from tests.fakes.channel_servers import FakeServer, Recorded, Reply
from tests.fakes.specs import check

Schema = tuple[str, str] | None

SLACK_OPS = "#/operations/{op}/operation/responses/{status}/schema"


def _telegram(req: Recorded, reply: Reply) -> list[tuple[str, str, Any]]:
    body = reply.body
    if body.get("ok"):
        return [("telegram", "#/types/Message/json_schema", body["result"])]
    out = [("telegram", "#/types/ResponseParameters/json_schema", body.get("parameters", {}))]
    assert isinstance(body["error_code"], int) and isinstance(body["description"], str)
    return out


def _discord(req: Recorded, reply: Reply) -> list[tuple[str, str, Any]]:
    schemas = "#/components/schemas/"
    if reply.status == 429:
        return [("discord", schemas + "RatelimitedResponse", reply.body)]
    if reply.status >= 400:  # nested field errors: see the test of refused requests
        envelope = {k: v for k, v in reply.body.items() if k != "errors"}
        return [("discord", schemas + "ErrorResponse", envelope)]
    name = "PrivateChannelResponse" if req.path.endswith("/@me/channels") else "MessageResponse"
    return [("discord", schemas + name, reply.body)]


def _slack(req: Recorded, reply: Reply) -> list[tuple[str, str, Any]]:
    if reply.status != 200:  # 429 and 5xx are HTTP statuses the description does not model
        return []
    op = "conversations_open" if req.path.endswith("conversations.open") else "chat_postMessage"
    status = "200" if reply.body.get("ok") else "default"
    return [("slack", SLACK_OPS.format(op=op, status=status), reply.body)]


def _mattermost(req: Recorded, reply: Reply) -> list[tuple[str, str, Any]]:
    if not isinstance(reply.body, dict):  # the limiter's plain-text 429
        return []
    name = "Post" if reply.status == 201 and req.path == "/api/v4/posts" else "AppError"
    if reply.status < 400 and name == "AppError":
        return []  # users and channels: not in the extract
    return [("mattermost", f"#/components/schemas/{name}", reply.body)]


def _signal(req: Recorded, reply: Reply) -> list[tuple[str, str, Any]]:
    d = "#/definitions/"
    if reply.status == 201:
        items = reply.body if isinstance(reply.body, list) else [reply.body]
        return [("signal", d + "api.SendMessageResponse", item) for item in items]
    if reply.status == 400:
        return [("signal", d + "api.SendMessageError", reply.body)]
    return [("signal", d + "api.Error", reply.body)]


def _whatsapp(req: Recorded, reply: Reply) -> list[tuple[str, str, Any]]:
    if reply.status == 200:
        return [("whatsapp", "#/components/schemas/MessageResponsePayload", reply.body)]
    error = reply.body["error"]
    assert isinstance(error["message"], str) and isinstance(error["code"], int)
    return []


def _teams(req: Recorded, reply: Reply) -> list[tuple[str, str, Any]]:
    if req.path.endswith("/token"):
        if reply.status == 200:
            return [("entra_token", "#/token_response_schema", reply.body)]
        assert reply.body["error"] and reply.body["error_description"].startswith("AADSTS")
        return []
    name = "ResourceResponse" if reply.status < 400 else "ErrorResponse"
    return [("botframework", f"#/definitions/{name}", reply.body)]


def _imessage(req: Recorded, reply: Reply) -> list[tuple[str, str, Any]]:
    out = [("bluebubbles", "#/response_schema", reply.body)]
    if reply.status == 200:
        out.append(("bluebubbles", "#/success_data_schema", reply.body["data"]))
    return out


ANSWER_SCHEMAS: dict[str, Callable[[Recorded, Reply], list[tuple[str, str, Any]]]] = {
    "telegram": _telegram,
    "discord": _discord,
    "slack": _slack,
    "mattermost": _mattermost,
    "signal": _signal,
    "whatsapp": _whatsapp,
    "msteams": _teams,
    "imessage": _imessage,
}

TARGETS = {
    "telegram": ("-1001234567890", "-1001234567890"),
    "discord": ("user:123456789012345678", "123456789012345679"),
    "slack": ("user:U0123ABCDEF", "C0123456789"),
    "mattermost": ("@alice", "4xp9fdt77pncbef59f4k1qe83o"),
    "signal": ("+15551234567", "+15551234567"),
    "whatsapp": ("+15551234567", "15551234567"),
    "msteams": ("19:abc123@thread.tacv2", "19:abc123@thread.tacv2"),
    "imessage": ("+15551234567", "iMessage;-;+15551234567"),
}


def _channel(server: FakeServer, **override: Any):
    return load_channels({server.name: server.config() | override})[server.name]


def _attempt(deliver, channel, to: str, text: str) -> None:
    with contextlib.suppress(DeliveryError):
        deliver(channel, to, text)


@pytest.mark.parametrize("name", sorted(ANSWER_SCHEMAS))
def test_every_answer_of_the_fake_matches_the_published_schema(name, channel_server, deliver):
    server = channel_server(name)
    to, missing = TARGETS[name]
    channel = _channel(server)
    long = "\n\n".join(f"**part {i}** " + "x & y " * (channel.max_chars // 10) for i in range(3))
    deliver(channel, to, long)  # successes, split in parts
    server.rate_limit(retry_after=1)
    _attempt(deliver, channel, to, "rate limited")
    server.fail()
    _attempt(deliver, channel, to, "server error")
    server.missing.add(missing)
    other = _channel(server)  # a fresh channel: no remembered DM channel
    _attempt(deliver, other, to, "to a recipient that does not exist")
    server.missing.clear()
    credential = next(k for k in server.config() if k != "baseUrl" and "Url" not in k)
    _attempt(deliver, _channel(server, **{credential: "+15559999999"}), to, "bad credential")

    checked = 0
    for req, reply in server.answers:
        for spec_name, pointer, value in ANSWER_SCHEMAS[name](req, reply):
            check(spec_name, pointer, value)
            checked += 1
    statuses = {reply.status for _, reply in server.answers}
    assert checked >= 3, f"only {checked} answers checked: {statuses}"
    assert any(s >= 400 or s == 200 for s in statuses)


def test_signal_array_answers_match_the_response_schema(channel_server, deliver):
    server = channel_server("signal", answer_form="array")
    result = deliver(_channel(server), "+15551234567", "hi")
    assert result.message_ids == ("1700000000001",)
    ((req, reply),) = server.answers
    assert reply.status == 201 and isinstance(reply.body, list)
    for spec_name, pointer, value in _signal(req, reply):
        check(spec_name, pointer, value)


# --- requests the real services refuse are refused by the fakes ------------------------------


def _post(url: str, body: Any = None, *, content: bytes | None = None, **headers: str):
    kwargs: dict[str, Any] = {"headers": headers}
    if content is not None:
        kwargs["content"] = content
    else:
        kwargs["json"] = body
    return httpx.post(url, timeout=10, **kwargs)


@pytest.mark.parametrize(
    "html, error",
    [
        ('<a href="https://e.com"><code>config.yaml</code></a>', 'Entity "code" can\'t be nested in entity "a"'),
        ('<code><a href="https://e.com">x</a></code>', 'Entity "a" can\'t be nested in entity "code"'),
        ('<blockquote><pre>x</pre></blockquote>', 'Entity "pre" can\'t be nested in entity "blockquote"'),
        ("<b>bold *</b>*", None),
        ("<b><i>both</i></b>", None),
        ('<pre><code class="language-py">x</code></pre>', None),
        ('<code class="language-py">x</code>', "Programming language can't be specified"),
        ("<b>unclosed", "Can't find end tag"),
        ("<h1>x</h1>", 'Unsupported start tag "h1"'),
        ("a &nbsp; b", "Unsupported HTML entity"),
        ("a < b", "Unexpected < character"),
        ("<a>x</a>", "href"),
    ],
)  # fmt: skip
def test_telegram_refuses_what_its_html_rules_forbid(html, error, channel_server):
    server = channel_server("telegram")
    url = f"{server.url}/bot{server.token}/sendMessage"
    answer = _post(url, {"chat_id": 1, "text": html, "parse_mode": "HTML"})
    if error is None:
        assert answer.status_code == 200, answer.text
    else:
        assert answer.status_code == 400
        assert answer.json()["description"].startswith("Bad Request: can't parse entities: ")
        assert error in answer.json()["description"]


def test_telegram_counts_4096_characters_after_entity_parsing(channel_server):
    server = channel_server("telegram")
    url = f"{server.url}/bot{server.token}/sendMessage"
    fits = "<b>" + "&amp;" * 4096 + "</b>"  # 4,096 visible characters in 20,487 of HTML
    assert _post(url, {"chat_id": 1, "text": fits, "parse_mode": "HTML"}).status_code == 200
    over = _post(url, {"chat_id": 1, "text": "x" * 4097})
    assert over.status_code == 400 and over.json()["description"].endswith("too long")
    typed = _post(url, {"chat_id": 1, "text": "x", "message_thread_id": "7"})
    assert typed.status_code == 400 and "message_thread_id" in typed.json()["description"]


def test_discord_refuses_non_snowflakes_and_more_than_2000_characters(channel_server):
    server = channel_server("discord")
    base = f"{server.url}/api/v10"
    auth = {"Authorization": f"Bot {server.token}", "User-Agent": "DiscordBot (x, 1)"}
    bad_id = _post(f"{base}/channels/general/messages", {"content": "x"}, **auth)
    assert bad_id.status_code == 400 and bad_id.json()["code"] == 50035
    long = _post(f"{base}/channels/123/messages", {"content": "x" * 2001}, **auth)
    assert long.status_code == 400
    assert long.json()["errors"]["content"]["_errors"][0]["code"] == "BASE_TYPE_MAX_LENGTH"
    dm = _post(f"{base}/users/@me/channels", {"recipient_id": "bob"}, **auth)
    assert dm.status_code == 400 and "not snowflake" in json.dumps(dm.json())
    no_agent = _post(
        f"{base}/channels/123/messages", {"content": "x"}, Authorization=auth["Authorization"]
    )
    assert no_agent.status_code == 400
    for answer in (bad_id, long, dm):
        # The description types the codes of nested field errors as integers; the service (and
        # the example in its documentation) sends strings such as "BASE_TYPE_MAX_LENGTH", as
        # the fake does. The envelope is checked against the description.
        envelope = {k: v for k, v in answer.json().items() if k != "errors"}
        check("discord", "#/components/schemas/ErrorResponse", envelope)


def test_slack_refuses_malformed_ids_and_warns_without_a_charset(channel_server):
    server = channel_server("slack")
    url = f"{server.url}/api/chat.postMessage"
    auth = {"Authorization": f"Bearer {server.bot_token}"}
    bad = _post(url, {"channel": "c0123456789", "text": "x"}, **auth)
    assert bad.json() == {"ok": False, "error": "channel_not_found"}
    named = _post(url, {"channel": "#general", "text": "x"}, **auth)
    assert named.json()["ok"] is True and named.json()["channel"] == "C0GENERAL01"
    assert named.json()["warning"] == "missing_charset"  # httpx's json= sends no charset
    utf8 = {"Content-Type": "application/json; charset=utf-8"} | auth
    good = _post(url, content=json.dumps({"channel": "C0123456789", "text": "x"}).encode(), **utf8)
    assert "warning" not in good.json()
    opened = _post(f"{server.url}/api/conversations.open", {"users": "C0123456789"}, **auth)
    assert opened.json() == {"ok": False, "error": "user_not_found"}


def test_hookwise_slack_requests_carry_the_charset(channel_server, deliver):
    server = channel_server("slack")
    deliver(_channel(server), "#general", "hi")
    (req,) = server.requests
    assert req.headers["content-type"] == "application/json; charset=utf-8"
    assert "warning" not in server.answers[0][1].body


def test_mattermost_refuses_missing_fields_and_posts_over_16383(channel_server):
    server = channel_server("mattermost")
    url = f"{server.url}/api/v4/posts"
    auth = {"Authorization": f"Bearer {server.bot_token}"}
    channel = "4xp9fdt77pncbef59f4k1qe83o"
    assert _post(url, {"channel_id": channel}, **auth).status_code == 400
    assert _post(url, {"channel_id": channel, "message": 5}, **auth).status_code == 400
    assert _post(url, {"channel_id": channel, "message": "x" * 16384}, **auth).status_code == 400
    assert _post(url, {"channel_id": channel, "message": "x" * 16383}, **auth).status_code == 201


def test_signal_refuses_a_body_without_the_required_fields(channel_server):
    server = channel_server("signal")
    url = f"{server.url}/v2/send"
    for body in (
        {"message": "x", "number": server.account},
        {"message": "x", "recipients": ["+15551234567"]},
        {"message": 1, "number": server.account, "recipients": ["+15551234567"]},
        {"message": "x", "number": server.account, "recipients": "+15551234567"},
        {"message": "x", "number": server.account, "recipients": ["+1"], "text_mode": "bold"},
    ):
        answer = _post(url, body)
        assert answer.status_code == 400, body
        check("signal", "#/definitions/api.SendMessageError", answer.json())


def test_whatsapp_refuses_bodies_over_4096_and_missing_fields(channel_server):
    server = channel_server("whatsapp")
    url = f"{server.url}/{server.version}/{server.phone_number_id}/messages"
    auth = {"Authorization": f"Bearer {server.access_token}"}
    body = {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": "15551234567",
        "type": "text",
        "text": {"body": "x" * 4097},
    }
    assert _post(url, body, **auth).status_code == 400
    assert (
        _post(url, {k: v for k, v in body.items() if k != "recipient_type"}, **auth).status_code
        == 400
    )
    assert _post(url, body | {"to": "+1 555"}, **auth).status_code == 400
    assert _post(url, body | {"text": {"body": "x" * 4096}}, **auth).status_code == 200
    old = f"{server.url}/v21.0/{server.phone_number_id}/messages"
    assert _post(old, body | {"text": {"body": "x"}}, **auth).status_code == 400


def test_bluebubbles_refuses_a_send_without_temp_guid(channel_server):
    server = channel_server("imessage")
    url = f"{server.url}/api/v1/message/text?password={server.password}"
    answer = _post(url, {"chatGuid": "iMessage;-;+15551234567", "message": "x"})
    assert answer.status_code == 400
    check("bluebubbles", "#/response_schema", answer.json())
    with_method = {"chatGuid": "iMessage;-;+1555", "message": "", "method": "private-api"}
    assert _post(url, with_method).status_code == 200  # the private API needs no tempGuid


def test_teams_refuses_other_regions_and_malformed_activities(channel_server):
    server = channel_server("msteams")
    token = _post(
        server.config()["authUrl"],
        content=(
            "grant_type=client_credentials&client_id="
            f"{server.app_id}&client_secret={server.app_password}"
            "&scope=https%3A%2F%2Fapi.botframework.com%2F.default"
        ).encode(),
        **{"Content-Type": "application/x-www-form-urlencoded"},
    ).json()["access_token"]
    auth = {"Authorization": f"Bearer {token}"}
    server.regions["19:emea@thread.tacv2"] = "emea"
    wrong = _post(
        f"{server.url}/v3/conversations/19:emea@thread.tacv2/activities",
        {"type": "message", "text": "x"},
        **auth,
    )
    assert wrong.status_code == 404
    right = _post(
        f"{server.service_url('emea')}/v3/conversations/19:emea@thread.tacv2/activities",
        {"type": "message", "text": "x"},
        **auth,
    )
    assert right.status_code == 201
    typed = _post(
        f"{server.url}/v3/conversations/19:a@thread.tacv2/activities",
        {"type": "message", "text": 5},
        **auth,
    )
    assert typed.status_code == 400
    check("botframework", "#/definitions/ErrorResponse", typed.json())
