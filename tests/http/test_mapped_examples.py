"""The worked examples in rules/examples/, through HTTP with their sample payloads: GitHub pull
requests, issues and other events; Stripe's failed payment (JS transform, fixed answer); the
monitoring alert (Python transform routing by severity)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, REPO, GatewayProcess
from tests.support.mapped import events_of, finished_run, logged, runs_of
from tests.support.wait import eventually

EXAMPLES = REPO / "rules" / "examples"


def sample(name: str, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / f"{name}.json").read_text(encoding="utf-8"))
    data.update(changes)
    return data


@pytest.fixture(scope="module")
def gw(
    tmp_path_factory: pytest.TempPathFactory, start_module_gateway: Callable[..., GatewayProcess]
) -> GatewayProcess:
    workdir = tmp_path_factory.mktemp("examples")
    # the repo's transforms, where a configuration finds them: <config dir>/hooks/transforms
    (workdir / "hooks").mkdir()
    (workdir / "hooks" / "transforms").symlink_to(REPO / "transforms")
    config = {
        "hooks": {"enabled": True, "token": HOOK_TOKEN, "rules": [str(EXAMPLES / "*.yaml")]},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
    }
    return start_module_gateway(config, workdir=workdir)


def test_github_pull_request_starts_a_review_run(gw: GatewayProcess) -> None:
    r = gw.hook("github", sample("github-pull-request"), headers={"X-GitHub-Event": "pull_request"})
    assert r.status_code == 202, r.text
    body = r.json()
    assert (body["rule"], body["sessionKey"]) == (
        "github-pull-request",
        "hook:github:acme/gateway#42",
    )
    run = finished_run(gw, body["runId"])
    assert (run["rule"], run["name"]) == ("github-pull-request", "GitHub")
    assert run["reply"].startswith(
        "echo: Pull request #42 opened in acme/gateway by octocat: "
        "Add retry with backoff to the delivery queue\nhttps://github.com/acme/gateway/pull/42\n\n"
        "Deliveries that fail with 5xx are retried up to five times."
    )


def test_a_draft_pull_request_falls_through_to_a_wake_event(gw: GatewayProcess) -> None:
    payload = sample("github-pull-request")
    payload["pull_request"]["draft"] = True
    r = gw.hook("github", payload, headers={"X-GitHub-Event": "pull_request"})
    assert r.status_code == 200, r.text
    assert r.json()["rule"] == "github-other"
    [event] = [e for e in events_of(gw, "github-other") if e["eventId"] == r.json()["eventId"]]
    assert event["text"] == "GitHub pull_request event on acme/gateway"
    assert event["mode"] == "next-heartbeat"


def test_github_issue_starts_a_run_with_its_labels(gw: GatewayProcess) -> None:
    r = gw.hook("github", sample("github-issue"), headers={"X-GitHub-Event": "issues"})
    assert r.status_code == 202, r.text
    body = r.json()
    assert (body["rule"], body["sessionKey"]) == ("github-issue", "hook:github:acme/gateway#7")
    reply = finished_run(gw, body["runId"])["reply"]
    assert reply.startswith(
        "echo: New issue #7 in acme/gateway by hubot: Webhook deliveries time out under load\n"
        "Labels: bug, p1\nhttps://github.com/acme/gateway/issues/7"
    )


def test_another_github_event_is_a_wake_for_the_next_heartbeat(gw: GatewayProcess) -> None:
    ping = {"zen": "Keep it logically awesome.", "repository": {"full_name": "acme/gateway"}}
    r = gw.hook("github", ping, headers={"X-GitHub-Event": "ping"})
    assert r.status_code == 200, r.text
    assert (r.json()["rule"], r.json()["mode"]) == ("github-other", "next-heartbeat")
    texts = [e["text"] for e in events_of(gw, "github-other")]
    assert "GitHub ping event on acme/gateway" in texts


def test_stripe_payment_failed_answers_stripe_and_starts_a_run(gw: GatewayProcess) -> None:
    r = gw.hook("stripe", sample("stripe-payment-failed"))
    assert r.status_code == 200, r.text
    assert r.json() == {"received": True, "event": "evt_1PqR2sT3uV4wX5yZ"}
    [run] = [
        x
        for x in runs_of(gw, "stripe-payment-failed")
        if x["sessionKey"] == "hook:stripe:cus_QwErTy123"
    ]
    assert run["name"] == "Stripe"
    assert finished_run(gw, run["runId"])["reply"] == (
        "echo: Stripe invoice.payment_failed (evt_1PqR2sT3uV4wX5yZ)\n"
        "Amount: 49.00 USD from billing@example.com.\n"
        "Reason: no reason given"
    )


def test_a_stripe_test_mode_event_is_taken_marked_and_kept_apart(gw: GatewayProcess) -> None:
    r = gw.hook("stripe", sample("stripe-payment-failed", id="evt_test_1", livemode=False))
    assert r.status_code == 200, r.text
    assert r.json() == {"received": True, "event": "evt_test_1"}  # the rule's fixed answer
    [run] = eventually(
        lambda: [
            x
            for x in runs_of(gw, "stripe-payment-failed")
            if x["sessionKey"] == "hook:stripe:test:cus_QwErTy123"
        ],
        what="the test-mode run",
    )
    assert finished_run(gw, run["runId"])["reply"].startswith(
        "echo: Stripe invoice.payment_failed (evt_test_1) (test mode)\n"
    )


def test_a_critical_alert_starts_an_investigation_run(gw: GatewayProcess) -> None:
    r = gw.hook("alerts", sample("monitoring-alert"))
    assert r.status_code == 202, r.text
    body = r.json()
    assert (body["rule"], body["sessionKey"]) == ("monitoring-alert", "hook:alert:disk-db-1")
    run = finished_run(gw, body["runId"])
    assert run["name"] == "Monitoring"
    assert run["reply"].startswith(
        "echo: [CRITICAL] Disk usage above 95% on db-1 (postgres)\n"
        "/var/lib/postgresql is at 96% and growing 1%/h.\n"
        "Dashboard: https://grafana.example.com/d/disk"
    )


def test_a_warning_alert_becomes_a_wake_event(gw: GatewayProcess) -> None:
    r = gw.hook("alerts", sample("monitoring-alert", severity="warning", title="Disk at 85%"))
    assert r.status_code == 200, r.text
    assert (r.json()["rule"], r.json()["mode"]) == ("monitoring-alert", "next-heartbeat")
    [event] = [e for e in events_of(gw, "monitoring-alert") if e["eventId"] == r.json()["eventId"]]
    assert event["text"] == "[warning] Disk at 85% on db-1"


def test_a_resolved_alert_is_204_and_stores_nothing(gw: GatewayProcess) -> None:
    before = len(runs_of(gw, "monitoring-alert")) + len(events_of(gw, "monitoring-alert"))
    r = gw.hook("alerts", sample("monitoring-alert", status="resolved", fingerprint="resolved-1"))
    assert r.status_code == 204 and r.content == b""
    assert len(runs_of(gw, "monitoring-alert")) + len(events_of(gw, "monitoring-alert")) == before
    entry = eventually(
        lambda: [e for e in logged(gw, "/hooks/alerts") if e["code"] == "skipped"], what="the skip"
    )[0]
    assert (entry["status"], entry["rule"]) == (204, "monitoring-alert")
