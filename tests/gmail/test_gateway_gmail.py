"""The mail watcher inside `hookwise serve`: new mail -> the gmail preset -> one run per message."""

from __future__ import annotations

import pytest

from tests.gmail import gmail_mails
from tests.gmail.conftest import ACCOUNT, PASSWORD, Dovecot
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN
from tests.support.wait import eventually


@pytest.fixture
def gateway_with_mail(start_gateway, dovecot: Dovecot):
    config = {
        "hooks": {
            "enabled": True,
            "token": HOOK_TOKEN,
            "presets": ["gmail"],
            "gmail": {
                "account": ACCOUNT,
                "imapHost": dovecot.host,
                "imapPort": dovecot.port,
                "tls": "none",
                "password": PASSWORD,
                "timeoutSeconds": 10,
                "reconnectMinSeconds": 0.1,
                "reconnectMaxSeconds": 0.5,
                "retryMinSeconds": 0.1,
                "retryMaxSeconds": 0.5,
            },
        },
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {"defaults": {"heartbeat": {"every": 0}}},
    }
    return start_gateway(config)


def _gmail_runs(gw) -> list[dict]:
    return [r for r in gw.admin("/api/runs", limit=100)["items"] if r["rule"] == "gmail"]


def test_new_mail_becomes_an_agent_run_through_the_preset(
    gateway_with_mail, dovecot: Dovecot
) -> None:
    gw = gateway_with_mail
    # the watcher starts after the newest message: wait until it is connected, then deliver
    eventually(lambda: "gmail: connected" in gw.stderr(), timeout=20, what="the watcher to connect")
    dovecot.append(gmail_mails.plain(7, subject="Invoice overdue", body="Please pay invoice 7.\n"))
    [run] = eventually(lambda: _gmail_runs(gw), timeout=30, what="the run for the new mail")
    assert run["name"] == "Gmail"
    assert run["sessionKey"].startswith("hook:gmail:")
    full = gw.admin(f"/api/runs/{run['runId']}")["run"]
    assert full["state"] in ("queued", "running", "succeeded")
    requests = gw.admin("/api/requests")["items"]
    assert any(r["path"] == "/hooks/gmail" and r["status"] == 202 for r in requests)


def test_a_restarted_gateway_does_not_post_old_mail_again(
    gateway_with_mail, dovecot: Dovecot
) -> None:
    gw = gateway_with_mail
    eventually(lambda: "gmail: connected" in gw.stderr(), timeout=20)
    dovecot.append(gmail_mails.plain(8))
    eventually(lambda: _gmail_runs(gw), timeout=30)
    gw.restart()
    eventually(lambda: gw.stderr().count("gmail: connected") >= 2, timeout=20)
    dovecot.append(gmail_mails.plain(9))
    eventually(lambda: len(_gmail_runs(gw)) >= 2, timeout=30)
    assert len(_gmail_runs(gw)) == 2
    assert PASSWORD not in gw.stderr()


def test_with_several_workers_exactly_one_watcher_runs(start_gateway, dovecot: Dovecot) -> None:
    config = {
        "hooks": {
            "enabled": True,
            "token": HOOK_TOKEN,
            "presets": ["gmail"],
            "gmail": {
                "account": ACCOUNT,
                "imapHost": dovecot.host,
                "imapPort": dovecot.port,
                "tls": "none",
                "password": PASSWORD,
                "timeoutSeconds": 10,
                "reconnectMinSeconds": 0.1,
                "reconnectMaxSeconds": 0.5,
                "retryMinSeconds": 0.1,
                "retryMaxSeconds": 0.5,
            },
        },
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {"defaults": {"heartbeat": {"every": 0}}},
    }
    gw = start_gateway(config, extra_args=["--workers", "3"])
    eventually(lambda: "gmail: connected" in gw.stderr(), timeout=30, what="a watcher to connect")
    dovecot.append(gmail_mails.plain(11, subject="Only once"))
    eventually(lambda: _gmail_runs(gw), timeout=30, what="the run for the new mail")
    eventually(lambda: gw.stderr().count("runs the mail watcher") >= 1, timeout=5)
    assert gw.stderr().count("gmail: connected") == 1
    assert gw.stderr().count("runs the mail watcher") == 1
    assert len(_gmail_runs(gw)) == 1
    posts = [r for r in gw.admin("/api/requests")["items"] if r["path"] == "/hooks/gmail"]
    assert len(posts) == 1
