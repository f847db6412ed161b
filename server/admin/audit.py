"""The audit log: every operator action recorded, and `GET /api/audit` to read it.

`AuditMiddleware` watches the routes that act: those whose options name an audit action
(`opt=requires("operate", audit="retry")`, see `admin.scopes`) and every route that is not a
read (a new POST route is audited under its path until it names its action; `audit=False`
opts out, for a POST that only computes, like the console's rule test). For each it records,
before the end of the response reaches the client, who (the principal's token name; the
console's login's), when, the client address (`scope["client"]`, as the trusted proxies resolved
it), the action, what it touched (`targets`: the route's path parameters, plus what the
handler noted with `note()`, e.g. a pause's mapping), and the outcome: `ok` (below 400),
`refused` (401, 403, 429: no or a wrong token, a scope lacked, a CSRF check, a locked-out
login) or `failed` (the action answered an error), with the error's stable code. Never a
payload, a header or a token.

A route that no admin token opens but that carries an operator's decision (a chat service's
approval button: `channels.approvals`) names the action, the actor (the clicker, `telegram:42`),
the channel it came through (`via`) and, when its answer's status does not tell it, the outcome
and code, with `record_as()`.

Each entry is written by `auditing.write`: a log line, the store's row and a count; a write
that fails is logged and counted as `lost`, and never fails the action, which already happened.
Refusals without a known token cost a store write each, so that a flood of guesses cannot turn
into a flood of writes, at most `ANONYMOUS_PER_MINUTE` of them are recorded per client address
and minute; the rest are counted (`outcome="suppressed"`) and the first of them logged.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections import OrderedDict
from typing import Any

from litestar import Controller, Request, get
from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from ...engine.config.convert import camel
from .. import metrics
from ..auditing import log, log_fields, write
from ..store.audit import OUTCOMES, AuditRecord
from .api import admin_guard, store_of
from .models import Answer, Model, iso
from .query import CURSOR, LIMIT, SINCE, UNTIL, check_choice, filters, text_parameter
from .scopes import READ_METHODS, principal_of

#: where a handler's notes on what it touched are kept in the ASGI scope's state
NOTES = "hookwise_audit_targets"
#: where a handler that renders its refusal (the console) leaves the error's code
CODE = "hookwise_audit_code"
#: where a route without an admin token names its action, actor, channel and outcome
AS = "hookwise_audit_as"
MAX_TARGET = 200
MAX_TARGETS = 8
_MAX_ERROR_BODY = 4096
#: refusals without a known token recorded per client address and minute (the rest counted)
ANONYMOUS_PER_MINUTE = 20


class _AnonymousBudget:
    """How many refusals without a known token each client address may still have recorded in
    the current minute (memory bounded: the least recently seen addresses are forgotten)."""

    def __init__(self, per_minute: int, max_clients: int = 10_000) -> None:
        self._per_minute = per_minute
        self._max_clients = max_clients
        self._seen: OrderedDict[str, tuple[float, int]] = OrderedDict()

    def take(self, client: str, now: float) -> int:
        """Count one refusal of `client`; how many it had in this minute, this one included."""
        start, count = self._seen.pop(client, (now, 0))
        if now - start >= 60.0:
            start, count = now, 0
        self._seen[client] = (start, count + 1)
        if len(self._seen) > self._max_clients:
            self._seen.popitem(last=False)
        return count + 1


def note(request: Request[Any, Any, Any], **targets: object) -> None:
    """Add what the action touched (ids, names; never a payload) to its audit entry."""
    notes = request.scope.setdefault("state", {}).setdefault(NOTES, {})
    for key, value in targets.items():
        if value is not None:
            notes[key] = value


def record_as(
    request: Request[Any, Any, Any],
    *,
    action: str,
    actor: str,
    via: str,
    outcome: str | None = None,
    code: str | None = None,
) -> None:
    """Name the operator action of a route no admin token opens (a chat's approval button):
    `actor` who acted as the route verified it, `via` the channel; `outcome` (`ok`, `refused`,
    `failed`) and `code` when the answer's status does not tell them (a click answered 200 that
    did not count)."""
    named = {"action": action, "actor": actor[:100], "via": via, "outcome": outcome, "code": code}
    request.scope.setdefault("state", {})[AS] = {k: v for k, v in named.items() if v is not None}


def note_code(scope: Scope, code: str) -> None:
    scope.setdefault("state", {})[CODE] = code


def _targets(scope: Scope) -> dict[str, str]:
    found: dict[str, Any] = {camel(k): v for k, v in scope.get("path_params", {}).items()}
    found.update(scope.get("state", {}).get(NOTES, {}))
    out: dict[str, str] = {}
    for key, value in list(found.items())[:MAX_TARGETS]:
        out[str(key)[:40]] = str(value)[:MAX_TARGET]
    return out


def _outcome(status: int) -> str:
    if status < 400:
        return "ok"
    return "refused" if status in (401, 403, 429) else "failed"


def _code(scope: Scope, status: int, body: bytes) -> str | None:
    noted = scope.get("state", {}).get(CODE)
    if isinstance(noted, str):
        return noted
    if status < 400 or not body:
        return None
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    code = parsed.get("code") if isinstance(parsed, dict) else None
    return code[:64] if isinstance(code, str) else None


def action_of(scope: Scope) -> str | None:
    """The audit action of the route `scope` reached, or None when it is not audited."""
    handler = scope.get("route_handler")
    if handler is None:
        return None
    declared = handler.opt.get("audit")
    if declared is False:
        return None
    if isinstance(declared, str):
        return declared
    if scope.get("method", "GET") in READ_METHODS:
        return None
    return f"{scope.get('method')} {scope.get('path_template') or scope.get('path')}"


class AuditMiddleware(ASGIMiddleware):
    """Records the operator actions of the admin API and the console (see the module)."""

    scopes = (ScopeType.HTTP,)

    def __init__(self, anonymous_per_minute: int = ANONYMOUS_PER_MINUTE) -> None:
        self._anonymous = _AnonymousBudget(anonymous_per_minute)
        self._anonymous_limit = anonymous_per_minute

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        action = action_of(scope)
        if action is None:
            await next_app(scope, receive, send)
            return
        status = 500
        body = bytearray()
        recorded = False

        async def watch(message: Message) -> None:
            nonlocal status, recorded
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body" and not recorded:
                if status >= 400 and len(body) < _MAX_ERROR_BODY:
                    body.extend(message.get("body", b"")[:_MAX_ERROR_BODY])
                if not message.get("more_body", False):
                    recorded = True  # before the client sees the end of the answer
                    await self._record(scope, action, status, bytes(body))
            await send(message)

        try:
            await next_app(scope, receive, watch)
        finally:
            if not recorded:  # the handler died before answering (the client went away...)
                await self._record(scope, action, status, b"")

    async def _record(self, scope: Scope, action: str, status: int, body: bytes) -> None:
        principal = principal_of(scope)
        named: dict[str, str] = scope.get("state", {}).get(AS, {})
        client = scope.get("client")
        entry = AuditRecord(
            at=time.time(),
            actor=named.get("actor") or (principal.name if principal else "-"),
            via=named.get("via")
            or ("console" if scope.get("path", "").startswith("/ui") else "api"),
            client=str(client[0]) if client else "unknown",
            action=named.get("action") or action,
            targets=_targets(scope),
            outcome=named.get("outcome") or _outcome(status),
            status=status,
            code=named.get("code") or _code(scope, status, body),
        )
        if principal is None and "actor" not in named and entry.outcome == "refused":
            n = self._anonymous.take(entry.client, entry.at)
            if n > self._anonymous_limit:
                metrics.audited(entry.action, "suppressed")
                if n == self._anonymous_limit + 1:
                    log.warning(
                        "audit: more than %d refusals without a known token from %s this minute;"
                        " the rest of the minute's are counted, not recorded",
                        self._anonymous_limit,
                        entry.client,
                        extra=log_fields(entry),
                    )
                return
        await write(scope["app"].state.gateway.store, entry)


# --- GET /api/audit ---------------------------------------------------------------------------


class AuditEntry(Model, kw_only=True):
    """One operator action: `actor` is the name of the token used (`-` when none matched; the
    clicker, `telegram:42`, for a chat's approval button), `via` `api`, `console`, `telegram`,
    `slack`, or `signal` and `watch` for a reload the process made itself, `targets` what it
    touched (ids and names), `outcome` `ok`, `refused` or `failed` with the HTTP `status` and the
    error's `code`."""

    seq: int
    at: str
    actor: str
    via: str
    client: str
    action: str
    targets: dict[str, str]
    outcome: str
    status: int
    code: str | None

    @classmethod
    def of(cls, r: AuditRecord) -> AuditEntry:
        return cls(
            seq=r.seq,
            at=iso(r.at),
            actor=r.actor,
            via=r.via,
            client=r.client,
            action=r.action,
            targets=dict(r.targets),
            outcome=r.outcome,
            status=r.status,
            code=r.code,
        )


class AuditPage(Answer, kw_only=True):
    items: list[AuditEntry]
    next_cursor: str | None


class AuditController(Controller):
    path = "/api"
    guards = [admin_guard]
    tags = ["audit"]
    security = [{"bearer": []}]

    @get("/audit", summary="The audit log of operator actions, newest first")
    async def audit(
        self,
        request: Request[Any, Any, Any],
        actor: str | None = text_parameter("only actions by this token name"),
        action: str | None = text_parameter("only this action (retry, pause, login...)"),
        outcome: str | None = text_parameter("only this outcome: ok, refused, failed"),
        since: dt.datetime | None = SINCE,
        until: dt.datetime | None = UNTIL,
        limit: int = LIMIT,
        cursor: str | None = CURSOR,
    ) -> AuditPage:
        check_choice("outcome", outcome, OUTCOMES)
        found = filters(since, until, actor=actor, action=action, outcome=outcome)
        page = await store_of(request).admin_list("audit", found, limit=limit, cursor=cursor)
        return AuditPage(items=[AuditEntry.of(r) for r in page.items], next_cursor=page.next_cursor)
