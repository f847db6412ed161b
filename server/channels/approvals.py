"""Asking people where they are: approval requests with buttons, and the buttons' callbacks.

`approvals.via: telegram:<chat>` sends each request with `sendMessage` and an inline keyboard
(Approve / Deny); each button's `callback_data` carries the approval's single-use token
(`a:<token>` or `d:<token>`, at most 64 bytes). Telegram POSTs the `callback_query` update to
`POST /approvals/telegram`, authenticated by `X-Telegram-Bot-Api-Secret-Token`
(`channels.telegram.webhookSecret`, compared in constant time); the clicker's `from.id` must be
a listed approver (`telegram:<id>`). The click is answered (`answerCallbackQuery`) and, when the
decision counted, the message is edited (`editMessageText`) to show it, without buttons.

Any other `via`: nothing is sent; the request is listed (admin API, console, CLI).

The request shows the tool, its arguments (only where payloads are kept; else their digest),
the mapping and run, and the request that started it. The token never reaches a log line.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

import httpx
from litestar import Request, post

from ...engine.config.approvals import ApprovalsConfig
from ...engine.errors import RequestError
from ..runtime.approvals import Approvals
from ..runtime.approvals import Request as ApprovalRequest
from ..store.approvals import ApprovalRecord
from ..version import outbound_client
from .base import Channel

log = logging.getLogger("hookwise.approvals")

MAX_CALLBACK_BODY = 64 * 1024


def request_text(a: ApprovalRecord, *, arguments: bool) -> str:
    """The request as people read it (plain text)."""
    args = a.arguments if arguments else f"(not kept; {a.arguments_digest})"
    return "\n".join(
        [
            f"Approval needed: {a.server}.{a.tool}",
            f"Arguments: {args}",
            f"Mapping: {a.rule_id or 'direct'} · agent {a.agent_id or '-'} · run {a.run_id}",
            f"Request: {a.sender or '-'} · signature verified: {'yes' if a.verified else 'no'}",
        ]
    )


class ChannelAsker:
    """Sends approval requests to `approvals.via` (Telegram), in the background; a failure is a
    log line with the approval's id (the request stays listed for the console and the API)."""

    def __init__(
        self,
        channels: Mapping[str, Channel],
        config: ApprovalsConfig,
        show_arguments: Callable[[], bool],
    ) -> None:
        self._channels = channels
        self._via = config.via
        self._show = show_arguments
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, request: ApprovalRequest) -> None:
        if self._via is None:
            return
        channel, _, to = self._via.partition(":")
        if channel != "telegram" or "telegram" not in self._channels:
            log.warning(
                "approval %s: approvals.via %s cannot ask with buttons; it is listed only",
                request.approval.approval_id,
                channel,
            )
            return
        task = asyncio.get_running_loop().create_task(self._telegram(request, to))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _telegram(self, request: ApprovalRequest, to: str) -> None:
        cfg: Any = getattr(self._channels["telegram"], "config", None)
        a = request.approval
        body = {
            "chat_id": to,
            "text": request_text(a, arguments=self._show()),
            "reply_markup": {
                "inline_keyboard": [
                    [
                        {"text": "Approve", "callback_data": f"a:{request.token}"},
                        {"text": "Deny", "callback_data": f"d:{request.token}"},
                    ]
                ]
            },
        }
        try:
            await telegram_call(cfg, "sendMessage", body)
            log.info("approval %s: asked on telegram", a.approval_id)
        except Exception as e:
            log.error("approval %s: asking on telegram failed: %s", a.approval_id, e)


async def telegram_call(cfg: Any, method: str, body: dict[str, Any]) -> dict[str, Any]:
    """One Bot API call; its `result`, or an error naming Telegram's description."""
    async with outbound_client(timeout=httpx.Timeout(15.0, connect=5.0)) as client:
        r = await client.post(f"{cfg.base_url}/bot{cfg.bot_token}/{method}", json=body)
    data = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
    if not r.is_success or not data.get("ok"):
        raise RuntimeError(f"{method}: HTTP {r.status_code}: {data.get('description', '')}")
    result = data.get("result")
    return result if isinstance(result, dict) else {}


def _secret_ok(expected: str | None, presented: str | None) -> bool:
    if not expected or presented is None:
        return False
    return hmac.compare_digest(expected.encode(), presented.encode())


@post("/approvals/telegram", status_code=200, include_in_schema=False)
async def telegram_callback(request: Request[Any, Any, Any]) -> dict[str, Any]:
    """Telegram's `callback_query` of an approval button (see the module)."""
    gateway = request.app.state.gateway
    channel = gateway.channels.get("telegram")
    cfg: Any = getattr(channel, "config", None)
    approvals: Approvals = gateway.runtime.approvals
    presented = request.headers.get("x-telegram-bot-api-secret-token")
    if cfg is None or not _secret_ok(cfg.webhook_secret, presented):
        await approvals.refuse_unauthenticated("telegram")
        raise RequestError(
            401, "unauthorized", "the callback's X-Telegram-Bot-Api-Secret-Token is wrong"
        )
    raw = await request.body()
    if len(raw) > MAX_CALLBACK_BODY:
        raise RequestError(413, "body_too_large", "the update is too large")
    try:
        update = json.loads(raw)
    except ValueError:
        raise RequestError(400, "invalid_json", "the update is not JSON") from None
    query = update.get("callback_query") if isinstance(update, dict) else None
    if not isinstance(query, dict):
        return {"ok": True, "ignored": "not a callback_query"}
    sender: dict[str, Any] = query["from"] if isinstance(query.get("from"), dict) else {}
    user_id = str(sender.get("id", ""))
    data = query.get("data")
    if not isinstance(data, str) or data[:2] not in ("a:", "d:") or not user_id:
        await _answer(cfg, query, "This button is not an approval.")
        return {"ok": True, "ignored": "not an approval button"}
    approve = data.startswith("a:")
    decided = await approvals.decide(
        approve=approve,
        by=f"telegram:{user_id}",
        via="telegram",
        token=data[2:],
        approver=("telegram", user_id),
    )
    a = decided.approval
    if not decided.counted:
        why = "not counted"
        if a is None:
            why = "unknown or forged approval"
        elif not approvals.config.approves("telegram", user_id):
            why = "you are not an approver"
        elif a.state != "pending":
            why = f"already {a.state.replace('_', ' ')}"
        else:
            why = "too late: it expired"
        await _answer(cfg, query, f"Nothing changed: {why}.")
        return {"ok": True, "counted": False}
    assert a is not None
    word = "Approved" if approve else "Denied"
    await _answer(cfg, query, f"{word}.")
    message: dict[str, Any] = query["message"] if isinstance(query.get("message"), dict) else {}
    chat: dict[str, Any] = message["chat"] if isinstance(message.get("chat"), dict) else {}
    if "message_id" in message and "id" in chat:
        shown = request_text(a, arguments=approvals.show_arguments)
        try:
            await telegram_call(
                cfg,
                "editMessageText",
                {
                    "chat_id": chat["id"],
                    "message_id": message["message_id"],
                    "text": f"{shown}\n\n{word} by telegram:{user_id}",
                },
            )
        except Exception as e:
            log.warning("approval %s: editing the telegram message failed: %s", a.approval_id, e)
    return {"ok": True, "counted": True}


async def _answer(cfg: Any, query: dict[str, Any], text: str) -> None:
    try:
        await telegram_call(
            cfg,
            "answerCallbackQuery",
            {"callback_query_id": str(query.get("id", "")), "text": text},
        )
    except Exception as e:
        log.warning("answering a telegram callback failed: %s", e)
