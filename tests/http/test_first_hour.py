"""The README's GitHub and Stripe setups, pasted, through a provider's first hour: GitHub's `ping`
(a signed handshake), events no rule takes (acknowledged `200 ignored`, logged with the
provider's event type and delivery id, their payload kept by default and replayed once a rule
exists), the pull request the rule filters for, Stripe test-mode events signed by
`stripe-python`, and the refusals (`unmatched: reject`, an unguarded path) that name the rule
condition that failed.

Deliveries are signed as GitHub signs them (HMAC-SHA256 of the body in `X-Hub-Signature-256`,
with `X-GitHub-Event`, `X-GitHub-Delivery` and `X-GitHub-Hook-ID`); Stripe events are signed by
Stripe's own library."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import signal
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import stripe
import yaml

from tests.fakes.mcp_server import stdio_command
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, REPO, GatewayProcess, base_config
from tests.support.wait import eventually

GITHUB_SECRET = "first-hour-github-secret-5d1e9a"
STRIPE_SECRET = "whsec_first-hour-stripe-secret-77c0"
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
PR = json.loads((REPO / "rules" / "examples" / "github-pull-request.json").read_text())
STRIPE_EVENT = json.loads((REPO / "rules" / "examples" / "stripe-payment-failed.json").read_text())


def readme_hooks() -> dict[str, Any]:
    """The `hooks:` of the README's GitHub and Stripe blocks, merged as a reader pastes both."""
    blocks = re.findall(r"```yaml\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    hooks: dict[str, Any] = {"verify": {}, "mappings": []}
    for block in blocks:
        data = yaml.safe_load(block)["hooks"]
        if any(
            m.get("id") in ("github-pull-request", "stripe-payment-failed")
            for m in data["mappings"]
        ):
            hooks["verify"].update(data["verify"])
            hooks["mappings"] += data["mappings"]
    assert {m["id"] for m in hooks["mappings"]} == {"github-pull-request", "stripe-payment-failed"}
    return hooks


def config() -> dict[str, Any]:
    hooks = readme_hooks()
    for m in hooks["mappings"]:
        m.pop("channel", None)  # no Telegram here: the reply stays in the run
        m["deliver"] = False
    # a path with rules and no signature block: refused, as before, but the refusal says why
    hooks["mappings"].append(
        {
            "id": "deploys",
            "match": {"path": "deploys", "when": {"jsonpath": "$.env", "equals": "prod"}},
            "action": "wake",
            "textTemplate": "deploy",
        }
    )
    # a rule with a tool grant, for the console's Rules page (never called here)
    hooks["mappings"].append(
        {"id": "triage", "match": {"path": "triage"}, "messageTemplate": "{{text}}",
         "tools": ["t.echo", "t.fail"]}
    )  # fmt: skip
    settings = base_config(**hooks)
    settings["tools"] = {"mcpServers": {"t": stdio_command()}}
    return settings


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    env = {"GITHUB_WEBHOOK_SECRET": GITHUB_SECRET, "STRIPE_WEBHOOK_SECRET": STRIPE_SECRET}
    return start_module_gateway(config(), env=env)


def github(gw: GatewayProcess, event: str, payload: dict[str, Any], *, sign: bool = True):
    body = json.dumps(payload, indent=2).encode()  # GitHub sends it pretty-printed
    delivery = str(uuid.uuid4())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/5c1a2b3",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-GitHub-Hook-ID": "492011573",
    }
    if sign:
        mac = hmac.new(GITHUB_SECRET.encode(), body, hashlib.sha256).hexdigest()
        headers["X-Hub-Signature-256"] = "sha256=" + mac
    return gw.hook("github", content=body, token=None, headers=headers), delivery


def stripe_post(gw: GatewayProcess, event: dict[str, Any]) -> httpx.Response:
    body = json.dumps(event).encode()
    signed = stripe.WebhookSignature.generate_signature_header(body.decode(), STRIPE_SECRET)
    headers = {"Content-Type": "application/json", "Stripe-Signature": signed}
    return gw.hook("stripe", content=body, token=None, headers=headers)


def logged(gw: GatewayProcess, **fields: Any) -> dict[str, Any] | None:
    items = gw.admin("/api/requests", limit=200)["items"]
    return next((i for i in items if all(i.get(k) == v for k, v in fields.items())), None)


def replay(gw: GatewayProcess, request_id: str, **params: Any) -> httpx.Response:
    return httpx.post(
        f"{gw.url}/api/requests/{request_id}/replay", params=params, headers=AUTH, timeout=10
    )


def test_githubs_ping_is_answered_as_a_handshake(gw: GatewayProcess) -> None:
    ping = {
        "zen": "Keep it logically awesome.",
        "hook_id": 492011573,
        "hook": {"type": "Repository"},
    }
    r, delivery = github(gw, "ping", ping)
    assert r.status_code == 200, r.text
    assert r.json() == {"ok": True, "handshake": "github_ping"}
    line = eventually(lambda: logged(gw, deliveryId=delivery), what="the ping's log line")
    assert line["action"] == "handshake" and line["code"] == "github_ping"
    assert line["eventType"] == "ping" and line["status"] == 200
    assert line["runIds"] == [] and line["eventIds"] == []


def test_an_unsigned_ping_is_refused(gw: GatewayProcess) -> None:
    r, _ = github(gw, "ping", {"zen": "x"}, sign=False)
    assert r.status_code == 401 and r.json()["code"] == "invalid_signature"


def test_a_refused_delivery_is_logged_with_the_providers_names(gw: GatewayProcess) -> None:
    """Refused at the door (a bad signature), the request log still names the provider's
    event and delivery, read from the headers before the signature was checked."""
    r, delivery = github(gw, "ping", {"zen": "x"}, sign=False)
    assert r.status_code == 401 and r.json()["code"] == "invalid_signature"
    line = eventually(lambda: logged(gw, deliveryId=delivery), what="the refused ping's line")
    assert line["eventType"] == "ping" and line["code"] == "invalid_signature"
    assert line["status"] == 401 and line["runIds"] == []


def test_an_event_no_rule_takes_is_acknowledged_logged_and_kept(gw: GatewayProcess) -> None:
    push = {"ref": "refs/heads/main", "repository": {"full_name": "acme/gateway"}}
    r, delivery = github(gw, "push", push)
    assert r.status_code == 200, r.text
    assert r.json() == {"ok": True, "ignored": True, "code": "no_rule_matched"}
    line = eventually(lambda: logged(gw, deliveryId=delivery), what="the push's log line")
    assert line["action"] == "ignored" and line["code"] == "no_rule_matched"
    assert line["eventType"] == "push" and line["status"] == 200 and line["runIds"] == []
    # kept by default (hooks.retainPayloads): a dry run works, and today's rules still refuse it
    refused = replay(gw, line["requestId"], dryRun="true")
    assert refused.status_code == 422, refused.text
    assert "none matched" in refused.json()["error"]


def test_a_pull_request_action_the_rule_filters_out_is_acknowledged(gw: GatewayProcess) -> None:
    r, delivery = github(gw, "pull_request", {**PR, "action": "labeled"})
    assert r.status_code == 200 and r.json()["ignored"] is True
    line = eventually(lambda: logged(gw, deliveryId=delivery), what="the labeled PR's line")
    assert line["eventType"] == "pull_request" and line["runIds"] == []


def test_an_opened_pull_request_starts_one_run(gw: GatewayProcess) -> None:
    r, delivery = github(gw, "pull_request", PR)
    assert r.status_code == 202, r.text
    assert r.json()["sessionKey"] == "hook:github:acme/gateway#42"
    line = eventually(lambda: logged(gw, deliveryId=delivery), what="the PR's log line")
    assert line["eventType"] == "pull_request" and line["runIds"] == [r.json()["runId"]]
    # GitHub's retry of the same delivery is the same request, not a second run
    again = gw.hook(
        "github",
        content=json.dumps(PR, indent=2).encode(),
        token=None,
        headers={
            "Content-Type": "application/json",
            "X-GitHub-Event": "pull_request",
            "X-GitHub-Delivery": delivery,
            "X-Hub-Signature-256": "sha256="
            + hmac.new(
                GITHUB_SECRET.encode(), json.dumps(PR, indent=2).encode(), hashlib.sha256
            ).hexdigest(),
        },
    )
    assert again.status_code == 202 and again.json()["runId"] == r.json()["runId"]


def test_stripe_test_mode_events_are_taken_and_other_types_acknowledged(gw: GatewayProcess) -> None:
    test_mode = {**STRIPE_EVENT, "id": "evt_test_first_hour_1", "livemode": False}
    r = stripe_post(gw, test_mode)
    assert r.status_code == 202, r.text
    run = gw.admin(f"/api/runs/{r.json()['runId']}")["run"]
    assert "test mode" in run["message"]
    other = {
        "id": "evt_test_first_hour_2",
        "object": "event",
        "type": "customer.created",
        "livemode": False,
        "data": {"object": {"id": "cus_1"}},
    }
    r = stripe_post(gw, other)
    assert r.status_code == 200 and r.json()["code"] == "no_rule_matched", r.text
    line = eventually(lambda: logged(gw, deliveryId="evt_test_first_hour_2"), what="its line")
    assert line["eventType"] == "customer.created" and line["action"] == "ignored"


def test_a_path_without_a_signature_block_refuses_and_says_which_condition_failed(
    gw: GatewayProcess,
) -> None:
    r = gw.hook("deploys", {"env": "staging"})
    assert r.status_code == 404
    body = r.json()
    assert body["ok"] is False and body["code"] == "not_found"
    assert "'deploys'" in body["error"] and "rule 'deploys'" in body["error"]
    assert "$.env" in body["error"] and "staging" not in body["error"]  # never the payload
    r = gw.hook("nowhere", {"env": "prod"})
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    assert "no hook or mapping matches 'nowhere'" in r.json()["error"]


def test_an_ignored_event_replays_once_a_rule_exists(
    start_gateway: Callable[..., GatewayProcess],
) -> None:
    gw = start_gateway(
        config(),
        env={"GITHUB_WEBHOOK_SECRET": GITHUB_SECRET, "STRIPE_WEBHOOK_SECRET": STRIPE_SECRET},
    )
    issue = {
        "action": "opened",
        "issue": {"number": 7, "title": "Crash on start"},
        "repository": {"full_name": "acme/gateway"},
    }
    r, delivery = github(gw, "issues", issue)
    assert r.status_code == 200 and r.json()["ignored"] is True
    line = eventually(lambda: logged(gw, deliveryId=delivery), what="the issue's line")
    gw.config["hooks"]["mappings"].append(
        {
            "id": "github-issue",
            "match": {"path": "github", "when": {"header": "x-github-event", "equals": "issues"}},
            "sessionKey": "hook:github:{{repository.full_name}}#{{issue.number}}",
            "messageTemplate": "Issue #{{issue.number}}: {{issue.title}}",
            "deliver": False,
        }
    )
    gw.write_config()
    assert gw.proc is not None
    gw.proc.send_signal(signal.SIGHUP)
    eventually(lambda: "reload: rules swapped in" in gw.stderr(), what="the reload")
    done = replay(gw, line["requestId"])
    assert done.status_code == 200, done.text
    [run_id] = done.json()["runIds"]
    run = gw.admin(f"/api/runs/{run_id}")["run"]
    assert run["rule"] == "github-issue" and run["message"] == "Issue #7: Crash on start"


def test_unmatched_reject_on_a_guarded_path_answers_404(
    start_gateway: Callable[..., GatewayProcess],
) -> None:
    hooks = readme_hooks()
    hooks["mappings"][0]["unmatched"] = "reject"
    gw = start_gateway(
        base_config(**hooks),
        env={"GITHUB_WEBHOOK_SECRET": GITHUB_SECRET, "STRIPE_WEBHOOK_SECRET": STRIPE_SECRET},
    )
    r, _ = github(gw, "push", {"ref": "refs/heads/main"})
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    assert "rule 'github-pull-request'" in r.json()["error"]
    # the ping is still a handshake
    assert github(gw, "ping", {"zen": "z"})[0].status_code == 200
    # and the hook token is still not what this path takes
    assert gw.hook("github", {"x": 1}, token=HOOK_TOKEN).status_code == 401


def test_a_signature_block_without_auth_signature_is_warned_about_and_its_401_says_why(
    start_gateway: Callable[..., GatewayProcess],
) -> None:
    """The manual's old one-liner: a correctly signed delivery without the hook token is refused,
    and the refusal says the signature was fine and what the block lacks; `config check` and the
    start-up warn about the block before any delivery comes."""
    settings = config()
    settings["hooks"]["verify"]["github"].pop("auth")
    env = {"GITHUB_WEBHOOK_SECRET": GITHUB_SECRET, "STRIPE_WEBHOOK_SECRET": STRIPE_SECRET}
    gw = start_gateway(settings, env=env)
    r, _ = github(gw, "pull_request", PR)
    assert r.status_code == 401 and r.json()["code"] == "unauthorized"
    message = r.json()["error"]
    assert "github signature is valid" in message and "hooks.verify.github" in message
    assert "auth: signature" in message
    # a wrong signature is not called valid
    r = gw.hook("github", content=b"{}", token=None,
                headers={"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + "0" * 64})  # fmt: skip
    assert r.status_code == 401 and "signature is valid" not in r.json()["error"]
    # with the token as well, the path works as before
    body = json.dumps(PR).encode()
    mac = hmac.new(GITHUB_SECRET.encode(), body, hashlib.sha256).hexdigest()
    r = gw.hook("github", content=body, token=HOOK_TOKEN,
                headers={"X-GitHub-Event": "pull_request", "X-Hub-Signature-256": "sha256=" + mac})  # fmt: skip
    assert r.status_code == 202, r.text
    warning = "hooks.verify.github: github cannot send the hook token"
    assert warning in gw.stderr()
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "hookwise.server.cli.main", "config", "check", "-c",
         str(gw.config_path)],
        capture_output=True, text=True, timeout=120, env={**__import__("os").environ, **env},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"warning: {warning}" in done.stderr and "auth: signature" in done.stderr


def test_the_consoles_rules_page_shows_each_paths_signature_and_each_rules_grant(
    gw: GatewayProcess,
) -> None:
    with httpx.Client(base_url=gw.url, timeout=10) as client:
        assert client.post("/ui/login", data={"token": ADMIN_TOKEN}).status_code == 303
        page = client.get("/ui/rules").text
    rows = {
        cells[1]: cells
        for row in re.findall(r"<tr>(.*?)</tr>", page, re.S)
        if len(cells := re.findall(r"<td>(.*?)</td>", row, re.S)) == 9
    }
    assert rows["github-pull-request"][7] == "github (auth: signature)"
    assert rows["stripe-payment-failed"][7] == "stripe (auth: signature)"
    assert "none: hook token" in rows["deploys"][7]
    assert rows["triage"][8] == "t.echo, t.fail" and rows["github-pull-request"][8] == "none"
    paths = {
        cells[0]: cells
        for row in re.findall(r"<tr>(.*?)</tr>", page, re.S)
        if len(cells := re.findall(r"<td>(.*?)</td>", row, re.S)) == 6
    }
    assert paths["github"][1:4] == ["github", "signature", "hooks.verify.github"]
    assert paths["github"][5] == "acknowledge" and paths["deploys"][5] == "reject"


def test_the_consoles_request_log_shows_the_event_type_and_delivery_id(gw: GatewayProcess) -> None:
    r, delivery = github(gw, "issue_comment", {"action": "created"})
    assert r.status_code == 200
    line = eventually(lambda: logged(gw, deliveryId=delivery), what="the comment's line")
    with httpx.Client(base_url=gw.url, timeout=10) as client:
        assert client.post("/ui/login", data={"token": ADMIN_TOKEN}).status_code == 303
        listing = client.get("/ui/requests").text
        page = client.get(f"/ui/requests/{line['requestId']}").text
    assert f"<td>issue_comment</td><td>{delivery}</td>" in listing
    assert "<dd>issue_comment</dd>" in page and f"<dd>{delivery}</dd>" in page
