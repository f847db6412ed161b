"""The hook endpoint: `POST {hook_path}/wake`, `/agent` and `/<name>` for mapped hooks.

A plain ASGI application mounted into Litestar at the hook path. The order of checks is the
contract: method (405, before auth) -> authentication and lock-out (401/429, before the body is
read) -> sub-path (404 for the bare hook path) -> body (413 as soon as it is too large, 408 when
it is too slow) -> payload (400) -> idempotency key -> rule or built-in action -> validation (400)
-> dispatch (commit, then 200/202; 204 when a transform skipped the request).

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

import hashlib
import logging
import time
from collections.abc import Callable
from contextlib import nullcontext
from datetime import UTC, datetime
from typing import Any, cast
from urllib.parse import parse_qsl, unquote, urlencode

import attrs
from litestar.types import HTTPScope, Receive, Scope, Send

from ...engine.actions import (
    Action,
    ValidationPolicy,
    validate_action,
    validate_agent,
    validate_wake,
)
from ...engine.config.mapping import CoalesceConfig
from ...engine.config.sessions import mapping_source
from ...engine.errors import RequestError
from ...engine.request import BUILT_IN_HOOKS, InboundRequest
from ...engine.signatures import (
    HandshakeRefused,
    SignatureError,
    Verifier,
    answer,
    answers_get,
)
from ...engine.signatures.door import Door
from .. import metrics, telemetry
from ..logs import escape_control
from ..store.base import StoreUnavailable
from ..store.bounded import retry_after_store, store_unavailable
from ..store.coalesce import CoalesceSpec, stored_key
from ..store.records import StoredPayload
from .answer import STATUS_PREFIX, Answers
from .asgi import content_length, read_body, send_error, send_json
from .auth import (
    TOKEN_HEADER,
    AuthThrottle,
    SharedAuthThrottle,
    TokenCheck,
    client_key,
    presented_token,
)
from .dispatch import Dispatcher, RequestMeta, respond_body
from .fetch import KeyFetcher
from .limits import Limited, RouteLimiter
from .pacing import RefusalPacer
from .payload import content_type, parse_payload, takes_arrays

log = logging.getLogger("hookwise.hooks")

MAX_IDEMPOTENCY_KEY = 256
_ALLOW = [(b"allow", b"POST")]
_REPLAYED = [(b"idempotent-replayed", b"true")]
_CLOSE = [(b"connection", b"close")]
#: the answer to a request no rule matched on a path that acknowledges them
_IGNORED = b'{"ok":true,"ignored":true,"code":"no_rule_matched"}'
MAX_PROVIDER_VALUE = 200


_LOCKED_OUT = RequestError(
    429, "locked_out", "too many failed authentication attempts from this address; try again later"
)


class _LockedOut(Exception):
    def __init__(self, retry_after: int) -> None:
        self.retry_after = retry_after


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


def _sub_path(scope: Scope, hook_path: str) -> str | None:
    """The part after the hook path with slashes trimmed; None when the path is not ours."""
    path: str = scope.get("raw_path", b"").decode("latin-1").split("?", 1)[0] or scope["path"]
    path = unquote(path)
    if path == hook_path:
        return ""
    if not path.startswith(hook_path + "/"):
        return None
    return path[len(hook_path) + 1 :].strip("/")


def _query(raw: bytes) -> dict[str, str]:
    return dict(parse_qsl(raw.decode("latin-1"))) if raw else {}


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    for k, v in headers:
        if k == name:
            return v
    return None


def _digest(path: str, body: bytes) -> str:
    return hashlib.sha256(path.encode() + b"\n" + body).hexdigest()


def _url(scope: Scope, headers: list[tuple[bytes, bytes]]) -> str:
    """The URL as the client requested it (for schemes that sign it: Twilio, Square)."""
    host = _header(headers, b"host")
    if host is None:
        server = scope.get("server") or ("localhost", None)
        host = f"{server[0]}:{server[1]}".encode() if server[1] else str(server[0]).encode()
    path = scope.get("raw_path") or scope["path"].encode()
    query = scope.get("query_string", b"")
    url = f"{scope.get('scheme', 'http')}://{host.decode('latin-1')}{path.decode('latin-1')}"
    return url + ("?" + query.decode("latin-1") if query else "")


def _inbound(
    sub: str,
    payload: dict[str, Any],
    headers: list[tuple[bytes, bytes]],
    scope: Scope,
    body: bytes,
    *,
    url: str = "",
) -> InboundRequest:
    """The engine's view of a mapped-hook request (its URL only when given: see `_url`)."""
    return InboundRequest(
        path=sub,
        payload=payload,
        headers={k.decode("latin-1"): v.decode("latin-1") for k, v in headers},
        query=_query(scope.get("query_string", b"")),
        raw_body=body,
        now=datetime.now(UTC),
        url=url,
    )


def _delivery_key(path: str, delivery_id: str) -> str:
    """The idempotency key of a provider's delivery: its id, scoped to the hook path."""
    key = f"delivery:{path}:{delivery_id}"
    if len(key) > MAX_IDEMPOTENCY_KEY:
        key = "delivery:" + hashlib.sha256(key.encode()).hexdigest()
    return key


class HookEndpoint:
    """The ASGI application behind `{hook_path}`."""

    def __init__(
        self,
        settings: HookSettings,
        *,
        token: TokenCheck,
        throttle: AuthThrottle | SharedAuthThrottle,
        dispatcher: Dispatcher,
        rules: Callable[[], Any] = lambda: None,
        limiter: RouteLimiter | None = None,
        keys: KeyFetcher | None = None,
        answers: Answers | None = None,
    ) -> None:
        self.settings = settings
        #: the answer stage's wait and the run status URLs (None: no waiting)
        self._answers = answers
        #: per-route `rateLimit` and `maxInFlight` (429), counted before the body is read
        self._limiter = limiter or RouteLimiter(lambda _: None, str)
        #: a client that keeps sending after a 429 waits for its next ones
        self._pacer = RefusalPacer()
        #: what a door's check fetches (a provider's published keys)
        self._keys = keys or KeyFetcher()
        self._token = token
        self._throttle = throttle
        self._dispatcher = dispatcher
        self._rules = rules
        path = settings.hook_path
        #: the `route` label of the HTTP metrics (a mapped hook's name is not a label value)
        self._routes = {"wake": f"{path}/wake", "agent": f"{path}/agent"}
        self._mapped_route = f"{path}/{{name}}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        sub = _sub_path(scope, self.settings.hook_path)
        status = 500  # counted so when the handling is cancelled (the client or server went away)
        route = self._routes.get(sub, self._mapped_route) if sub else "other"
        # --- tracing (server.telemetry): the request's span; None when tracing is off
        http = cast("HTTPScope", scope)  # mounted for HTTP only
        traced = telemetry.request_span(http["method"], route, http["headers"])
        try:
            status = await self._serve(sub, http, receive, send)
        finally:
            metrics.http_answered(route, status, time.perf_counter() - started)
            if traced is not None:
                traced.end(status)

    async def _serve(self, sub: str | None, scope: HTTPScope, receive: Receive, send: Send) -> int:
        """Answer the request; the status sent."""
        client = client_key((scope.get("client") or (None,))[0])
        meta = RequestMeta(  # escaped: a decoded path may hold CR/LF (server.logs)
            path=escape_control(self.settings.hook_path + ("/" + sub if sub else "")),
            client=client,
            size=0,
        )
        if sub is None:
            return await send_error(send, RequestError(404, "not_found", "no such endpoint"))
        door = self._door(sub)
        get_handshake = door is not None and answers_get(door.verifier)
        status_url = (
            scope["method"] == "GET" and sub.startswith(STATUS_PREFIX) and self._answers is not None
        )
        if scope["method"] != "POST" and not (
            scope["method"] == "GET" and (get_handshake or status_url)
        ):
            return await send_error(
                send,
                RequestError(405, "method_not_allowed", "hook endpoints accept POST only"),
                _ALLOW,
            )
        headers = cast("list[tuple[bytes, bytes]]", scope["headers"])  # uvicorn sends a list
        by_signature = door is not None and door.verifier.signature_auth
        try:
            if by_signature:
                retry = await self._throttle.locked_for(client)
                if retry is not None:
                    raise _LockedOut(max(1, round(retry)))
            else:
                try:
                    with telemetry.stage("hook.auth"):  # tracing
                        await self._authenticate(headers, scope.get("query_string", b""), client)
                except RequestError as e:
                    if door is not None and e.code == "unauthorized":
                        raise await self._signed_without_token(
                            e, door, sub, scope, receive
                        ) from None
                    raise
            if not sub:
                raise RequestError(
                    404, "not_found", "name a hook: {hook_path}/wake, /agent or a mapping"
                )
            if status_url and self._answers is not None:
                return await self._answers.status(sub, scope.get("query_string", b""), send)
            # signed by the body: its in-flight slot is taken once the body is read (limits.py)
            async with self._limiter.admit(sub, client, hold=not by_signature):
                body = b""
                if scope["method"] == "POST":
                    body = await read_body(
                        receive,
                        declared=content_length(headers),
                        limit=self.settings.max_body_bytes,
                        timeout=self.settings.body_timeout,
                    )
                meta.size = len(body)
                if self.settings.retain_payloads and not by_signature:
                    # signature-authenticated requests are kept once their door has checked them
                    self._retain(sub, headers, scope.get("query_string", b""), body, meta)
                async with self._limiter.hold(sub) if by_signature else nullcontext():
                    return await self._handle(
                        sub, headers, scope, body, meta, send, door, receive=receive
                    )
        except Limited as e:  # not in the request log: a flood must not become store writes
            await self._pacer.hold(sub or "", client)
            return await send_error(send, e.error, e.headers)
        except _LockedOut as e:
            await self._pacer.hold("", client)  # locked out of every route at once
            return await send_error(
                send, _LOCKED_OUT, [(b"retry-after", str(e.retry_after).encode())]
            )
        except RequestError as e:
            if by_signature and e.status == 401:
                await self._throttle.record_failure(client)
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
        except StoreUnavailable as e:
            log.warning("%s: 503 store_unavailable: %s", meta.path, e)
            self._dispatcher.refused(meta, 503, "store_unavailable")
            return await send_error(send, store_unavailable(e), retry_after_store())
        except Exception:
            log.exception("unexpected error on %s", meta.path)
            self._dispatcher.refused(meta, 500, "internal_error")
            return await send_error(
                send,
                RequestError(500, "internal_error", "the gateway failed to handle the request"),
            )

    async def _authenticate(
        self, headers: list[tuple[bytes, bytes]], query: bytes, client: str
    ) -> None:
        presented = presented_token(headers, query)
        if presented.token is not None and self._token.matches(presented.token):
            await self._throttle.record_success(client)
            return
        retry = await self._throttle.locked_for(client)
        if retry is not None:
            raise _LockedOut(max(1, round(retry)))
        await self._throttle.record_failure(client)
        log.warning("hook authentication failed from %s", client)
        raise RequestError(401, "unauthorized", presented.problem or "the hook token is not valid")

    async def _signed_without_token(
        self, refused: RequestError, door: Door, sub: str, scope: HTTPScope, receive: Receive
    ) -> RequestError:
        """The 401 of a request without the hook token on a path whose door wants the token
        too: when it carries the provider's valid signature, the message says so (the block
        lacks `auth: signature`). Still a failed attempt; nothing of it is kept or dispatched."""
        if door.verifier.scheme.fetch is not None or scope["method"] != "POST":
            return refused
        headers = cast("list[tuple[bytes, bytes]]", scope["headers"])
        try:
            body = await read_body(
                receive,
                declared=content_length(headers),
                limit=self.settings.max_body_bytes,
                timeout=self.settings.body_timeout,
            )
            request = _inbound(sub, {}, headers, scope, body, url=_url(scope, headers))
            door.verifier.verify(request)
        except (RequestError, SignatureError):
            return refused
        where = door.verifier.where
        return attrs.evolve(
            refused,
            message=f"the {door.verifier.name} signature is valid, but this path also requires "
            f"the hook token: {where} lacks `auth: signature` (add it to let the signature "
            "stand in for the token, as the provider cannot send one)",
        )

    def _door(self, sub: str) -> Door | None:
        if not sub or sub in BUILT_IN_HOOKS:
            return None
        rules = self._rules()
        return rules.door(sub) if rules is not None else None

    async def _at_door(
        self, door: Door, scope: HTTPScope, request: InboundRequest, meta: RequestMeta, send: Send
    ) -> int | None:
        """Answer the provider's handshake (its status) or check the door's signature (None)."""
        try:
            found = answer(door.verifier, scope["method"], request)
            if found is None and scope["method"] != "POST":
                raise RequestError(
                    405, "method_not_allowed", "GET is for the provider's verification handshake"
                )
            if found is None and door.checks_every_request:
                door.verifier.verify(request)
        except SignatureError as exc:
            where = f"rule {door.rule_id!r}" if door.rule_id else door.verifier.where
            raise RequestError(
                401, "invalid_signature", f"{where}: {exc}", None, door.rule_id
            ) from None
        except HandshakeRefused as exc:
            raise RequestError(exc.status, exc.code, exc.message, None, door.rule_id) from None
        if found is None:
            return None
        if found.follow is not None:  # SNS: confirm the subscription before answering
            await self._keys.visit(found.follow)
        self._dispatcher.refused(meta, found.status, found.kind, door.rule_id, "handshake")
        hdrs: list[tuple[bytes, bytes]] = [
            (k.lower().encode(), v.encode()) for k, v in found.headers
        ]
        hdrs += [
            (b"content-type", found.content_type.encode()),
            (b"content-length", str(len(found.body)).encode()),
        ]
        await send({"type": "http.response.start", "status": found.status, "headers": hdrs})
        await send({"type": "http.response.body", "body": found.body, "more_body": False})
        return found.status

    async def _handle(
        self,
        sub: str,
        headers: list[tuple[bytes, bytes]],
        scope: HTTPScope,
        body: bytes,
        meta: RequestMeta,
        send: Send,
        door: Door | None = None,
        *,
        receive: Receive | None = None,
    ) -> int:
        """Handle an authenticated request whose body is read; the status sent."""
        request = None
        if door is not None:  # the door comes before the payload is even parsed
            request = _inbound(sub, {}, headers, scope, body, url=_url(scope, headers))
            request = await self._keys.for_request(door.verifier, request)
            # what the provider calls this delivery, where a header says it (the ping's)
            meta.event_type = provider_value(door.verifier.event_type(request))
            meta.delivery_id = provider_value(door.verifier.delivery_id(request))
            with telemetry.stage("hook.door", **{"hookwise.rule": door.rule_id}):  # tracing
                answered = await self._at_door(door, scope, request, meta, send)
            if answered is not None:
                return answered
            if self.settings.retain_payloads and door.verifier.signature_auth:
                # authenticated by its signature just now (a door with `auth: signature` checks
                # every request): kept as a token-authenticated request is, before its rules run
                self._retain(sub, headers, scope.get("query_string", b""), body, meta)
        payload = parse_payload(body, content_type(headers), arrays=takes_arrays(sub))
        idem = _header(headers, b"idempotency-key")
        idem_key: str | None = None
        if idem is not None:
            idem_key = idem.decode("latin-1").strip()
            if not idem_key or len(idem_key) > MAX_IDEMPOTENCY_KEY or not idem_key.isprintable():
                raise RequestError(
                    400,
                    "invalid_idempotency_key",
                    f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} printable characters",
                )
        fingerprint: str | None = None

        def request_of(payload: Any) -> InboundRequest:
            if request is None:
                return _inbound(sub, payload, headers, scope, body)
            return attrs.evolve(request, payload=payload)

        if door is not None:  # what the provider calls this delivery, for the request log
            named = request_of(payload)
            meta.event_type = meta.event_type or provider_value(door.verifier.event_type(named))
            meta.delivery_id = meta.delivery_id or provider_value(door.verifier.delivery_id(named))
        resolved = await self.judge(
            sub,
            payload,
            request_of,
            url=lambda: _url(scope, headers),
            verified=door.verifier if door is not None and door.checks_every_request else None,
            acknowledge=True,
        )
        if resolved.ignored:
            self._dispatcher.refused(meta, 200, "no_rule_matched", None, "ignored")
            log.info("%s: 200 no_rule_matched (acknowledged)", meta.path)
            return await send_json(send, 200, _IGNORED)
        rule_id = resolved.rule_id
        respond = resolved.respond
        if idem_key is None and resolved.delivery_id is not None:
            # A verified provider id is authoritative: a retry re-signed (Mailgun signs in
            # the body) is still the same delivery, so the key is its own fingerprint.
            idem_key = fingerprint = _delivery_key(meta.path, resolved.delivery_id)
        if resolved.skipped:
            status = respond.status if respond is not None else 204
            self._dispatcher.refused(meta, status, "skipped", rule_id)
            if respond is None:
                return await send_json(send, 204, None)
            headers = [(k.lower().encode(), v.encode()) for k, v in respond.headers.items()]
            return await send_json(send, status, respond_body(respond), headers)
        actions = resolved.actions
        if idem_key is None and resolved.batch:
            # a fan-out batch redelivered identically replays (the peer derives a key too);
            # the tab keeps it apart from every key a caller can send (printable only)
            idem_key = "\tbatch:" + _digest(meta.path, body)
        if idem_key is not None and fingerprint is None:
            fingerprint = _digest(meta.path, body)
        wait = None
        if self._answers is not None:  # refused before anything is stored when malformed
            wait = self._answers.seconds(actions, respond, scope.get("query_string", b""))
        with telemetry.stage("hook.accept", **{"hookwise.rule": rule_id}):  # tracing: the commit
            accepted = await self._dispatcher.dispatch(
                actions,
                meta=meta,
                rule_id=rule_id,
                respond=respond,
                idempotency_key=idem_key,
                fingerprint=fingerprint,
                callback_url=resolved.callback_url,
                coalesce=resolved.coalesce,
            )
        if accepted.conflict:
            raise RequestError(
                422,
                "idempotency_key_reused",
                "this Idempotency-Key was already used for a different request",
            )
        extra = list(respond.headers.items()) if respond is not None else []
        hdrs = [(k.lower().encode(), v.encode()) for k, v in extra]
        if accepted.replayed:
            hdrs += _REPLAYED
        if wait and accepted.status == 202 and self._answers is not None and receive is not None:
            return await self._answers.hold(accepted.body, wait, receive, send, hdrs)
        return await send_json(send, accepted.status, accepted.body or None, hdrs)

    async def resolve(
        self,
        sub: str,
        payload: Any,
        headers: list[tuple[bytes, bytes]],
        query_string: bytes,
        body: bytes,
    ) -> Resolved:
        """What a replay of a kept request resolves to through today's rules and policy: the
        very `judge` a live request goes through. A kept request was authenticated when it
        arrived, so a door's signature is not checked again (nor is a handshake answered)."""

        def request_of(payload: Any) -> InboundRequest:
            return InboundRequest(
                path=sub,
                payload=payload,
                headers={k.decode("latin-1"): v.decode("latin-1") for k, v in headers},
                query=_query(query_string),
                raw_body=body,
                now=datetime.now(UTC),
            )

        door = self._door(sub)
        verified = door.verifier if door is not None and door.checks_every_request else None
        return await self.judge(sub, payload, request_of, verified=verified)

    async def check_signature(
        self, sub: str, request: InboundRequest, *, verifier: Verifier | None = None
    ) -> Verifier | None:
        """For a message pulled from a broker (`hookwise.server.sources`): check the signature of
        `sub`'s door as `_at_door` does (no handshake: a broker relays none), or of `verifier`
        when given (a source's own: an SNS envelope's); the verifier checked, or None when there
        is nothing to check. A failed check is the door's 401 `invalid_signature`."""
        rule_id = None
        if verifier is None:
            door = self._door(sub)
            if door is None or not door.checks_every_request:
                return None
            verifier, rule_id = door.verifier, door.rule_id
        request = await self._keys.for_request(verifier, request)
        try:
            verifier.verify(request)
        except SignatureError as exc:
            where = f"rule {rule_id!r}" if rule_id else verifier.where
            raise RequestError(401, "invalid_signature", f"{where}: {exc}", None, rule_id) from None
        return verifier

    async def judge(
        self,
        sub: str,
        payload: Any,
        request_of: Callable[[Any], InboundRequest],
        *,
        url: Callable[[], str] | None = None,
        verified: Verifier | None = None,
        acknowledge: bool = False,
    ) -> Resolved:
        """The one judgement of an authenticated request, live (`_handle`) or replayed
        (`resolve`): `wake`, `agent`, or the mapped-hook rules for any other name, validated
        against the configured policy (agents, session keys, models, channels); the validated
        actions, or a `RequestError`. `request_of(payload)` builds the engine's view of a mapped
        request; `url` gives the URL for schemes that sign it; `verified` is the door's block
        already checked; `acknowledge` (a live request) lets a path whose `unmatched` is
        `acknowledge` answer a request no rule matched with `Resolved.ignored` instead of 404 (a
        replay of it is still refused until a rule matches)."""
        policy = self.settings.policy
        if sub == "wake":
            return Resolved([validate_wake(payload, policy)])
        if sub == "agent":
            return Resolved([validate_agent(payload, policy)])
        rules = self._rules()
        request = request_of(payload)
        with telemetry.stage("hook.rule"):  # tracing: rule selection
            rule = rules.select(request) if rules is not None else None
        if rule is None:
            if rules is None:
                raise RequestError(404, "not_found", f"no hook or mapping matches {sub!r}")
            if acknowledge and rules.unmatched(sub) == "acknowledge":
                return Resolved([], ignored=True)
            raise RequestError(404, "not_found", rules.why_unmatched(request))
        signs_url = rule.verifier is not None or rules.door(sub) is not None
        if url is not None and not request.url and signs_url:
            # only schemes that sign the URL read it (Twilio, Square): made when one may
            request = attrs.evolve(request, url=url())
        with telemetry.stage(  # tracing: extraction, templates and the transform (its worker's)
            "hook.transform",
            **{"hookwise.rule": rule.id, "hookwise.transform": _runtime_of(rule.transform)},
        ):
            outcome = await rules.evaluate(rule, request, verified=verified)
        rule_id = outcome.rule_id
        batch = rule.for_each is not None
        if outcome.skipped or not outcome.actions:
            return Resolved(
                [], rule_id, outcome.respond, skipped=True, delivery_id=outcome.delivery_id
            )
        source = mapping_source(rule.config)
        try:
            # every item of a batch is validated before anything of it is stored
            actions = [
                validate_action(spec.kind, spec.fields, policy, internal=True, source=source)
                for spec in outcome.actions
            ]
        except RequestError as e:
            raise attrs.evolve(
                e,
                message=f"rule {rule_id!r} produced an invalid action: {e.message}",
                rule_id=rule_id,
            ) from None
        return Resolved(
            actions,
            rule_id,
            outcome.respond,
            delivery_id=outcome.delivery_id,
            batch=batch,
            callback_url=outcome.callback_url,
            coalesce=coalesce_spec(rule.config.coalesce, outcome.coalesce_key),
        )

    def _retain(
        self, sub: str, headers: list[tuple[bytes, bytes]], query: bytes, body: bytes, meta: Any
    ) -> None:
        """Keep the request for replay (`hooks.retainPayloads`): never its token, never a body
        over `maxBytes`, `/wake` and `/agent` only with `builtIn`."""
        if len(body) > self.settings.retain_max_bytes:
            return
        if sub in BUILT_IN_HOOKS and not self.settings.retain_built_in:
            return
        self._dispatcher.store.keep_payload(
            StoredPayload(
                request_id=meta.request_id,
                path=sub,
                query=without_token(query),
                headers=tuple(
                    (k.decode("latin-1"), v.decode("latin-1"))
                    for k, v in headers
                    if k not in AUTH_HEADERS
                ),
                body=body,
                created_at=time.time(),
            )
        )


#: never kept with a payload: whatever may carry a credential
AUTH_HEADERS = frozenset(
    {b"authorization", b"proxy-authorization", b"cookie", TOKEN_HEADER, b"x-api-key"}
)


def without_token(query: bytes) -> str:
    """The query string without its `token` parameter."""
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    return urlencode([(k, v) for k, v in pairs if k != "token"])


@attrs.frozen
class Resolved:
    """What a request resolves to (`HookEndpoint.judge`): its actions, the rule that made them,
    the rule's fixed answer; `skipped` when a transform dropped it."""

    actions: list[Action]
    rule_id: str | None = None
    respond: Any = None
    skipped: bool = False
    #: the provider's id of this delivery (a rule's `dedupe`), for deduplication
    delivery_id: str | None = None
    #: made by a `forEach` fan-out
    batch: bool = False
    #: no rule matched, and the path acknowledges such requests (`unmatched: acknowledge`)
    ignored: bool = False
    #: where its runs' outcomes are posted when they end (the rule's `callback`)
    callback_url: str | None = None
    #: the rule's `coalesce`, with its key rendered for this request
    coalesce: CoalesceSpec | None = None


def coalesce_spec(config: CoalesceConfig | None, key: str | None) -> CoalesceSpec | None:
    """A rule's `coalesce` for one request (None: the rule does not coalesce)."""
    if config is None or key is None:
        return None
    return CoalesceSpec(stored_key(key), config.window, config.max_wait, config.keep)


def _runtime_of(transform: object) -> str | None:
    """A span's name for a rule's transform runtime (its class), or None without one."""
    return type(transform).__name__ if transform is not None else None


def provider_value(value: str | None) -> str | None:
    """A provider's event type or delivery id as the request log keeps it: printable, bounded."""
    if value is None:
        return None
    text = value.strip()
    return text[:MAX_PROVIDER_VALUE] if text.isprintable() and text else None
