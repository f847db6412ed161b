"""The body stage of the hook path: read, bound, check at the provider's door, parse.

`BodyStage.read` reads the body of an admitted request, bounded (413 as soon as it is too
large, 408 when it is too slow), and keeps it for replay (`hooks.retainPayloads`) when the hook
token authenticated it. `BodyStage.open` then does what needs the bytes: behind a provider's
door (`hooks.verify.<path>` or a rule's `verify`), the provider's handshake is answered (a
`Handshake`, recorded with action `handshake`, never dispatched) or its signature is checked
over the raw body before any rule is selected (401 `invalid_signature`), and a request the
signature authenticated is kept for replay; then the payload is parsed (400, see `payload`) and
the `Idempotency-Key` read (400 `invalid_idempotency_key`). A path guarded by a door with
`auth: signature` takes its in-flight slot between the two (`limits`): its caller is not known
until its signature is checked.
"""

from __future__ import annotations

import time
from urllib.parse import parse_qsl, urlencode

import attrs
from litestar.types import Receive

from ...engine.errors import RequestError
from ...engine.request import BUILT_IN_HOOKS, InboundRequest
from ...engine.signatures import HandshakeRefused, SignatureError, answer
from ...engine.signatures.door import Door
from ...engine.signatures.handshakes import HandshakeAnswer
from ..store.base import Store
from ..store.records import StoredPayload
from .asgi import content_length, read_body
from .auth import TOKEN_HEADER
from .dispatch import RequestMeta
from .fetch import KeyFetcher
from .payload import content_type, parse_payload, takes_arrays
from .refusals import status_of
from .request import MAX_IDEMPOTENCY_KEY, HookRequest

#: never kept with a payload: whatever may carry a credential
AUTH_HEADERS = frozenset(
    {b"authorization", b"proxy-authorization", b"cookie", TOKEN_HEADER, b"x-api-key"}
)


@attrs.frozen
class Handshake:
    """A provider's handshake, answered at its door instead of being judged."""

    answer: HandshakeAnswer
    rule_id: str | None


@attrs.frozen
class Retention:
    """`hooks.retainPayloads`: whether bodies are kept for replay, and which."""

    enabled: bool = False
    #: a body larger than this is not kept (`maxBytes`)
    max_bytes: int = 262144
    #: `/wake` and `/agent` requests are kept too (`builtIn`)
    built_in: bool = True


class BodyStage:
    """Reads, checks and parses the body of an admitted hook request."""

    def __init__(
        self,
        *,
        max_body_bytes: int,
        body_timeout: float,
        retention: Retention,
        store: Store,
        keys: KeyFetcher,
    ) -> None:
        self._max_body_bytes = max_body_bytes
        self._body_timeout = body_timeout
        self._retention = retention
        self._store = store
        self._keys = keys

    async def read(self, request: HookRequest, receive: Receive, request_id: str) -> HookRequest:
        """The request with its body read (bounded); kept for replay under `request_id` (its log
        line's) when the token admitted it (a request the signature admits is kept once its
        door has checked it: `open`)."""
        body = b""
        if request.method == "POST":
            body = await read_body(
                receive,
                declared=content_length(request.headers),
                limit=self._max_body_bytes,
                timeout=self._body_timeout,
            )
        request = request.with_body(body)
        if self._retention.enabled and not request.by_signature:
            self._retain(request, request_id)
        return request

    async def open(self, request: HookRequest, meta: RequestMeta) -> HookRequest | Handshake:
        """The door's check of the bytes (or its handshake), then the payload and the key. What
        the provider calls the delivery is for the caller to record (`RequestMeta.named_by`),
        before this and again with the payload: a refusal here is logged with it."""
        door = request.door
        if door is not None:  # the door comes before the payload is even parsed
            checked = await self._keys.for_request(door.verifier, request.inbound({}))
            checked = attrs.evolve(checked, url=request.url)
            found = _at_door(door, request.method, checked)
            if isinstance(found, HandshakeAnswer):
                return Handshake(found, door.rule_id)
            request = attrs.evolve(request, checked=checked, sender=found)
            if self._retention.enabled and door.verifier.signature_auth:
                # authenticated by its signature just now (a door with `auth: signature` checks
                # every request): kept as a token-authenticated request is, before its rules run
                self._retain(request, meta.request_id)
        payload = parse_payload(
            request.body, content_type(request.headers), arrays=takes_arrays(request.sub)
        )
        return request.with_payload(payload, _idempotency_key(request))

    def _retain(self, request: HookRequest, request_id: str) -> None:
        """Keep the request for replay (`hooks.retainPayloads`): never its token, never a body
        over `maxBytes`, `/wake` and `/agent` only with `builtIn`."""
        if len(request.body) > self._retention.max_bytes:
            return
        if request.sub in BUILT_IN_HOOKS and not self._retention.built_in:
            return
        self._store.keep_payload(
            StoredPayload(
                request_id=request_id,
                path=request.sub,
                query=without_token(request.query),
                headers=tuple(
                    (k.decode("latin-1"), v.decode("latin-1"))
                    for k, v in request.headers
                    if k not in AUTH_HEADERS
                ),
                body=request.body,
                created_at=time.time(),
            )
        )


def _at_door(door: Door, method: str, request: InboundRequest) -> HandshakeAnswer | str | None:
    """The provider's handshake answer, or who signed the request once the door's signature
    is checked (`Verifier.sender`; None: this door leaves the check to the rule)."""
    try:
        found = answer(door.verifier, method, request)
        if found is None and method != "POST":
            raise RequestError(
                405, "method_not_allowed", "GET is for the provider's verification handshake"
            )
        if found is None and door.checks_every_request:
            return door.verifier.verify(request)
    except SignatureError as exc:
        where = f"rule {door.rule_id!r}" if door.rule_id else door.verifier.where
        raise RequestError(
            401, "invalid_signature", f"{where}: {exc}", None, door.rule_id
        ) from None
    except HandshakeRefused as exc:
        raise RequestError(status_of(exc.code), exc.code, exc.message, None, door.rule_id) from None
    return found


def _idempotency_key(request: HookRequest) -> str | None:
    idem = request.header(b"idempotency-key")
    if idem is None:
        return None
    key = idem.decode("latin-1").strip()
    if not key or len(key) > MAX_IDEMPOTENCY_KEY or not key.isprintable():
        raise RequestError(
            400,
            "invalid_idempotency_key",
            f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} printable characters",
        )
    return key


def without_token(query: bytes) -> str:
    """The query string without its `token` parameter."""
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    return urlencode([(k, v) for k, v in pairs if k != "token"])
