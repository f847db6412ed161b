"""Asking people where they are: approval requests with buttons, and the buttons' callbacks.

`approvals.via: slack:<conversation>` sends each request with `chat.postMessage` and an actions
block of two buttons whose `value` carries the token; Slack POSTs the `block_actions`
interaction (form field `payload`, JSON) to `POST /approvals/slack`, signed with the app's
signing secret (`channels.slack.signingSecret`, checked by the door's `slack` scheme: v0 HMAC of
`v0:<timestamp>:<body>`, five minutes' tolerance); the clicker's `user.id` must be a listed
approver (`slack:<id>`); the message is then updated (`chat.update`) to show the decision.

`approvals.via: telegram:<chat>` sends each request with `sendMessage` and an inline keyboard
(Approve / Deny); each button's `callback_data` carries the approval's single-use token
(`a:<token>` or `d:<token>`, at most 64 bytes). Telegram POSTs the `callback_query` update to
`POST /approvals/telegram`, authenticated by `X-Telegram-Bot-Api-Secret-Token`
(`channels.telegram.webhookSecret`, compared in constant time); the clicker's `from.id` must be
a listed approver (`telegram:<id>`). The click is answered (`answerCallbackQuery`) and, when the
decision counted, the message is edited (`editMessageText`) to show it, without buttons.

Any other channel (`via: <channel>:<to>`): the request is sent as text through the channel, with
a link to the approval's console page signed with the gateway token (`approvals.publicUrl` as
its base). The link never bypasses the console's login: it names one approval, its signature
shows it was issued by this gateway (a forged one is refused and recorded), and the decision is
single use like every other. Without `via`: nothing is sent; the request is listed (admin API,
console, CLI).

The request shows the tool, its arguments (only where payloads are kept; else their digest),
the mapping and run, and the request that started it. The token never reaches a log line.

Asking is retried: a send that fails as the service's trouble (no connection, a timeout, 429,
5xx) is tried again with the one back-off (`ASK_BACKOFF`, honouring `Retry-After`) while the
approval is still pending and before it expires; one the service refuses as ours (another 4xx:
a chat that does not exist, a bot not in it) is not. Each try's outcome is a log line with the
approval's id and `hookwise_approval_asks_total{channel,outcome}` (`sent`, `retried`,
`failed`). The token lives only in this process's memory (only its hash is stored), so a
restart between two tries ends the asking; the approval stays listed (console, API, CLI) and
times out as configured.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
from litestar import Request, Response, post

from ...engine.config.approvals import ApprovalsConfig
from ...engine.config.mapping import VerifyConfig
from ...engine.errors import RequestError
from ...engine.request import InboundRequest
from ...engine.signatures import SignatureError, compile_verifier
from ...plumbing.backoff import Backoff, Retries
from .. import metrics
from ..admin.audit import note, record_as
from ..retry import retry_after_seconds
from ..runtime.approvals import Approvals, link_signature
from ..runtime.approvals import Request as ApprovalRequest
from ..store.approvals import ApprovalRecord, Decided
from ..version import outbound_client
from .base import Channel, DeliveryError

log = logging.getLogger("hookwise.approvals")

MAX_CALLBACK_BODY = 64 * 1024

ASK_BACKOFF = Backoff(base=1.0, cap=60.0)
"""The waits between tries of one approval request (1 s doubling to a minute, jittered)."""


class AskRefused(RuntimeError):
    """The service refused the request as the caller's fault (a 4xx other than 429): another
    try would be refused the same way."""


class AskFailed(RuntimeError):
    """The service could not take the request now (no connection, a timeout, 429, 5xx)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _api_error(
    method: str, r: httpx.Response, detail: Any, retry_after: Any = None
) -> RuntimeError:
    """The error of a refused Web or Bot API call: whether to try again follows the status;
    `retry_after` is a wait the API gave in its body (Telegram's `parameters.retry_after`)."""
    text = f"{method}: HTTP {r.status_code}: {detail}"
    if r.status_code == 429 or r.status_code >= 500:
        after = retry_after_seconds(r.headers.get("retry-after"), now=time.time())
        if isinstance(retry_after, int | float) and not isinstance(retry_after, bool):
            after = float(retry_after)
        return AskFailed(text, after)
    if r.is_success:  # HTTP 200 with `ok: false`: Slack's own refusal of the call
        return AskRefused(text) if detail not in _SLACK_TRANSIENT else AskFailed(text)
    return AskRefused(text)


#: Slack errors of an HTTP 200 answer that are the service's trouble, not the call's
_SLACK_TRANSIENT = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable"}
)


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
        link_secret: str | None = None,
        pending: Callable[[str], Awaitable[bool]] | None = None,
    ) -> None:
        self._channels = channels
        self._pending = pending
        self._via = config.via
        self._public_url = config.public_url
        self._link_secret = link_secret
        self._show = show_arguments
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, request: ApprovalRequest) -> None:
        if self._via is None:
            return
        channel, _, to = self._via.partition(":")
        if channel not in self._channels:
            log.warning(
                "approval %s: approvals.via names the unconfigured channel %s; it is listed only",
                request.approval.approval_id,
                channel,
            )
            return
        send = {"telegram": self._telegram, "slack": self._slack}.get(channel) or (
            lambda r, t: self._linked(r, channel, t)
        )
        coro = self._ask(request, channel, lambda: send(request, to))
        task = asyncio.get_running_loop().create_task(coro)
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
        await telegram_call(cfg, "sendMessage", body)

    async def _linked(self, request: ApprovalRequest, channel: str, to: str) -> None:
        """A channel without buttons: the request as text, with a signed link to its page."""
        a = request.approval
        text = request_text(a, arguments=self._show())
        if self._public_url and self._link_secret:
            sig = link_signature(self._link_secret, a.approval_id)
            base = self._public_url.rstrip("/")
            text += f"\nDecide: {base}/ui/approvals/{a.approval_id}?sig={sig}"
        async with outbound_client(timeout=httpx.Timeout(30.0, connect=10.0)) as client:
            target = self._channels[channel]
            signed = getattr(target, "send_signed", None)
            if signed is not None:  # a signed webhook: the approval's id is its message id
                await signed(client, to, text, msg_id=a.approval_id)
            else:
                await target.send(client, to, text)

    async def _slack(self, request: ApprovalRequest, to: str) -> None:
        cfg: Any = getattr(self._channels["slack"], "config", None)
        a = request.approval
        text = request_text(a, arguments=self._show())
        body = {
            "channel": to.removeprefix("channel:"),
            "text": text,
            "blocks": slack_blocks(text, request.token),
        }
        await slack_call(cfg, "chat.postMessage", body)

    async def _ask(
        self, request: ApprovalRequest, channel: str, send: Callable[[], Awaitable[None]]
    ) -> None:
        """`send` until it succeeds, is refused as ours, the approval is decided or it would
        expire before the next try (module docstring)."""
        a = request.approval
        retries = Retries(ASK_BACKOFF, random.random)
        while True:
            try:
                await send()
            except DeliveryError as e:  # a channel's own send (`_linked`): its classification
                failure: Exception = (
                    AskFailed(str(e), e.retry_after) if e.retryable else AskRefused(str(e))
                )
            except Exception as e:  # the service's trouble, or the network's
                failure = e
            else:
                metrics.approval_ask(channel, "sent")
                log.info("approval %s: asked on %s", a.approval_id, channel)
                return
            if isinstance(failure, AskRefused):
                metrics.approval_ask(channel, "failed")
                log.error(
                    "approval %s: asking on %s was refused: %s", a.approval_id, channel, failure
                )
                return
            wait = retries.next(getattr(failure, "retry_after", None))
            if time.time() + wait >= a.expires_at:
                metrics.approval_ask(channel, "failed")
                log.error(
                    "approval %s: asking on %s failed %d time(s), the last: %s; given up: the"
                    " approval expires before another try",
                    a.approval_id,
                    channel,
                    retries.count,
                    _reason(failure),
                )
                return
            metrics.approval_ask(channel, "retried")
            log.warning(
                "approval %s: asking on %s failed: %s; trying again in %.1fs",
                a.approval_id,
                channel,
                _reason(failure),
                wait,
            )
            await asyncio.sleep(wait)
            if self._pending is not None and not await self._still_pending(a.approval_id):
                log.info("approval %s: decided meanwhile; not asked again", a.approval_id)
                return

    async def _still_pending(self, approval_id: str) -> bool:
        assert self._pending is not None
        try:
            return await self._pending(approval_id)
        except Exception:  # the store unreachable: keep asking (the decision is checked anyway)
            return True


def _reason(e: BaseException) -> str:
    """What failed, for a log line: the API's answer, or the network error's class."""
    if isinstance(e, AskFailed | AskRefused):
        return str(e)
    return type(e).__name__


def slack_blocks(text: str, token: str | None) -> list[dict[str, Any]]:
    """The request as Block Kit: its text, and (while it waits) Approve and Deny buttons."""
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "plain_text", "text": text[:3000]}}
    ]
    if token is not None:
        blocks.append(
            {
                "type": "actions",
                "block_id": "hookwise_approval",
                "elements": [
                    {
                        "type": "button",
                        "action_id": "approve",
                        "style": "primary",
                        "text": {"type": "plain_text", "text": "Approve"},
                        "value": f"a:{token}",
                    },
                    {
                        "type": "button",
                        "action_id": "deny",
                        "style": "danger",
                        "text": {"type": "plain_text", "text": "Deny"},
                        "value": f"d:{token}",
                    },
                ],
            }
        )
    return blocks


async def slack_call(cfg: Any, method: str, body: dict[str, Any]) -> dict[str, Any]:
    """One Web API call (JSON, bot token); the answer, or an error naming Slack's code."""
    async with outbound_client(timeout=httpx.Timeout(15.0, connect=5.0)) as client:
        r = await client.post(
            f"{cfg.base_url}/{method}",
            json=body,
            headers={
                "Authorization": f"Bearer {cfg.bot_token}",
                "Content-Type": "application/json; charset=utf-8",
            },
        )
    data = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
    if not r.is_success or not isinstance(data, dict) or not data.get("ok"):
        code = data.get("error", "") if isinstance(data, dict) else ""
        raise _api_error(method, r, code)
    return data


async def telegram_call(cfg: Any, method: str, body: dict[str, Any]) -> dict[str, Any]:
    """One Bot API call; its `result`, or an error naming Telegram's description."""
    async with outbound_client(timeout=httpx.Timeout(15.0, connect=5.0)) as client:
        r = await client.post(f"{cfg.base_url}/bot{cfg.bot_token}/{method}", json=body)
    data = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
    if not r.is_success or not isinstance(data, dict) or not data.get("ok"):
        detail = data.get("description", "") if isinstance(data, dict) else ""
        params = data.get("parameters") if isinstance(data, dict) else None
        after = params.get("retry_after") if isinstance(params, dict) else None
        raise _api_error(method, r, detail, after)
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
    _, why = _audit_decision(request, approvals, decided, approve, "telegram", user_id)
    if not decided.counted:
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


def _slack_verified(cfg: Any, request: Request[Any, Any, Any], raw: bytes) -> bool:
    """The door's `slack` scheme over the raw body (the signature and its timestamp)."""
    if cfg is None or not cfg.signing_secret:
        return False
    verifier = compile_verifier(
        VerifyConfig(scheme="slack", secret=cfg.signing_secret), Path("."), "channels.slack"
    )
    inbound = InboundRequest(
        path="approvals/slack",
        payload={},
        headers={k.lower(): v for k, v in request.headers.items()},
        raw_body=raw,
        now=datetime.now(UTC),
    )
    try:
        verifier.verify(inbound)
    except SignatureError:
        return False
    return True


@post("/approvals/slack", status_code=200, include_in_schema=False)
async def slack_interaction(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Slack's `block_actions` interaction of an approval button (see the module)."""
    gateway = request.app.state.gateway
    cfg: Any = getattr(gateway.channels.get("slack"), "config", None)
    approvals: Approvals = gateway.runtime.approvals
    raw = await request.body()
    if len(raw) > MAX_CALLBACK_BODY:
        raise RequestError(413, "body_too_large", "the interaction is too large")
    if not _slack_verified(cfg, request, raw):
        await approvals.refuse_unauthenticated("slack")
        raise RequestError(401, "unauthorized", "the interaction's Slack signature is not valid")
    form = parse_qs(raw.decode("utf-8", "replace"))
    try:
        payload = json.loads(form.get("payload", [""])[0])
    except ValueError:
        raise RequestError(400, "invalid_json", "the interaction's payload is not JSON") from None
    empty = Response(b"", status_code=200)
    if not isinstance(payload, dict) or payload.get("type") != "block_actions":
        return empty
    user: dict[str, Any] = payload["user"] if isinstance(payload.get("user"), dict) else {}
    user_id = str(user.get("id", ""))
    actions = payload.get("actions") if isinstance(payload.get("actions"), list) else []
    action: dict[str, Any] = actions[0] if actions and isinstance(actions[0], dict) else {}
    value = action.get("value")
    if not isinstance(value, str) or value[:2] not in ("a:", "d:") or not user_id:
        return empty
    approve = value.startswith("a:")
    decided = await approvals.decide(
        approve=approve,
        by=f"slack:{user_id}",
        via="slack",
        token=value[2:],
        approver=("slack", user_id),
    )
    a = decided.approval
    _audit_decision(request, approvals, decided, approve, "slack", user_id)
    channel: dict[str, Any] = payload["channel"] if isinstance(payload.get("channel"), dict) else {}
    message: dict[str, Any] = payload["message"] if isinstance(payload.get("message"), dict) else {}
    if decided.counted and a is not None and "id" in channel and "ts" in message:
        word = "Approved" if approve else "Denied"
        text = f"{request_text(a, arguments=approvals.show_arguments)}\n\n{word} by slack:{user_id}"
        try:
            await slack_call(
                cfg,
                "chat.update",
                {
                    "channel": channel["id"],
                    "ts": message["ts"],
                    "text": text,
                    "blocks": slack_blocks(text, None),
                },
            )
        except Exception as e:
            log.warning("approval %s: updating the slack message failed: %s", a.approval_id, e)
    return empty


def _audit_decision(
    request: Request[Any, Any, Any],
    approvals: Approvals,
    decided: Decided,
    approve: bool,
    channel: str,
    user_id: str,
) -> tuple[str | None, str]:
    """Name a button's decision in the audit log (`approve` or `deny` by `<channel>:<user>`,
    refused with the API's code when it did not count); the code and why, for the answer."""
    a = decided.approval
    code: str | None = None
    why = ""
    if not decided.counted:
        code, why = "approval_expired", "too late: it expired"
        if a is None:
            code, why = "approval_not_found", "unknown or forged approval"
        elif not approvals.config.approves(channel, user_id):
            code, why = "not_an_approver", "you are not an approver"
        elif a.state != "pending":
            code, why = "approval_decided", f"already {a.state.replace('_', ' ')}"
    if a is not None:
        note(request, approvalId=a.approval_id, runId=a.run_id)
    record_as(
        request,
        action="approve" if approve else "deny",
        actor=f"{channel}:{user_id}",
        via=channel,
        outcome=None if decided.counted else "refused",
        code=code,
    )
    return code, why


async def _answer(cfg: Any, query: dict[str, Any], text: str) -> None:
    try:
        await telegram_call(
            cfg,
            "answerCallbackQuery",
            {"callback_query_id": str(query.get("id", "")), "text": text},
        )
    except Exception as e:
        log.warning("answering a telegram callback failed: %s", e)
