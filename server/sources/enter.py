"""Entering one pulled message: the hook rules as if it had been POSTed, then the store.

`Entry.enter` gives a message from a broker the judgement of a live request to
`{hook_path}/{path}`: the door's signature when the mapping has `verify`
(`HookEndpoint.check_signature`), the payload parsed by its `content-type`, then
`HookEndpoint.judge` (the one function a live and a replayed request share) and the accept
stage's one commit (`AcceptStage.commit`, with the rule's callback and coalescing), as a live
request is judged and accepted. Its answer tells the consumer what to do with the message:

- `accepted`: committed (event or run, request log line): acknowledge it now;
- `replayed`: its idempotency key was committed before (a redelivery after a crash, or a second
  relay of a provider's delivery): acknowledge it, nothing new is stored;
- `refused`: the rules refuse it (no rule, bad signature, invalid payload: the HTTP codes,
  recorded in the request log with client `source:<name>`); acknowledge it (or dead-letter it),
  a redelivery would be refused again;
- `retry`: nothing was committed (the store is unavailable, an unexpected error): leave it
  unacknowledged so the broker delivers it again.

The idempotency key is the message's own `Idempotency-Key` header, else the provider's delivery
id a rule's `dedupe` reads (the same key as at the HTTP door, so an event relayed both ways is
stored once), else `source:<name>:<broker message id>`.
"""

from __future__ import annotations

import hashlib
import logging
import time
from datetime import UTC, datetime
from typing import Literal

import attrs

from ...engine.errors import RequestError
from ...engine.request import InboundRequest
from ...engine.signatures import Verifier
from ..ingress.dispatch import Dispatcher, RequestMeta
from ..ingress.hooks import HookEndpoint
from ..ingress.payload import content_type, parse_payload, takes_arrays
from ..ingress.request import MAX_IDEMPOTENCY_KEY
from ..logs import escape_control
from ..store.base import StoreUnavailable
from ..store.senders import source_sender

log = logging.getLogger("hookwise.sources")

Outcome = Literal["accepted", "replayed", "refused", "retry"]


@attrs.frozen
class Message:
    """A message as a broker delivered it: its id there, its body and its headers."""

    message_id: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    #: the broker says it delivered it before (counted as redelivered)
    redelivered: bool = False
    #: the signed envelope the message came in (an SNS notification), checked before the rules
    envelope: bytes | None = None


@attrs.frozen
class Entered:
    """What became of a message: the outcome, and the HTTP code it was refused with."""

    outcome: Outcome
    code: str | None = None


def _key(scope: str, value: str) -> str:
    key = f"{scope}:{value}"
    if len(key) > MAX_IDEMPOTENCY_KEY:
        key = scope.split(":", 1)[0] + ":" + hashlib.sha256(key.encode()).hexdigest()
    return key


class Entry:
    """Routes the messages of one source through the hook endpoint's rules into the store."""

    def __init__(
        self,
        source: str,
        path: str,
        endpoint: HookEndpoint,
        dispatcher: Dispatcher,
        *,
        envelope_verifier: Verifier | None = None,
    ):
        self.source = source
        #: what checks a message's envelope (SNS's signature and topic), when the source has one
        self._envelope_verifier = envelope_verifier
        self.sub = path.strip("/")
        self._endpoint = endpoint
        self._dispatcher = dispatcher
        self._path = escape_control(endpoint.settings.hook_path + "/" + self.sub)

    async def queued_runs(self) -> int:
        """Runs queued in the store now (every lane's, whoever accepted them)."""
        stats = await self._dispatcher.store.queue_stats(now=time.time())
        return stats.get("runs", (0, None))[0]

    async def enter(self, message: Message) -> Entered:
        """Judge and store `message`; never raises (but for cancellation)."""
        meta = RequestMeta(path=self._path, client=f"source:{self.source}", size=len(message.body))
        try:
            return await self._enter(message, meta)
        except RequestError as e:
            self._dispatcher.refused(meta, e.status, e.code, e.rule_id)
            log.info(
                "source %s: message %s refused: %d %s%s",
                self.source,
                escape_control(message.message_id),
                e.status,
                e.code,
                f" (rule {e.rule_id})" if e.rule_id else "",
            )
            return Entered("refused", e.code)
        except StoreUnavailable as e:
            log.warning(
                "source %s: message %s not stored, left for redelivery: %s",
                self.source,
                escape_control(message.message_id),
                e,
            )
            return Entered("retry", "store_unavailable")
        except Exception:
            log.exception(
                "source %s: message %s failed, left for redelivery",
                self.source,
                escape_control(message.message_id),
            )
            return Entered("retry", "internal_error")

    async def _enter(self, message: Message, meta: RequestMeta) -> Entered:
        # a header is anything a publisher put there: never a reason to fail (hostile input)
        headers = [
            (k.lower().encode("latin-1", "replace"), v.encode("latin-1", "replace"))
            for k, v in message.headers
        ]
        request = InboundRequest(
            path=self.sub,
            payload={},
            headers={k.lower(): v for k, v in message.headers},
            query={},
            raw_body=message.body,
            now=datetime.now(UTC),
        )
        signer = None  # who signed it, by the checks below (the door's over the envelope's)
        if message.envelope is not None and self._envelope_verifier is not None:
            wrapped = attrs.evolve(request, headers={}, raw_body=message.envelope)
            enveloped = await self._endpoint.check_signature(
                self.sub, wrapped, verifier=self._envelope_verifier
            )
            signer = None if enveloped is None else enveloped[1]
        checked = await self._endpoint.check_signature(self.sub, request)
        signer = signer if checked is None else checked[1]
        payload = parse_payload(message.body, content_type(headers), arrays=takes_arrays(self.sub))
        resolved = await self._endpoint.judge(
            self.sub,
            payload,
            lambda p: attrs.evolve(request, payload=p),
            verified=None if checked is None else checked[0],
        )
        if resolved.skipped:
            self._endpoint.accept_stage.skipped(resolved, meta)
            return Entered("accepted", "skipped")
        given = request.headers.get("idempotency-key", "").strip()
        valid = given and len(given) <= MAX_IDEMPOTENCY_KEY and given.isprintable()
        # the accept stage's one commit: the caller's key, else the provider's delivery id (as
        # at the door), else the broker's id of the message
        accepted = await self._endpoint.accept_stage.commit(
            resolved,
            meta,
            message.body,
            given if valid else None,
            fallback_key=_key(f"source:{self.source}", message.message_id),
            # the rule's check, else the door's or the envelope's; `source:<name>`: none signed
            sender=resolved.sender or signer or source_sender(self.source),
        )
        return Entered("replayed" if accepted.replayed else "accepted")
