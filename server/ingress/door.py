"""The door stage of the hook path: address, method, authentication, lock-out.

`DoorStage.admit` answers, before a byte of the body is read, whether a request may come in:
the path must name a hook (404 for the bare hook path), the method must be POST (405, before
authentication; GET only for a provider's handshake or a run's status URL), the hook token must
match (401) unless the path's provider door has `auth: signature`, and the address must not be
locked out (429 `locked_out`, for every route at once). It gives the `HookRequest` the body
stage goes on with. The route's limits (`RouteLimiter`, 429) are taken by the endpoint around
the stages that follow, as they hold a slot for the request's whole walk.

A path without the token but with the provider's valid signature is still refused 401, with a
message that says what is missing (`auth: signature`).
"""

from __future__ import annotations

import logging
from typing import cast

import attrs
from litestar.types import HTTPScope, Receive

from ...engine.errors import RequestError
from ...engine.judge import RuleSource
from ...engine.request import BUILT_IN_HOOKS
from ...engine.signatures import SignatureError, answers_get
from ...engine.signatures.door import Door
from .answer import STATUS_PREFIX
from .asgi import content_length, read_body
from .auth import AuthThrottle, SharedAuthThrottle, TokenCheck, presented_token
from .request import Headers, HookRequest, url_of

log = logging.getLogger("hookwise.hooks")

_ALLOW = [(b"allow", b"POST")]


class LockedOut(Exception):
    """The address is locked out after too many failed attempts (429 on every route)."""

    def __init__(self, retry_after: int) -> None:
        self.retry_after = retry_after


class Turned(Exception):
    """Turned away at the door before anything is recorded (no request log line): the path is
    not a hook, or the method is not one a hook takes."""

    def __init__(self, error: RequestError, headers: Headers | None = None) -> None:
        self.error = error
        self.headers = headers or []


class DoorStage:
    """Admits a request to a hook, or refuses it, before its body is read."""

    def __init__(
        self,
        *,
        token: TokenCheck,
        throttle: AuthThrottle | SharedAuthThrottle,
        rules: RuleSource,
        status_urls: bool,
        max_body_bytes: int,
        body_timeout: float,
    ) -> None:
        self._token = token
        self.throttle = throttle
        self._rules = rules
        #: `GET {hook_path}/runs/<id>` is answered (the answer stage's status URLs)
        self._status_urls = status_urls
        self._max_body_bytes = max_body_bytes
        self._body_timeout = body_timeout

    def door_of(self, sub: str) -> Door | None:
        """The provider's door (a `verify` block) guarding the mapped path `sub`, if any."""
        if not sub or sub in BUILT_IN_HOOKS:
            return None
        rules = self._rules()
        return rules.door(sub) if rules is not None else None

    def turns_away(self, sub: str | None, method: str) -> tuple[Door | None, bool]:
        """The path's door and whether this is a status URL; raises `Turned` for a path that is
        not ours (404) or a method the path does not take (405, before authentication)."""
        if sub is None:
            raise Turned(RequestError(404, "not_found", "no such endpoint"))
        door = self.door_of(sub)
        get_handshake = door is not None and answers_get(door.verifier)
        status_url = method == "GET" and self._status_urls and sub.startswith(STATUS_PREFIX)
        if method != "POST" and not (method == "GET" and (get_handshake or status_url)):
            raise Turned(
                RequestError(405, "method_not_allowed", "hook endpoints accept POST only"), _ALLOW
            )
        return door, status_url

    async def admit(
        self, sub: str, door: Door | None, scope: HTTPScope, receive: Receive, client: str
    ) -> HookRequest:
        """Authenticate (the hook token, or the lock-out alone for `auth: signature`); the
        request as the door admits it. Raises `RequestError` (401, 404) or `LockedOut`."""
        headers = cast("Headers", scope["headers"])  # uvicorn sends a list
        query = scope.get("query_string", b"")
        by_signature = door is not None and door.verifier.signature_auth
        if by_signature:
            retry = await self.throttle.locked_for(client)
            if retry is not None:
                raise LockedOut(max(1, round(retry)))
        else:
            try:
                await self._authenticate(headers, query, client)
            except RequestError as e:
                if door is not None and e.code == "unauthorized":
                    raise await self._signed_without_token(e, door, sub, scope, receive) from None
                raise
        if not sub:
            raise RequestError(
                404, "not_found", "name a hook: {hook_path}/wake, /agent or a mapping"
            )
        return HookRequest(
            sub=sub,
            method=scope["method"],
            client=client,
            headers=headers,
            query=query,
            url=url_of(scope, headers),
            door=door,
            by_signature=by_signature,
        )

    async def _authenticate(self, headers: Headers, query: bytes, client: str) -> None:
        presented = presented_token(headers, query)
        if presented.token is not None and self._token.matches(presented.token):
            await self.throttle.record_success(client)
            return
        retry = await self.throttle.locked_for(client)
        if retry is not None:
            raise LockedOut(max(1, round(retry)))
        await self.throttle.record_failure(client)
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
        headers = cast("Headers", scope["headers"])  # uvicorn sends a list
        try:
            body = await read_body(
                receive,
                declared=content_length(headers),
                limit=self._max_body_bytes,
                timeout=self._body_timeout,
            )
            request = HookRequest(
                sub=sub,
                method="POST",
                client="",
                headers=headers,
                query=scope.get("query_string", b""),
                url=url_of(scope, headers),
                body=body,
            ).inbound({})
            door.verifier.verify(attrs.evolve(request, url=url_of(scope, headers)))
        except (RequestError, SignatureError):
            return refused
        where = door.verifier.where
        return attrs.evolve(
            refused,
            message=f"the {door.verifier.name} signature is valid, but this path also requires "
            f"the hook token: {where} lacks `auth: signature` (add it to let the signature "
            "stand in for the token, as the provider cannot send one)",
        )
