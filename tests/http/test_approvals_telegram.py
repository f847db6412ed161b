"""Approvals asked on Telegram, through HTTP against a fake Bot API that checks the wire format
(tests/fakes/api_specs/telegram_callbacks.json): the request is a `sendMessage` with an inline
keyboard whose `callback_data` carries a single-use token; Telegram's `callback_query` update is
POSTed to `/approvals/telegram` with `X-Telegram-Bot-Api-Secret-Token`; only a listed
approver's click counts; the click is answered (`answerCallbackQuery`) and the message edited
(`editMessageText`). A forged callback (wrong secret, or a made-up token), a non-approver's
click and a double click are refused, recorded, and change nothing."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.fakes.chat_fakes import TelegramFake
from tests.support.approvals import ChatApprovals, ChatSetup, asked
from tests.support.approvals import ended as _ended
from tests.support.approvals import parked as _parked
from tests.support.approvals import start_run as _start
from tests.support.gateway import GatewayProcess
from tests.support.mapped import get_run

SECRET = "tg-webhook-secret_0123456789"
APPROVER = 42
CHAT = "-1001234567890"
CHAT_APPROVALS = ChatSetup(
    TelegramFake,
    "telegram",
    settings={"webhookSecret": SECRET},
    approvals={"via": f"telegram:{CHAT}"},
)


@pytest.fixture(scope="module")
def tg(chat_approvals: ChatApprovals) -> TelegramFake:
    return chat_approvals.fake


@pytest.fixture(scope="module")
def gw(chat_approvals: ChatApprovals) -> GatewayProcess:
    return chat_approvals.gw


def _asked(tg: TelegramFake, run_id: str) -> int:
    """The message id of the request of `run_id`."""
    return int(asked(lambda: tg.sent_messages, run_id, "telegram"))


def _waiting(gw: GatewayProcess, tg: TelegramFake) -> tuple[str, int]:
    """A run waiting for the approval of `t.count`, and the message that asks for it."""
    run_id = _start(gw, "ops", "call t.count {}")
    _parked(gw, run_id)
    return run_id, _asked(tg, run_id)


def _callback(gw: GatewayProcess, update: dict[str, Any], secret: str = SECRET) -> httpx.Response:
    return httpx.post(
        f"{gw.url}/approvals/telegram",
        json=update,
        headers={"X-Telegram-Bot-Api-Secret-Token": secret},
        timeout=30,
    )


def test_an_approvers_click_approves_answers_and_edits_the_message(
    gw: GatewayProcess, tg: TelegramFake
) -> None:
    run_id = _start(gw, "ops", 'call t.echo {"text": "tg"}\ncall t.count {}')
    _parked(gw, run_id)
    message_id = _asked(tg, run_id)
    sent = tg.sent_messages[message_id]
    assert str(sent["chat_id"]) == CHAT and "Approval needed: t.count" in sent["text"]
    buttons = [b["text"] for b in sent["reply_markup"]["inline_keyboard"][0]]
    assert buttons == ["Approve", "Deny"]
    update = tg.click(message_id, "Approve", APPROVER)
    r = _callback(gw, update)
    assert r.status_code == 200 and r.json()["counted"] is True
    run = _ended(gw, run_id)
    assert run["state"] == "succeeded" and [c["tool"] for c in run["toolCalls"]] == [
        "echo",
        "count",
    ]
    approval = run["approvals"][0]
    assert (approval["decidedBy"], approval["via"]) == (f"telegram:{APPROVER}", "telegram")
    query_id = update["callback_query"]["id"]
    assert {"callback_query_id": query_id, "text": "Approved."} in tg.callback_answers
    [edit] = [e for e in tg.edits if e["message_id"] == message_id]
    assert edit["text"].endswith(f"Approved by telegram:{APPROVER}") and "reply_markup" not in edit
    # the same click again (Telegram redelivers, or a double tap): refused, nothing changes
    again = _callback(gw, tg.click(message_id, "Deny", APPROVER))
    assert again.status_code == 200 and again.json()["counted"] is False
    assert tg.callback_answers[-1]["text"] == "Nothing changed: already approved."
    after = get_run(gw, run_id)
    assert after["approvals"][0]["state"] == "approved"
    assert after["refusedDecisions"][-1]["reason"] == "already approved"


def test_a_non_approvers_click_is_refused_and_recorded(
    gw: GatewayProcess, tg: TelegramFake
) -> None:
    run_id, message_id = _waiting(gw, tg)
    r = _callback(gw, tg.click(message_id, "Approve", 999))
    assert r.status_code == 200 and r.json()["counted"] is False
    assert tg.callback_answers[-1]["text"] == "Nothing changed: you are not an approver."
    run = get_run(gw, run_id)
    assert run["state"] == "awaiting_approval" and run["approvals"][0]["state"] == "pending"
    [refusal] = run["refusedDecisions"]
    assert refusal["by"] == "telegram:999" and "not a listed approver" in refusal["reason"]
    # the approver denies: the model is told
    assert _callback(gw, tg.click(message_id, "Deny", APPROVER)).json()["counted"] is True
    run = _ended(gw, run_id)
    assert run["toolCalls"] == [] and f"denied by telegram:{APPROVER} via telegram" in run["reply"]


def test_forged_callbacks_are_refused(gw: GatewayProcess, tg: TelegramFake) -> None:
    run_id, message_id = _waiting(gw, tg)
    update = tg.click(message_id, "Approve", APPROVER)
    wrong = _callback(gw, update, secret="not-the-secret")
    assert wrong.status_code == 401 and wrong.json()["code"] == "unauthorized"
    missing = httpx.post(f"{gw.url}/approvals/telegram", json=update, timeout=30)
    assert missing.status_code == 401
    made_up = dict(update["callback_query"], data="a:" + "x" * 32)
    r = _callback(gw, {"update_id": 1, "callback_query": made_up})
    assert r.status_code == 200 and r.json()["counted"] is False
    assert tg.callback_answers[-1]["text"] == "Nothing changed: unknown or forged approval."
    assert get_run(gw, run_id)["state"] == "awaiting_approval"
    assert SECRET not in gw.stderr()
    token = update["callback_query"]["data"][2:]
    assert token not in gw.stderr()
    assert _callback(gw, update).json()["counted"] is True
    assert _ended(gw, run_id)["state"] == "succeeded"


def test_each_click_is_in_the_audit_log_as_the_clickers_approve_or_deny(
    gw: GatewayProcess, tg: TelegramFake
) -> None:
    run_id, message_id = _waiting(gw, tg)
    update = tg.click(message_id, "Approve", 999)
    assert _callback(gw, update).json()["counted"] is False  # not an approver
    assert _callback(gw, tg.click(message_id, "Deny", APPROVER)).json()["counted"] is True
    assert _callback(gw, tg.click(message_id, "Approve", APPROVER)).json()["counted"] is False
    approval_id = get_run(gw, run_id)["approvals"][0]["approvalId"]
    entries = gw.admin("/api/audit", limit=3)["items"]
    assert [(e["action"], e["actor"], e["via"], e["outcome"], e["code"]) for e in entries] == [
        ("approve", f"telegram:{APPROVER}", "telegram", "refused", "approval_decided"),
        ("deny", f"telegram:{APPROVER}", "telegram", "ok", None),
        ("approve", "telegram:999", "telegram", "refused", "not_an_approver"),
    ]
    for e in entries:
        assert e["targets"] == {"approvalId": approval_id, "runId": run_id}
        assert e["status"] == 200
    denials = gw.admin("/api/audit", action="deny", actor=f"telegram:{APPROVER}")["items"]
    assert [e["targets"]["runId"] for e in denials][:1] == [run_id]
    token = update["callback_query"]["data"][2:]
    assert all(token not in str(e) for e in gw.admin("/api/audit", limit=50)["items"])
