"""Replaying a kept request through today's rules, and forgetting a kept payload (admin API).

With `hooks.retainPayloads` (by default 7 days, mapped hooks only) the hook endpoint keeps each
authenticated request's raw body and headers (auth headers and the `token` query parameter
removed) in their own table, never in the request log, for that long. `POST /api/requests/{id}/replay` runs it through the rules as
they are now (after a rule fix), entering the hook path at its judge stage, and commits what they
produce through its accept stage (`AcceptStage.commit`: the rule's callback and coalescing as
for a live request, but no idempotency key: a replay is a new request), as a new request log
line (client `replay`; a request a transform skips is logged `skipped`); `?dryRun=true` answers
the actions and stores nothing.
`DELETE /api/requests/{id}/payload` forgets one payload at once.
"""

from __future__ import annotations

import attrs
from litestar import Controller, Request, delete, post
from litestar.params import Parameter

from ...engine.actions import WakeAction
from ...engine.config.convert import camel
from ...engine.errors import RequestError
from ..ingress.dispatch import RequestMeta
from ..ingress.payload import content_type, parse_payload, takes_arrays
from ..lifecycle.gateway import Gateway
from ..store.senders import REPLAY_SENDER
from .api import admin_guard, store_of
from .audit import note
from .models import PayloadDeleted, ReplayAction, Replayed, ReplayPreview
from .scopes import requires

NOT_KEPT = (
    "no payload is kept for this request (hooks.retainPayloads is off, keeps /wake and /agent only"
    " with builtIn, or the body was over maxBytes; or it was pruned or deleted)"
)


def _action(a: object) -> ReplayAction:
    fields = {camel(k): v for k, v in attrs.asdict(a).items()}  # type: ignore[arg-type]
    return ReplayAction(kind="wake" if isinstance(a, WakeAction) else "agent", fields=fields)


class ReplayController(Controller):
    path = "/api"
    guards = [admin_guard]
    tags = ["recover"]
    security = [{"bearer": []}]

    @post(
        "/requests/{request_id:str}/replay",
        status_code=200,
        summary="Run a kept request through today's rules",
        opt=requires("operate", audit="replay"),
    )
    async def replay(
        self,
        request: Request,
        request_id: str,
        dry_run: bool = Parameter(
            query="dryRun", default=False, description="answer the actions, store nothing"
        ),
    ) -> ReplayPreview | Replayed:
        note(request, dryRun=dry_run or None)
        return await replay_request(request.app.state.gateway, request_id, dry_run=dry_run)

    @delete(
        "/requests/{request_id:str}/payload",
        status_code=200,
        summary="Forget a kept payload now",
        opt=requires("admin", audit="forget_payload"),
    )
    async def forget(self, request: Request, request_id: str) -> PayloadDeleted:
        if not await store_of(request).delete_payload(request_id):
            raise RequestError(404, "payload_not_found", NOT_KEPT)
        return PayloadDeleted(request_id=request_id)


async def replay_request(
    gateway: Gateway, request_id: str, *, dry_run: bool
) -> ReplayPreview | Replayed:
    """Run the kept request `request_id` through today's rules; dispatch what they produce unless
    `dry_run` (the console and the API both call this)."""
    kept = await gateway.store.get_payload(request_id)
    if kept is None:
        raise RequestError(404, "payload_not_found", NOT_KEPT)
    endpoint = gateway.hooks
    if endpoint is None:
        raise RequestError(409, "hooks_disabled", "hooks are disabled: nothing to replay into")
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in kept.headers]
    try:
        payload = parse_payload(kept.body, content_type(headers), arrays=takes_arrays(kept.path))
        resolved = await endpoint.resolve(
            kept.path, payload, headers, kept.query.encode("latin-1"), kept.body
        )
    except RequestError as e:
        raise RequestError(
            422,
            "replay_refused",
            f"today's rules refuse this request: {e.message} ({e.code})",
            rule_id=e.rule_id,
        ) from None
    if dry_run:
        return ReplayPreview(
            rule=resolved.rule_id,
            skipped=resolved.skipped,
            actions=[_action(a) for a in resolved.actions],
        )
    meta = RequestMeta(
        path=endpoint.settings.hook_path + "/" + kept.path,
        client="replay",
        size=len(kept.body),
    )
    accept = endpoint.accept_stage  # the one commit a live request goes through
    if resolved.skipped:
        status = accept.skipped(resolved, meta)
    else:  # a replay is a new request: no idempotency key derived from the original
        accepted = await accept.commit(
            resolved,
            meta,
            kept.body,
            None,
            derive_key=False,
            # the operator's act, wherever the signature was checked (the door or the rule)
            sender=REPLAY_SENDER,
        )
        status = accepted.status
    logged = await gateway.store.get_request(meta.request_id)
    return Replayed(
        request_id=meta.request_id,
        replay_of=request_id,
        status=status,
        rule=resolved.rule_id,
        skipped=resolved.skipped,
        event_ids=list(logged.event_ids) if logged else [],
        run_ids=list(logged.run_ids) if logged else [],
    )
