"""The accept stage of the hook path: one store commit for what the judge decided.

`AcceptStage.commit` is the one commit of a judged request, whoever brought it: a live request
(`AcceptStage.accept`), a replayed one (`hookwise.server.admin.replay`) and a message pulled
from a broker (`hookwise.server.sources.enter`). It commits the judgement's actions with their
request log line and idempotency record in one group-committed transaction
(`Dispatcher.dispatch`), with the rule's callback and coalescing: nothing is answered 200/202
before that commit returns. Here the request's idempotency key is settled: the caller's
`Idempotency-Key`, else the provider's delivery id a rule's `dedupe` reads (scoped to the path:
a retry re-signed is the same delivery), else the caller's own fallback (a pulled message's
broker id), else, for a `forEach` batch, a digest of the path and the body (a batch redelivered
identically replays). A replay derives no key (it is a new request by design). A key already
committed for a different request is refused 422 `idempotency_key_reused`. For a live request,
a malformed `?wait=` is refused (400) before anything is stored.
"""

from __future__ import annotations

import hashlib

import attrs

from ...engine.config.mapping import CoalesceConfig
from ...engine.errors import RequestError
from ...engine.judgement import Judgement
from ..store.base import Accepted
from ..store.coalesce import CoalesceSpec, stored_key
from ..store.senders import TOKEN_SENDER
from .answer import Answers
from .dispatch import Dispatcher, RequestMeta
from .request import MAX_IDEMPOTENCY_KEY, HookRequest


@attrs.frozen
class Committed:
    """What the store answered for an accepted request, and how long its caller waits."""

    accepted: Accepted
    #: seconds to hold the answer open for the run (None: answer at once)
    wait: float | None


class AcceptStage:
    """Commits judged requests through the dispatcher."""

    def __init__(self, dispatcher: Dispatcher, answers: Answers | None) -> None:
        self._dispatcher = dispatcher
        self._answers = answers

    async def accept(
        self, request: HookRequest, judgement: Judgement, meta: RequestMeta
    ) -> Committed:
        """Commit a live request's judgement (`commit`), and settle how long its caller waits
        for the run; raises `RequestError` (422, 400) or `StoreUnavailable`."""
        wait = None
        if self._answers is not None:  # refused before anything is stored when malformed
            wait = self._answers.seconds(judgement.actions, judgement.respond, request.query)
        accepted = await self.commit(
            judgement,
            meta,
            request.body,
            request.idempotency_key,
            sender=judgement.sender or request.sender or TOKEN_SENDER,
        )
        return Committed(accepted, wait)

    def skipped(self, judgement: Judgement, meta: RequestMeta) -> int:
        """Record a request a transform skipped (nothing to commit) in the request log; the
        status it is answered with: the rule's fixed answer's, else 204."""
        respond = judgement.respond
        status = respond.status if respond is not None else 204
        self._dispatcher.refused(meta, status, "skipped", judgement.rule_id)
        return status

    async def commit(
        self,
        judgement: Judgement,
        meta: RequestMeta,
        body: bytes,
        idempotency_key: str | None,
        *,
        fallback_key: str | None = None,
        derive_key: bool = True,
        sender: str = TOKEN_SENDER,
    ) -> Accepted:
        """Commit the judgement's actions (one transaction) under the settled idempotency key;
        `derive_key` False (a replay) takes no key from the delivery id or the batch. Runs are
        stamped with `sender`, which the caller settles: who the rule's check or the door
        verified, else what brought the request (the token, a source; a replay is always
        `replay`). Raises `RequestError` (422) or `StoreUnavailable`."""
        idem_key = idempotency_key
        fingerprint: str | None = None
        if idem_key is None and derive_key and judgement.delivery_id is not None:
            # A verified provider id is authoritative: a retry re-signed (Mailgun signs in
            # the body) is still the same delivery, so the key is its own fingerprint.
            idem_key = fingerprint = delivery_key(meta.path, judgement.delivery_id)
        if idem_key is None:
            idem_key = fallback_key
        if idem_key is None and derive_key and judgement.batch:
            # a fan-out batch redelivered identically replays (the peer derives a key too);
            # the tab keeps it apart from every key a caller can send (printable only)
            idem_key = "\tbatch:" + digest(meta.path, body)
        if idem_key is not None and fingerprint is None:
            fingerprint = digest(meta.path, body)
        accepted = await self._dispatcher.dispatch(
            judgement.actions,
            meta=meta,
            rule_id=judgement.rule_id,
            respond=judgement.respond,
            idempotency_key=idem_key,
            fingerprint=fingerprint,
            callback_url=judgement.callback_url,
            coalesce=coalesce_spec(judgement.coalesce, judgement.coalesce_key),
            sender=sender,
        )
        if accepted.conflict:
            raise RequestError(
                422,
                "idempotency_key_reused",
                "this Idempotency-Key was already used for a different request",
                rule_id=judgement.rule_id,
            )
        return accepted


def digest(path: str, body: bytes) -> str:
    """The fingerprint of a request: its path and its body."""
    return hashlib.sha256(path.encode() + b"\n" + body).hexdigest()


def delivery_key(path: str, delivery_id: str) -> str:
    """The idempotency key of a provider's delivery: its id, scoped to the hook path."""
    key = f"delivery:{path}:{delivery_id}"
    if len(key) > MAX_IDEMPOTENCY_KEY:
        key = "delivery:" + hashlib.sha256(key.encode()).hexdigest()
    return key


def coalesce_spec(config: CoalesceConfig | None, key: str | None) -> CoalesceSpec | None:
    """A rule's `coalesce` for one request (None: the rule does not coalesce)."""
    if config is None or key is None:
        return None
    return CoalesceSpec(stored_key(key), config.window, config.max_wait, config.keep)
