"""Approvals asked on Slack, through HTTP against a fake Web API: the request is a
`chat.postMessage` with an actions block of Approve / Deny buttons; Slack's `block_actions`
interaction (a form field `payload`, JSON) is POSTed to `/approvals/slack`, signed with the
app's signing secret (signatures made by `slack_sdk`'s `SignatureVerifier`, the oracle); only a
listed approver's click counts; the message is then updated (`chat.update`). A bad or stale
signature, a non-approver's click and a second click are refused and change nothing."""

from __future__ import annotations

import time

import httpx
import pytest
from slack_sdk.signature import SignatureVerifier

from tests.fakes.chat_fakes import SlackFake
from tests.support.approvals import ChatApprovals, ChatSetup, asked
from tests.support.approvals import ended as _ended
from tests.support.approvals import parked as _parked
from tests.support.approvals import start_run as _start
from tests.support.gateway import GatewayProcess
from tests.support.mapped import get_run

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
APPROVER = "U024BE7LH"
CHANNEL = "C0OPSCHAN01"
CHAT_APPROVALS = ChatSetup(
    SlackFake,
    "slack",
    settings={"signingSecret": SIGNING_SECRET},
    approvals={"approvers": [f"slack:{APPROVER}"], "via": f"slack:{CHANNEL}"},
)


@pytest.fixture(scope="module")
def slack(chat_approvals: ChatApprovals) -> SlackFake:
    return chat_approvals.fake


@pytest.fixture(scope="module")
def gw(chat_approvals: ChatApprovals) -> GatewayProcess:
    return chat_approvals.gw


def _asked(slack: SlackFake, run_id: str) -> str:
    return str(asked(lambda: slack.posted, run_id, "slack"))


def _post(
    gw: GatewayProcess, body: bytes, secret: str = SIGNING_SECRET, at: int | None = None
) -> httpx.Response:
    stamp = str(at if at is not None else int(time.time()))
    signature = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)
    return httpx.post(
        f"{gw.url}/approvals/slack",
        content=body,
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": signature,
        },
        timeout=30,
    )


def test_an_approvers_click_approves_and_updates_the_message(
    gw: GatewayProcess, slack: SlackFake
) -> None:
    run_id = _start(gw, "ops", 'call t.echo {"text": "sl"}\ncall t.count {}')
    _parked(gw, run_id)
    ts = _asked(slack, run_id)
    posted = slack.posted[ts]
    assert posted["channel"] == CHANNEL and "Approval needed: t.count" in posted["text"]
    r = _post(gw, slack.click(ts, "Approve", APPROVER))
    assert r.status_code == 200
    run = _ended(gw, run_id)
    assert [c["tool"] for c in run["toolCalls"]] == ["echo", "count"]
    assert (run["approvals"][0]["decidedBy"], run["approvals"][0]["via"]) == (
        f"slack:{APPROVER}",
        "slack",
    )
    [update] = [u for u in slack.updates if u["ts"] == ts]
    assert update["text"].endswith(f"Approved by slack:{APPROVER}")
    assert all(b["type"] != "actions" for b in update["blocks"])  # the buttons are gone
    assert _post(gw, slack.click(ts, "Deny", APPROVER)).status_code == 200
    after = get_run(gw, run_id)
    assert after["approvals"][0]["state"] == "approved"
    assert after["refusedDecisions"][-1]["reason"] == "already approved"


def test_bad_signatures_and_non_approvers_change_nothing(
    gw: GatewayProcess, slack: SlackFake
) -> None:
    run_id = _start(gw, "ops", "call t.count {}")
    _parked(gw, run_id)
    ts = _asked(slack, run_id)
    click = slack.click(ts, "Approve", APPROVER)
    assert _post(gw, click, secret="not-the-signing-secret").status_code == 401
    stale = _post(gw, click, at=int(time.time()) - 3600)
    assert stale.status_code == 401 and stale.json()["code"] == "unauthorized"
    assert _post(gw, slack.click(ts, "Approve", "U0NOTALLOWD")).status_code == 200
    run = get_run(gw, run_id)
    assert run["state"] == "awaiting_approval"
    assert "not a listed approver" in run["refusedDecisions"][0]["reason"]
    assert SIGNING_SECRET not in gw.stderr()
    assert _post(gw, slack.click(ts, "Deny", APPROVER)).status_code == 200
    run = _ended(gw, run_id)
    assert run["toolCalls"] == [] and f"denied by slack:{APPROVER} via slack" in run["reply"]
    # the audit log has both clicks as their clickers' (the forged ones as refused POSTs)
    entries = [e for e in gw.admin("/api/audit", limit=10)["items"] if e["via"] == "slack"][:2]
    assert [(e["action"], e["actor"], e["outcome"], e["code"]) for e in entries] == [
        ("deny", f"slack:{APPROVER}", "ok", None),
        ("approve", "slack:U0NOTALLOWD", "refused", "not_an_approver"),
    ]
    assert entries[0]["targets"]["runId"] == run_id
