"""Asking for an approval is retried, through HTTP against the fake Bot API: a request that meets
Telegram's 5xx or 429 is sent again with the back-off (the message that finally arrives carries a
token that works), one Telegram refuses as ours (`chat not found`) is not, and one decided while
waiting to be tried again is not sent again. Each try is a log line with the approval's id and a
sample of `hookwise_approval_asks_total{channel,outcome}`."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.fakes.chat_fakes import TelegramFake
from tests.http.test_approvals import _decide
from tests.http.test_operate import sample, scrape
from tests.support.approvals import ChatApprovals, ChatSetup
from tests.support.approvals import ended as _ended
from tests.support.approvals import parked as _parked
from tests.support.approvals import start_run as _start
from tests.support.gateway import GatewayProcess
from tests.support.mapped import get_run
from tests.support.wait import eventually

SECRET = "tg-webhook-secret_0123456789"
APPROVER = 42
CHAT = "-1001234567890"


@pytest.fixture(scope="module")
def store_kind() -> str:
    """Asking reads the store once per retry (is it still pending?): either store will do."""
    return "sqlite"


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


def _tries(tg: TelegramFake, run_id: str) -> int:
    """The `sendMessage` requests (answered or not) that asked about `run_id`."""
    return sum(
        1
        for r in list(tg.requests)
        if r.path.endswith("/sendMessage") and f"run {run_id}" in r.json.get("text", "")
    )


def _asks(gw: GatewayProcess, outcome: str) -> float:
    return (
        sample(scrape(gw), "hookwise_approval_asks_total", channel="telegram", outcome=outcome)
        or 0.0
    )


def _approval_id(gw: GatewayProcess, run_id: str) -> str:
    return str(get_run(gw, run_id)["approvals"][0]["approvalId"])


def test_a_request_that_meets_server_errors_is_sent_again_and_its_buttons_work(
    gw: GatewayProcess, tg: TelegramFake
) -> None:
    retried, sent = _asks(gw, "retried"), _asks(gw, "sent")
    tg.fail(times=2)
    run_id = _start(gw, "ops", "call t.count {}")
    _parked(gw, run_id)
    message_id = eventually(
        lambda: next(
            (i for i, b in tg.sent_messages.items() if f"run {run_id}" in b["text"]), None
        ),
        timeout=30,
        what="the request delivered on the third try",
    )
    assert _tries(tg, run_id) == 3
    assert _asks(gw, "retried") == retried + 2 and _asks(gw, "sent") == sent + 1
    approval_id = _approval_id(gw, run_id)
    assert (
        f"approval {approval_id}: asking on telegram failed: sendMessage: HTTP 500" in gw.stderr()
    )
    # the token of the message that finally arrived decides
    r = httpx.post(
        f"{gw.url}/approvals/telegram",
        json=tg.click(int(message_id), "Approve", APPROVER),
        headers={"X-Telegram-Bot-Api-Secret-Token": SECRET},
        timeout=30,
    )
    assert r.status_code == 200 and r.json()["counted"] is True
    assert _ended(gw, run_id)["state"] == "succeeded"


def test_a_request_telegram_refuses_as_ours_is_not_sent_again(
    gw: GatewayProcess, tg: TelegramFake
) -> None:
    failed = _asks(gw, "failed")
    tg.missing.add(CHAT)
    try:
        run_id = _start(gw, "ops", "call t.count {}")
        _parked(gw, run_id)
        eventually(lambda: _asks(gw, "failed") == failed + 1, what="the refused request counted")
    finally:
        tg.missing.discard(CHAT)
    approval_id = _approval_id(gw, run_id)
    assert (
        f"approval {approval_id}: asking on telegram was refused: sendMessage: HTTP 400:"
        " Bad Request: chat not found" in gw.stderr()
    )
    time.sleep(2.5)  # past the first two waits of the back-off: nothing more is sent
    assert _tries(tg, run_id) == 1
    # still listed and decided elsewhere
    assert _decide(gw, approval_id, "deny").status_code == 200
    assert _ended(gw, run_id)["state"] == "succeeded"


def test_a_request_decided_while_it_waits_to_be_tried_again_is_not_sent_again(
    gw: GatewayProcess, tg: TelegramFake
) -> None:
    tg.rate_limit(times=1, retry_after=3)
    run_id = _start(gw, "ops", "call t.count {}")
    _parked(gw, run_id)
    eventually(lambda: _tries(tg, run_id) == 1, what="the first, rate-limited, try")
    approval_id = _approval_id(gw, run_id)
    assert _decide(gw, approval_id, "approve").status_code == 200
    eventually(
        lambda: f"approval {approval_id}: decided meanwhile; not asked again" in gw.stderr(),
        timeout=30,
        what="the asker to notice the decision after Telegram's retry_after",
    )
    assert _tries(tg, run_id) == 1
    assert "trying again in 3.0s" in gw.stderr()
