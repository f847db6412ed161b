"""The `github` channel against the GitHub fake (checked against GitHub's REST description):
replies as issue and pull request comments, token or GitHub App authentication (a JWT exchanged
for an installation token, kept until it expires), GitHub's rate limits; and end to end, a pull
request hook whose review lands as a comment on that pull request."""

from __future__ import annotations

import json
import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from hookwise.server.channels import DeliveryError, load_channels
from tests.fakes.github_fake import GitHubFake
from tests.fakes.specs import problems
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, REPO
from tests.support.wait import eventually

APP_ID = "123456"


def app_keys() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


def as_app(server: GitHubFake) -> dict[str, Any]:
    private, public = app_keys()
    server.app(APP_ID, public)
    return {
        "appId": APP_ID,
        "privateKey": private,
        "installationId": server.installation_id,
        "baseUrl": server.url,
    }


def github(config: dict[str, Any]) -> Any:
    return load_channels({"github": config})["github"]


def test_a_comment_is_posted_as_the_description_says(channel_server, deliver) -> None:
    server = channel_server("github")
    result = deliver(github(server.config()), "acme/gateway#42", "LGTM, one nit.")
    [req] = server.sends
    assert req.path == "/repos/acme/gateway/issues/42/comments"
    assert req.headers["accept"] == "application/vnd.github+json"
    assert req.headers["x-github-api-version"] == "2022-11-28"
    assert req.json == {"body": "LGTM, one nit."}
    [(_, answer)] = server.answers
    assert answer.status == 201
    assert problems("github", "#/components/schemas/issue-comment", answer.body) == []
    assert result.message_ids == (str(answer.body["id"]),)


def test_a_github_app_exchanges_a_jwt_and_keeps_the_token_until_it_expires(
    channel_server, deliver
) -> None:
    server = channel_server("github")
    channel = github(as_app(server))
    before = time.time()
    deliver(channel, "acme/gateway#42", "first")
    deliver(channel, "acme/gateway#43", "second")
    [claims] = server.exchanges  # one exchange for both comments
    assert claims["iss"] == APP_ID and claims["exp"] - claims["iat"] == 600
    assert before - 61 <= claims["iat"] <= time.time() - 59
    [(_, answer)] = [(r, a) for r, a in server.answers if r.path.endswith("/access_tokens")]
    assert problems("github", "#/components/schemas/installation-token", answer.body) == []
    token = answer.body["token"]
    assert [r.headers["authorization"] for r in server.sends] == [f"Bearer {token}"] * 2
    header = jwt.get_unverified_header(
        next(r for r in server.requests if r.path.endswith("/access_tokens")).headers[
            "authorization"
        ][7:]
    )
    assert header["alg"] == "RS256"


def test_a_token_about_to_expire_or_revoked_is_exchanged_again(channel_server, deliver) -> None:
    server = channel_server("github")
    server.expires_in = 30  # less than the minute before expiry when it is renewed
    channel = github(as_app(server))
    deliver(channel, "acme/gateway#42", "one")
    deliver(channel, "acme/gateway#42", "two")
    assert len(server.exchanges) == 2
    server.expires_in = 3600
    deliver(channel, "acme/gateway#42", "three")
    server.tokens.clear()  # revoked: the 401 makes one fresh exchange, then the comment
    deliver(channel, "acme/gateway#42", "four")
    assert len(server.exchanges) == 4
    assert [r.json["body"] for r in server.sends if r.json] == [
        "one",
        "two",
        "three",
        "four",
        "four",
    ]


def test_the_primary_rate_limit_waits_for_its_reset(channel_server, deliver) -> None:
    server = channel_server("github")
    server.primary_limit(reset_in=30)
    with pytest.raises(DeliveryError) as caught:
        deliver(github(server.config()), "acme/gateway#42", "hello")
    error = caught.value
    assert error.retryable is True and error.status == 403
    assert error.retry_after is not None and 27 <= error.retry_after <= 31
    assert "API rate limit exceeded" in error.message


def test_a_forbidden_answer_without_a_rate_limit_is_permanent(channel_server, deliver) -> None:
    from tests.fakes.fake_http import Reply

    server = channel_server("github")
    server.script(Reply(403, {"message": "Resource not accessible by integration"}))
    with pytest.raises(DeliveryError) as caught:
        deliver(github(server.config()), "acme/gateway#42", "hello")
    assert caught.value.retryable is False
    assert caught.value.message == "github answered 403: Resource not accessible by integration"


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({}, "give token, or appId, privateKey"),
        ({"token": "t", "appId": "1", "privateKey": "k", "installationId": "2"}, "not both"),
        ({"appId": "1", "privateKey": "k"}, "give token, or appId"),
        ({"token": "t", "defaultTo": "acme"}, "owner/repo#number"),
    ],
)
def test_a_broken_configuration_is_refused(config: dict[str, Any], problem: str) -> None:
    from hookwise.engine.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        github(config)
    assert problem in str(caught.value)


def test_a_pull_request_hook_gets_its_review_as_a_comment(start_gateway, channel_server) -> None:
    server = channel_server("github")
    mapping = {
        "id": "review",
        "match": {"path": "github", "when": {"header": "x-github-event", "equals": "pull_request"}},
        "action": "agent",
        "wakeMode": "next-heartbeat",
        "messageTemplate": "Review pull request #{{ number }}: {{ pull_request.title }}",
        "channel": "github",
        "to": "{{ repository.full_name }}#{{ pull_request.number }}",
    }
    gw = start_gateway(
        {
            "hooks": {"enabled": True, "token": HOOK_TOKEN, "mappings": [mapping]},
            "gateway": {"auth": {"token": ADMIN_TOKEN}},
            "agents": {"defaults": {"heartbeat": {"every": 0}}},
            "channels": {"github": server.config()},
        }
    )
    payload = json.loads((REPO / "rules/examples/github-pull-request.json").read_text())
    r = gw.hook("github", payload, headers={"X-GitHub-Event": "pull_request"})
    assert r.status_code == 202, r.text
    run_id = r.json()["runId"]
    d = eventually(
        lambda: next(
            (
                d
                for d in gw.admin(f"/api/runs/{run_id}")["run"]["deliveries"]
                if d["state"] == "sent"
            ),
            None,
        ),
        what="the review comment",
    )
    assert (d["channel"], d["to"]) == ("github", "acme/gateway#42")
    [req] = server.sends
    assert req.path == "/repos/acme/gateway/issues/42/comments"
    assert req.json["body"].startswith("echo: Review pull request #42: Add retry with backoff")
    assert d["messageIds"] == [str(server.answers[-1][1].body["id"])]
