"""Tool calls that wait for a person, through HTTP (issue 34): a grant entry with `approve`
parks the run (`awaiting_approval`, no slot held) while the same answer's other calls are made
at once; a decision through the admin API resumes it from the stored conversation, approved
(the call is made) or denied (the model gets an error result naming the denial); a second,
unknown or late decision is refused, recorded and changes nothing; a timeout denies; a parked
run survives a restart. On SQLite and PostgreSQL."""

from __future__ import annotations

import base64
from collections.abc import Callable

import httpx
import pytest

from tests.cli.support import run as hookwise
from tests.fakes.webhook_receiver import WebhookReceiver
from tests.support.approvals import ADMIN, config
from tests.support.approvals import ended as _ended
from tests.support.approvals import parked as _parked
from tests.support.approvals import start_run as _start
from tests.support.gateway import ADMIN_TOKEN, GatewayProcess
from tests.support.mapped import get_run
from tests.support.wait import eventually


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    return start_module_gateway(config(), name="approvals")


def _decide(gw: GatewayProcess, approval_id: str, what: str, by: str = "alice") -> httpx.Response:
    assert gw.client is not None
    return gw.client.post(
        f"/api/approvals/{approval_id}/{what}", headers={**ADMIN, "X-Hookwise-Actor": by}
    )


def test_a_gated_call_parks_the_run_and_the_other_call_runs_at_once(gw: GatewayProcess) -> None:
    run_id = _start(gw, "ops", 'call t.echo {"text": "now"}\ncall t.count {}')
    run = _parked(gw, run_id)
    assert [(c["tool"], c["outcome"]) for c in run["toolCalls"]] == [("echo", "ok")]
    [approval] = run["approvals"]
    assert (approval["server"], approval["tool"], approval["state"]) == ("t", "count", "pending")
    assert approval["arguments"] is None  # payloads are not kept here: the digest only
    assert approval["argumentsDigest"].startswith("sha256:")
    assert approval["sender"].endswith("/hooks/ops") and approval["verified"] is False
    listed = gw.admin("/api/approvals", state="pending", runId=run_id)["items"]
    assert [a["approvalId"] for a in listed] == [approval["approvalId"]]
    assert gw.client is not None
    metrics = gw.client.get("/metrics", headers=ADMIN).text
    pending = [ln for ln in metrics.splitlines() if ln.startswith("hookwise_approvals_pending ")]
    assert pending and float(pending[0].split()[1]) >= 1
    assert "hookwise_approvals_oldest_seconds " in metrics


def test_approving_resumes_the_run_which_makes_the_call(gw: GatewayProcess) -> None:
    run_id = _start(gw, "ops", 'call t.echo {"text": "first"}\ncall t.count {}')
    [approval] = _parked(gw, run_id)["approvals"]
    r = _decide(gw, approval["approvalId"], "approve")
    assert r.status_code == 200, r.text
    assert r.json()["approval"]["state"] == "approved" and r.json()["resumed"] is True
    run = _ended(gw, run_id)
    assert run["state"] == "succeeded", run
    assert [(c["tool"], c["outcome"]) for c in run["toolCalls"]] == [
        ("echo", "ok"),
        ("count", "ok"),
    ]
    assert run["reply"].startswith("echo: first\n")
    [decided] = run["approvals"]
    assert decided["state"] == "approved" and decided["via"] == "api"
    assert decided["decidedBy"].startswith("alice@") and decided["decidedAt"]


def test_denying_gives_the_model_an_error_naming_the_denial(gw: GatewayProcess) -> None:
    run_id = _start(gw, "globbed", 'call t.echo {"text": "risky"}')
    [approval] = _parked(gw, run_id)["approvals"]
    assert approval["tool"] == "echo"  # gated by the `approve` glob
    r = _decide(gw, approval["approvalId"], "deny", by="bob")
    assert r.status_code == 200, r.text
    run = _ended(gw, run_id)
    assert run["state"] == "succeeded", run
    assert run["toolCalls"] == []  # never called
    assert "needed a person's approval and was denied by bob@" in run["reply"]
    assert run["approvals"][0]["state"] == "denied"


def test_a_second_decision_is_refused_recorded_and_changes_nothing(gw: GatewayProcess) -> None:
    run_id = _start(gw, "ops", "call t.count {}")
    [approval] = _parked(gw, run_id)["approvals"]
    assert _decide(gw, approval["approvalId"], "deny").status_code == 200
    again = _decide(gw, approval["approvalId"], "approve", by="mallory")
    assert again.status_code == 409 and again.json()["code"] == "approval_decided"
    run = _ended(gw, run_id)
    assert run["approvals"][0]["state"] == "denied" and run["toolCalls"] == []
    [refusal] = run["refusedDecisions"]
    assert refusal["by"].startswith("mallory@") and refusal["reason"] == "already denied"


def test_an_unknown_approval_is_404_and_needs_the_admin_token(gw: GatewayProcess) -> None:
    r = _decide(gw, "no-such-approval", "approve")
    assert r.status_code == 404 and r.json()["code"] == "approval_not_found"
    assert gw.client is not None
    anon = gw.client.post("/api/approvals/no-such-approval/approve")
    assert anon.status_code == 401


def test_several_gated_calls_are_decided_one_by_one(gw: GatewayProcess) -> None:
    run_id = _start(gw, "globbed", 'call t.echo {"text": "a"}\ncall t.echo {"text": "b"}')
    first, second = _parked(gw, run_id)["approvals"]
    r = _decide(gw, first["approvalId"], "approve")
    assert r.status_code == 200 and r.json()["resumed"] is False
    assert get_run(gw, run_id)["state"] == "awaiting_approval"
    assert _decide(gw, second["approvalId"], "deny").json()["resumed"] is True
    run = _ended(gw, run_id)
    assert [c["tool"] for c in run["toolCalls"]] == ["echo"]
    assert run["reply"].startswith("echo: a\n") and "was denied" in run["reply"]


def test_a_later_run_of_the_session_waits_behind_a_parked_one(gw: GatewayProcess) -> None:
    first = _start(gw, "serial", "call t.count {}")
    [approval] = _parked(gw, first)["approvals"]
    second = _start(gw, "serial", "plain text")
    other = _ended(gw, _start(gw, "ops", "another session runs meanwhile"))
    assert other["state"] == "succeeded"  # the parked run holds no slot
    assert get_run(gw, second)["state"] == "queued"  # its session waits, in order
    assert _decide(gw, approval["approvalId"], "approve").status_code == 200
    assert _ended(gw, first)["state"] == "succeeded"
    assert _ended(gw, second)["reply"] == "echo: plain text"


def test_a_timeout_denies_and_the_run_replies(
    start_gateway: Callable[..., GatewayProcess],
) -> None:
    gw = start_gateway(config(timeout="1s"), name="timeout")
    run_id = _start(gw, "ops", "call t.count {}")
    run = _ended(gw, run_id)
    assert run["state"] == "succeeded", run
    assert "request timed out" in run["reply"]
    [approval] = run["approvals"]
    assert approval["state"] == "timed_out" and approval["decidedBy"] == "timeout"
    late = _decide(gw, approval["approvalId"], "approve")
    assert late.status_code == 409


def test_a_parked_run_is_decided_and_resumed_after_a_restart(
    start_gateway: Callable[..., GatewayProcess],
) -> None:
    gw = start_gateway(config(), name="restart")
    run_id = _start(gw, "ops", 'call t.echo {"text": "before"}\ncall t.count {}')
    [approval] = _parked(gw, run_id)["approvals"]
    gw.kill()
    gw.start()
    assert get_run(gw, run_id)["state"] == "awaiting_approval"
    assert _decide(gw, approval["approvalId"], "approve").status_code == 200
    run = _ended(gw, run_id)
    assert run["state"] == "succeeded", run
    assert [c["tool"] for c in run["toolCalls"]] == ["echo", "count"]
    assert run["reply"].startswith("echo: before\n")


def test_the_cli_lists_and_approves_and_runs_show_the_decision(gw: GatewayProcess) -> None:
    env = {"HOOKWISE_ADMIN_TOKEN": ADMIN_TOKEN, "HOOKWISE_URL": gw.url}

    def cli(*args: str) -> str:
        done = hookwise(*args, cwd=gw.workdir, env=env)
        assert done.returncode == 0, done.stderr
        return done.stdout

    run_id = _start(gw, "ops", "call t.count {}")
    [approval] = _parked(gw, run_id)["approvals"]
    listed = cli("approvals", "list", "--run", run_id)
    assert approval["approvalId"] in listed and "t.count" in listed and "pending" in listed
    said = cli("approvals", "approve", approval["approvalId"])
    assert said.startswith("approved t.count of run") and "the run resumes" in said
    assert _ended(gw, run_id)["state"] == "succeeded"
    shown = cli("runs", "show", run_id)
    assert "approvals:" in shown and approval["approvalId"] in shown and "approved" in shown
    refused = hookwise("approvals", "deny", approval["approvalId"], cwd=gw.workdir, env=env)
    assert refused.returncode != 0 and "already approved" in refused.stderr


def test_a_channel_without_buttons_gets_a_signed_link_to_the_approval_page(
    start_gateway: Callable[..., GatewayProcess],
) -> None:
    receiver = WebhookReceiver().start()
    try:
        cfg = config()
        secret = "whsec_" + base64.b64encode(b"approval-link-secret-0123456789ab").decode()
        cfg["channels"] = {"webhook": {**receiver.config(), "secret": secret}}
        cfg["approvals"].update(via=f"webhook:{receiver.url}/in", publicUrl="https://hooks.example")
        gw = start_gateway(cfg, name="linked")
        run_id = _start(gw, "ops", "call t.count {}")
        [approval] = _parked(gw, run_id)["approvals"]
        [sent] = eventually(lambda: receiver.sends, what="the request through the channel")
        text = sent.json["data"]["text"]
        assert "Approval needed: t.count" in text and f"run {run_id}" in text
        link = text.split("Decide: ", 1)[1].strip()
        base = f"https://hooks.example/ui/approvals/{approval['approvalId']}?sig="
        assert link.startswith(base)
        assert gw.client is not None
        page = gw.client.get(link.replace("https://hooks.example", ""), headers=ADMIN)
        assert page.status_code == 200 and "t.count" in page.text and "Approve" in page.text
        forged = gw.client.get(
            f"/ui/approvals/{approval['approvalId']}?sig={'0' * 64}", headers=ADMIN
        )
        assert forged.status_code == 403
        assert get_run(gw, run_id)["refusedDecisions"][0]["reason"] == (
            "the link's signature is not valid"
        )
        assert get_run(gw, run_id)["state"] == "awaiting_approval"
    finally:
        receiver.stop()
