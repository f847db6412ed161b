"""The answer stage of the hook path: what the caller is sent, and the wait for a run.

The last stage after door -> body -> judge -> accept (see `hookwise.server.ingress.hooks`):
`committed` answers an accepted request (200/202, the mapping's fixed answer, the
`Idempotency-Replayed` header), `judged` one that was judged but not stored (204 or the
mapping's answer when a transform skipped it; `200 {"ok": true, "ignored": true}` when no rule
matched on a path that acknowledges such requests), `handshake` a provider's handshake.

The wait: hold an accepted agent request open until its run ends.

A caller asks to wait with the agent payload's `wait` field, a `?wait=` query parameter, or the
mapping's `respond: {wait: 30s}`; the longest asked is bounded by `hooks.maxWait`. The request
is accepted and committed as without a wait, and only then held (`RunWaiters`: a connection,
never a lane slot). When the run ends in time the answer is `200 {ok, runId, state, reply,
model, usage}` (`error` for a failed run); otherwise it is the usual `202` with a `Location`
header: the run's status URL, `{hook_path}/runs/<runId>?key=<capability>`.

The status URL is polled with `GET` and the hook token. Its capability is an HMAC of the run id
under a key derived from the hook token, so only the caller that was given the URL can read that
run: a run id without its key, or with another run's key, is answered `404 run_not_found`,
exactly as a run that does not exist (nothing tells the two apart). Every process of a gateway
derives the same key, so any of them answers the URL; a new hook token retires the old URLs.

A waiting caller that goes away stops the wait (counted `cancelled`); the run goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl

import msgspec
from litestar.types import Receive, Send

from ...engine.actions import Action, AgentAction
from ...engine.config.durations import Duration
from ...engine.config.mapping import RespondConfig
from ...engine.errors import RequestError
from ...engine.judgement import Judgement
from ...engine.signatures.handshakes import HandshakeAnswer
from ..runtime.waiting import FINAL_STATES, RunWaiters, WaitingFull
from ..store.base import Accepted, RunRecord
from .asgi import encode_json, send_error, send_json
from .dispatch import respond_body

#: the sub-path of the run status URLs under the hook path
STATUS_PREFIX = "runs/"
_NOT_FOUND = RequestError(404, "run_not_found", "no such run (or not yours to read)")
_decode = msgspec.json.Decoder()
_REPLAYED = [(b"idempotent-replayed", b"true")]
#: the answer to a request no rule matched on a path that acknowledges them
_IGNORED = b'{"ok":true,"ignored":true,"code":"no_rule_matched"}'


async def judged(send: Send, judgement: Judgement) -> int:
    """Answer a request judged but not stored: ignored (no rule matched, acknowledged) or
    skipped (204, or the mapping's fixed answer)."""
    if judgement.ignored:
        return await send_json(send, 200, _IGNORED)
    respond = judgement.respond
    if respond is None:
        return await send_json(send, 204, None)
    headers = [(k.lower().encode(), v.encode()) for k, v in respond.headers.items()]
    return await send_json(send, respond.status, respond_body(respond), headers)


async def handshake(send: Send, found: HandshakeAnswer) -> int:
    """Answer a provider's verification handshake as its scheme says."""
    hdrs: list[tuple[bytes, bytes]] = [(k.lower().encode(), v.encode()) for k, v in found.headers]
    hdrs += [
        (b"content-type", found.content_type.encode()),
        (b"content-length", str(len(found.body)).encode()),
    ]
    await send({"type": "http.response.start", "status": found.status, "headers": hdrs})
    await send({"type": "http.response.body", "body": found.body, "more_body": False})
    return found.status


def outcome_body(run: RunRecord) -> dict[str, Any]:
    """A run as its caller reads it: the reply as the console shows it, the model, the usage."""
    body: dict[str, Any] = {"ok": True, "runId": run.run_id, "state": run.state}
    if run.state not in FINAL_STATES:
        return body
    body.update(
        reply=run.reply,
        model=run.model_used,
        usage={"inputTokens": run.input_tokens, "outputTokens": run.output_tokens},
    )
    if run.error is not None:
        body["error"] = run.error
    return body


class Answers:
    """Waits for runs and answers their status URLs, for one hook endpoint."""

    def __init__(self, waiters: RunWaiters, *, hook_path: str, token: str, max_wait: float) -> None:
        self._waiters = waiters
        self._hook_path = hook_path
        self._key = hashlib.sha256(b"hookwise run status\0" + token.encode()).digest()
        self.max_wait = max_wait

    # --- the wait -----------------------------------------------------------------------------

    def seconds(
        self, actions: Sequence[Action], respond: RespondConfig | None, query: bytes
    ) -> float | None:
        """How long this request waits (None: not at all): the longest asked, at most maxWait.
        Only a request that made exactly one run waits."""
        runs = [a for a in actions if isinstance(a, AgentAction)]
        if len(runs) != 1 or len(actions) != 1:
            return None
        if respond is not None and respond.wait is None:
            return None  # the mapping's fixed answer is what its caller gets
        asked = [runs[0].wait, respond.wait if respond is not None else None, _query_wait(query)]
        longest = max((float(w) for w in asked if w), default=0.0)
        return min(longest, self.max_wait) or None

    async def hold(
        self,
        accepted_body: bytes,
        seconds: float,
        receive: Receive,
        send: Send,
        headers: list[tuple[bytes, bytes]],
    ) -> int:
        """Wait for the run the accepted answer names; answer with its outcome or the 202."""
        run_id = _decode.decode(accepted_body).get("runId")
        if not isinstance(run_id, str):
            return await send_json(send, 202, accepted_body, headers)
        location = [(b"location", self.location(run_id).encode())]
        waiting = asyncio.ensure_future(self._waiters.wait(run_id, seconds))
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait((waiting, gone), return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not waiting.done():
                waiting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await waiting
        if waiting.cancelled():
            return 499  # the caller went away: nothing to send, nobody to send it to
        try:
            run = waiting.result()
        except WaitingFull:
            run = None
        if run is None:
            return await send_json(send, 202, accepted_body, [*headers, *location])
        return await send_json(send, 200, encode_json(outcome_body(run)), [*headers, *location])

    # --- the status URL -----------------------------------------------------------------------

    def _capability(self, run_id: str) -> str:
        return hmac.new(self._key, run_id.encode(), hashlib.sha256).hexdigest()[:43]

    def location(self, run_id: str) -> str:
        return f"{self._hook_path}/{STATUS_PREFIX}{run_id}?key={self._capability(run_id)}"

    async def status(self, sub: str, query: bytes, send: Send) -> int:
        """Answer `GET {hook_path}/runs/<runId>?key=...` (the hook token already checked)."""
        run_id = sub[len(STATUS_PREFIX) :]
        key = dict(parse_qsl(query.decode("latin-1"))).get("key", "")
        if not run_id or not hmac.compare_digest(key.encode(), self._capability(run_id).encode()):
            return await send_error(send, _NOT_FOUND)
        run = await self._waiters.read(run_id)
        if run is None:
            return await send_error(send, _NOT_FOUND)
        body = encode_json(outcome_body(run))
        if run.state not in FINAL_STATES:
            return await send_json(send, 202, body, [(b"retry-after", b"1")])
        return await send_json(send, 200, body)


def _query_wait(query: bytes) -> float | None:
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True) if query else []
    raw = dict(pairs).get("wait")
    if raw is None:
        return None
    if raw == "":
        return float("inf")  # `?wait`: as long as the gateway allows
    try:
        return float(Duration.parse(raw))
    except ValueError:
        raise RequestError(
            400, "invalid_field", "wait must be a number of seconds or a duration such as 30s"
        ) from None


async def _disconnected(receive: Receive) -> None:
    """Return once the client has gone away (the body is already read)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def committed(
    send: Send,
    receive: Receive | None,
    judgement: Judgement,
    accepted: Accepted,
    wait: float | None = None,
    answers: Answers | None = None,
) -> int:
    """Answer an accepted request: the store's answer with the mapping's headers, at once, or,
    when it waits (`wait`, an agent run accepted 202), once its run ends."""
    respond = judgement.respond
    extra = list(respond.headers.items()) if respond is not None else []
    hdrs = [(k.lower().encode(), v.encode()) for k, v in extra]
    if accepted.replayed:
        hdrs += _REPLAYED
    if wait and accepted.status == 202 and answers is not None and receive is not None:
        return await answers.hold(accepted.body, wait, receive, send, hdrs)
    return await send_json(send, accepted.status, accepted.body or None, hdrs)
