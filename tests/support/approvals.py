"""Tool calls that wait for a person, as the approvals tests set them up.

`config()` is a gateway whose MCP server `t` (tests/fakes/mcp_server.py) offers `t.echo` freely
and `t.count` only with a person's approval; `start_run`, `parked` and `ended` start a run
through a hook and wait for it to wait for approval or to end. `chat_approvals` is the set-up
the chat services' approval tests share (tests/http/test_approvals_telegram.py, _slack.py): the
module's fake of the service started, and one gateway per module whose approvals are asked
there. A test module names its service in `CHAT_APPROVALS` (a `ChatSetup`) and takes the fixture
(it is registered in tests/conftest.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.mapped import get_run
from tests.support.wait import eventually

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def config(timeout: str = "1h") -> dict[str, Any]:
    """Hooks `ops` (t.echo free, t.count approved), `serial` (one session) and `globbed`
    (`approve: [t.ec*]`); approvals by `telegram:42`, timing out after `timeout`."""
    from tests.fakes.mcp_server import stdio_command  # (it imports the MCP SDK: not in conftest)

    mapping = {"match": {"path": "ops"}, "messageTemplate": "{{text}}", "id": "ops"}
    return {
        "hooks": {
            "enabled": True,
            "token": HOOK_TOKEN,
            "mappings": [
                {**mapping, "tools": ["t.echo", {"tool": "t.count", "approve": True}]},
                {
                    **mapping,
                    "id": "serial",
                    "match": {"path": "serial"},
                    "sessionKey": "hook:serial",
                    "tools": [{"tool": "t.count", "approve": True}],
                },
                {
                    **mapping,
                    "id": "globbed",
                    "match": {"path": "globbed"},
                    "tools": ["t.*"],
                    "approve": ["t.ec*"],
                },
            ],
        },
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "tools": {"mcpServers": {"t": stdio_command()}},
        "approvals": {"approvers": ["telegram:42"], "timeout": timeout},
    }


def start_run(gw: GatewayProcess, path: str, text: str) -> str:
    """POST `text` to the hook `path`; the run's id."""
    r = gw.hook(path, {"text": text})
    assert r.status_code == 202, r.text
    return str(r.json()["runId"])


def parked(gw: GatewayProcess, run_id: str) -> dict[str, Any]:
    """The run, once it waits for approval."""
    return eventually(
        lambda: (run := get_run(gw, run_id))["state"] == "awaiting_approval" and run,
        timeout=60,
        what=f"run {run_id} to wait for approval",
    )


def ended(gw: GatewayProcess, run_id: str) -> dict[str, Any]:
    """The run, once it neither waits nor runs."""
    return eventually(
        lambda: (
            (run := get_run(gw, run_id))["state"] not in ("queued", "running", "awaiting_approval")
            and run
        ),
        timeout=60,
        what=f"run {run_id} to end",
    )


def asked(sent: Callable[[], Mapping[Any, dict[str, Any]]], run_id: str, where: str) -> Any:
    """The id of the message (among `sent()`, the bot's messages by id) that asked for the
    approval of `run_id`."""
    return eventually(
        lambda: next((i for i, b in sent().items() if f"run {run_id}" in b["text"]), None),
        what=f"the approval request of run {run_id} on {where}",
    )


@dataclass(frozen=True)
class ChatSetup:
    """Where a test module's approvals are asked: the chat service's fake (a class of
    tests/fakes/chat_fakes.py), the channel's settings beside the fake's own and the
    `approvals` keys set."""

    fake: Callable[[], Any]
    channel: str
    settings: dict[str, Any] = field(default_factory=dict)
    approvals: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ChatApprovals:
    """The started fake and the gateway whose approvals it is asked."""

    fake: Any
    gw: GatewayProcess


@pytest.fixture(scope="module")
def chat_approvals(
    request: pytest.FixtureRequest, start_module_gateway: Callable[..., GatewayProcess]
) -> Iterator[ChatApprovals]:
    """The test module's chat service (its `CHAT_APPROVALS`) and one gateway for its tests."""
    setup: ChatSetup = request.module.CHAT_APPROVALS
    fake = setup.fake().start()
    try:
        cfg = config()
        cfg["channels"] = {setup.channel: {**fake.config(), **setup.settings}}
        cfg["approvals"].update(setup.approvals)
        gw = start_module_gateway(cfg, name=f"approvals-{setup.channel}")
        yield ChatApprovals(fake, gw)
    finally:
        fake.stop()
