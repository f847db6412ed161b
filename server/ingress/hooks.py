"""The hook endpoint: `POST {hook_path}/wake`, `/agent` and `/<name>` for mapped hooks.

A plain ASGI application mounted into Litestar at the hook path. A request walks five stages,
each a module of its own, in order and never back to one it has left, handing on one immutable
`HookRequest` (what the door and the body established) and one `Judgement` (what the judge
decided):

1. door (`door.py`): address (404 for a path not ours), method (405, before auth),
   authentication and lock-out (401/429, before the body is read), the bare hook path (404);
   then the route's limits (`limits.py`, 429) are taken around the rest of the walk;
2. body (`body.py`): read and bound (413 as soon as it is too large, 408 when it is too slow),
   behind a provider's door its handshake or its signature over the raw bytes (401), then
   parse (400) and the idempotency key (400);
3. judge (`hookwise.engine.judge`, pure): the rule or built-in action, extract, transform,
   validate, policy (400, 404, 413, 5xx for a failed transform);
4. accept (`accept.py`): one store commit (422 for a reused key, 503 when the store is not);
5. answer (`answer.py`): 200/202 (held open for a run that waits), 204 when a transform skipped
   the request, the mapping's fixed answer; and every refusal in the one JSON error shape.

Replay (`hookwise.server.admin.replay`) and pull sources (`hookwise.server.sources.enter`)
enter at `judge` through `HookEndpoint.judge`, the very function a live request goes through,
and commit through the same accept stage (`HookEndpoint.accept_stage`, `AcceptStage.commit`).

A mapped path with a door (`hooks.verify.<path>`, or a rule's `verify` on that path; see
`hookwise.engine.signatures.door`) changes three things: `GET` is allowed when the door has a
GET handshake (Meta, Dropbox; otherwise 405 as everywhere); with `auth: signature` the hook
token is not required and a failed signature counts towards the lock-out like a wrong token;
and, after the body is read, the provider's handshake is answered (recorded in the request log
with action `handshake`, never dispatched) or the signature checked before any rule is selected.
A verified request without `Idempotency-Key` uses the provider's delivery id as its key; the
request log keeps the provider's event type and delivery id where its scheme names them.

A request no rule matched is refused 404 (`not_found`, naming each rule's failed condition),
or, on a path whose `unmatched` is `acknowledge` (the default behind a door), answered `200
{"ok": true, "ignored": true, "code": "no_rule_matched"}` and logged with action `ignored`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, cast

import attrs
from litestar.types import HTTPScope, Receive, Scope, Send

from ...engine.actions import ValidationPolicy
from ...engine.errors import Refusal, RequestError
from ...engine.judge import RuleSource, judge, no_rules
from ...engine.judgement import Judgement
from ...engine.request import InboundRequest
from ...engine.signatures import SignatureError, Verifier
from .. import metrics, telemetry
from ..ids import new_id
from ..logs import escape_control
from ..store.base import StoreUnavailable
from ..store.bounded import retry_after_store, store_unavailable
from . import answer
from .accept import AcceptStage
from .answer import Answers
from .asgi import send_error
from .auth import AuthThrottle, SharedAuthThrottle, TokenCheck, client_key
from .body import BodyStage, Handshake, Retention
from .dispatch import Dispatcher, RequestMeta
from .door import DoorStage, LockedOut, Turned
from .fetch import KeyFetcher
from .limits import Limited, RouteLimiter
from .pacing import RefusalPacer
from .refusals import as_error
from .request import HookRequest, sub_path
from .traced import traced_rules

log = logging.getLogger("hookwise.hooks")

__all__ = ["HookEndpoint", "HookSettings"]

_CLOSE = [(b"connection", b"close")]

_LOCKED_OUT = RequestError(
    429, "locked_out", "too many failed authentication attempts from this address; try again later"
)


@attrs.frozen
class HookSettings:
    """Everything the endpoint needs that comes from configuration."""

    hook_path: str
    max_body_bytes: int
    body_timeout: float
    policy: ValidationPolicy
    #: keep each authenticated request's body and headers for replay (`hooks.retainPayloads`)
    retain_payloads: bool = False
    #: a body larger than this is not kept (`hooks.retainPayloads.maxBytes`)
    retain_max_bytes: int = 262144
    #: `/wake` and `/agent` requests are kept too (`hooks.retainPayloads.builtIn`)
    retain_built_in: bool = True


class HookEndpoint:
    """The ASGI application behind `{hook_path}`: walks each request through the stages."""

    def __init__(
        self,
        settings: HookSettings,
        *,
        token: TokenCheck,
        throttle: AuthThrottle | SharedAuthThrottle,
        dispatcher: Dispatcher,
        rules: RuleSource = no_rules,
        limiter: RouteLimiter | None = None,
        keys: KeyFetcher | None = None,
        answers: Answers | None = None,
    ) -> None:
        self.settings = settings
        self._rules = rules
        self._dispatcher = dispatcher
        #: the answer stage's wait and the run status URLs (None: no waiting)
        self._answers = answers
        #: per-route `rateLimit` and `maxInFlight` (429), counted before the body is read
        self._limiter = limiter or RouteLimiter(lambda _: None, str)
        #: a client that keeps sending after a 429 waits for its next ones
        self._pacer = RefusalPacer()
        #: what a door's check fetches (a provider's published keys)
        self._keys = keys or KeyFetcher()
        self._door = DoorStage(
            token=token,
            throttle=throttle,
            rules=rules,
            status_urls=answers is not None,
            max_body_bytes=settings.max_body_bytes,
            body_timeout=settings.body_timeout,
        )
        self._body = BodyStage(
            max_body_bytes=settings.max_body_bytes,
            body_timeout=settings.body_timeout,
            retention=Retention(
                settings.retain_payloads, settings.retain_max_bytes, settings.retain_built_in
            ),
            store=dispatcher.store,
            keys=self._keys,
        )
        self._accept = AcceptStage(dispatcher, answers)
        path = settings.hook_path
        #: the `route` label of the HTTP metrics (a mapped hook's name is not a label value)
        self._routes = {"wake": f"{path}/wake", "agent": f"{path}/agent"}
        self._mapped_route = f"{path}/{{name}}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        sub = sub_path(scope, self.settings.hook_path)
        status = 500  # counted so when the handling is cancelled (the client or server went away)
        route = self._routes.get(sub, self._mapped_route) if sub else "other"
        http = cast("HTTPScope", scope)  # mounted for HTTP only
        # tracing (server.telemetry): the request's span; None when tracing is off
        traced = telemetry.request_span(http["method"], route, http["headers"])
        try:
            status = await self._serve(sub, http, receive, send)
        finally:
            metrics.http_answered(route, status, time.perf_counter() - started)
            if traced is not None:
                traced.end(status)

    async def _serve(self, sub: str | None, scope: HTTPScope, receive: Receive, send: Send) -> int:
        """Walk the request through the stages; the status sent. Every refusal is answered by
        `_failed` (here, or in `_walk` with what it learnt), in the one error shape, and
        recorded once (request log, log line, metric)."""
        client = client_key((scope.get("client") or (None,))[0])
        request_id = new_id()  # its log line's and its kept payload's
        meta: RequestMeta | None = None  # made once the body is read (a refusal before: size 0)
        try:
            door, status_url = self._door.turns_away(sub, scope["method"])
        except Turned as e:  # not in the request log: not a hook request at all
            return await send_error(send, e.error, e.headers)
        assert sub is not None
        by_signature = False
        try:
            with telemetry.stage("hook.auth"):  # tracing: address, token, lock-out
                request = await self._door.admit(sub, door, scope, receive, client)
            by_signature = request.by_signature
            if status_url and self._answers is not None:
                return await self._answers.status(sub, request.query, send)
            # signed by the body: its in-flight slot is taken once the body is read (limits.py)
            async with self._limiter.admit(sub, client, hold=not by_signature):
                request = await self._body.read(request, receive, request_id)
                meta = RequestMeta(self._path(sub), client, len(request.body), request_id)
                async with self._limiter.hold(sub) if by_signature else nullcontext():
                    return await self._walk(request, meta, receive, send)
        except Limited as e:  # not in the request log: a flood must not become store writes
            await self._pacer.hold(sub or "", client)
            return await send_error(send, e.error, e.headers)
        except LockedOut as e:
            await self._pacer.hold("", client)  # locked out of every route at once
            return await send_error(
                send, _LOCKED_OUT, [(b"retry-after", str(e.retry_after).encode())]
            )
        except Exception as e:  # answered in the one error shape, recorded once
            meta = meta or RequestMeta(self._path(sub), client, 0, request_id)
            return await self._failed(e, meta, by_signature, client, send)

    def _path(self, sub: str) -> str:
        """The request's path as the request log records it (escaped: a decoded path may hold
        CR/LF, `server.logs`)."""
        return escape_control(self.settings.hook_path + ("/" + sub if sub else ""))

    async def _failed(
        self, error: Exception, meta: RequestMeta, by_signature: bool, client: str, send: Send
    ) -> int:
        """Answer and record a request the walk refused or failed: a `RequestError` with its
        status, the store's unavailability 503, anything else 500; the status sent."""
        if isinstance(error, RequestError):
            e = error
            if by_signature and e.status == 401:
                await self._door.throttle.record_failure(client)
                log.warning("hook signature authentication failed from %s", client)
            self._dispatcher.refused(meta, e.status, e.code, e.rule_id)
            if e.status >= 500 or e.code.startswith("transform_"):
                # the message names the rule and what failed, never the payload
                log.warning(
                    "%s: %d %s (rule %s): %s", meta.path, e.status, e.code, e.rule_id, e.message
                )
            elif e.status != 401:
                log.info(
                    "%s: %d %s%s",
                    meta.path,
                    e.status,
                    e.code,
                    f" (rule {e.rule_id})" if e.rule_id else "",
                )
            # the rest of the body is not read: close the connection after answering
            return await send_error(send, e, _CLOSE if e.status in (408, 413) else ())
        if isinstance(error, StoreUnavailable):
            log.warning("%s: 503 store_unavailable: %s", meta.path, error)
            self._dispatcher.refused(meta, 503, "store_unavailable")
            return await send_error(send, store_unavailable(error), retry_after_store())
        log.error("unexpected error on %s", meta.path, exc_info=error)
        self._dispatcher.refused(meta, 500, "internal_error")
        return await send_error(
            send,
            RequestError(500, "internal_error", "the gateway failed to handle the request"),
        )

    async def _walk(
        self, request: HookRequest, meta: RequestMeta, receive: Receive, send: Send
    ) -> int:
        """body (the door's check of the bytes, parse) -> judge -> accept -> answer, for a
        request whose body is read; the status sent. `meta` grows as the walk learns (a new
        value each time), and a refusal is recorded with what was known when it came."""
        door = request.door
        try:
            if door is None:
                opened = await self._body.open(request, meta)
            else:  # tracing: the provider's signature or handshake
                # what the provider calls this delivery, where a header says it (the ping's)
                meta = meta.named_by(door.verifier, request.inbound({}))
                with telemetry.stage("hook.door", {"hookwise.rule": door.rule_id}):
                    opened = await self._body.open(request, meta)
            if isinstance(opened, Handshake):
                found = opened.answer
                if found.follow is not None:  # SNS: confirm the subscription before answering
                    await self._keys.visit(found.follow)
                self._dispatcher.refused(
                    meta, found.status, found.kind, opened.rule_id, "handshake"
                )
                return await answer.handshake(send, found)
            request = opened
            if door is not None:  # ... or where the payload says it
                meta = meta.named_by(door.verifier, request.inbound(request.payload))
            judgement = await self.judge(
                request.sub,
                request.payload,
                request.inbound,
                url=lambda: request.url,
                verified=door.verifier if door is not None and door.checks_every_request else None,
                acknowledge=True,
            )
            if judgement.ignored:
                self._dispatcher.refused(meta, 200, "no_rule_matched", None, "ignored")
                log.info("%s: 200 no_rule_matched (acknowledged)", meta.path)
                return await answer.judged(send, judgement)
            if judgement.skipped:
                self._accept.skipped(judgement, meta)
                return await answer.judged(send, judgement)
            # tracing: the stage, and the writer's commit of it (`store.commit`)
            with telemetry.accept_stage(judgement.rule_id):
                committed = await self._accept.accept(request, judgement, meta)  # the one commit
            return await answer.committed(
                send, receive, judgement, committed.accepted, committed.wait, self._answers
            )
        except Exception as e:  # answered as `_serve` answers its own, with what is known now
            return await self._failed(e, meta, request.by_signature, request.client, send)

    @property
    def accept_stage(self) -> AcceptStage:
        """The accept stage, whose one commit replay and pull sources commit through too."""
        return self._accept

    async def judge(
        self,
        sub: str,
        payload: Any,
        request_of: Callable[[Any], InboundRequest],
        *,
        url: Callable[[], str] | None = None,
        verified: Verifier | None = None,
        acknowledge: bool = False,
    ) -> Judgement:
        """The judge stage, for every request that reaches it: live (`_walk`), replayed
        (`resolve`) or pulled from a broker (`hookwise.server.sources.enter`). The engine's
        `judge` over the rules in force now and the configured policy; its refusals answered
        with the status `refusals` chooses."""
        try:
            return await judge(
                sub,
                payload,
                request_of,
                rules=traced_rules(self._rules()),  # tracing: hook.rule, .transform
                policy=self.settings.policy,
                url=url,
                verified=verified,
                acknowledge=acknowledge,
            )
        except Refusal as e:  # the engine's typed refusal: its status is chosen here
            raise as_error(e) from e.__cause__

    async def resolve(
        self,
        sub: str,
        payload: Any,
        headers: list[tuple[bytes, bytes]],
        query_string: bytes,
        body: bytes,
    ) -> Judgement:
        """What a replay of a kept request resolves to through today's rules and policy: the
        very `judge` a live request goes through. A kept request was authenticated when it
        arrived, so a door's signature is not checked again (nor is a handshake answered)."""
        kept = HookRequest(
            sub=sub,
            method="POST",
            client="replay",
            headers=headers,
            query=query_string,
            url="",
            body=body,
        )
        door = self._door.door_of(sub)
        verified = door.verifier if door is not None and door.checks_every_request else None
        return await self.judge(sub, payload, kept.inbound, verified=verified)

    async def check_signature(
        self, sub: str, request: InboundRequest, *, verifier: Verifier | None = None
    ) -> tuple[Verifier, str] | None:
        """For a message pulled from a broker (`hookwise.server.sources`): check the signature of
        `sub`'s door as the body stage does (no handshake: a broker relays none), or of
        `verifier` when given (a source's own: an SNS envelope's); the verifier checked and who
        signed (`Verifier.verify`), or None when there is nothing to check. A failed check is
        the door's 401 `invalid_signature`."""
        rule_id = None
        if verifier is None:
            door = self._door.door_of(sub)
            if door is None or not door.checks_every_request:
                return None
            verifier, rule_id = door.verifier, door.rule_id
        request = await self._keys.for_request(verifier, request)
        try:
            sender = verifier.verify(request)
        except SignatureError as exc:
            where = f"rule {rule_id!r}" if rule_id else verifier.where
            raise RequestError(401, "invalid_signature", f"{where}: {exc}", None, rule_id) from None
        return verifier, sender
