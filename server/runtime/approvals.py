"""Tool calls that wait for a person: parking a run, deciding its approvals, timing them out.

`Approvals` is the runtime's one place for them. `park` turns the tool loop's `Parked` into the
stored state (`parking.ParkedState`) and one pending `approvals` row per gated call, each with a
random single-use token (only its SHA-256 is stored; channels carry the token). `decide` is what
every surface calls (admin API, CLI through it, console, signed links, channel callbacks): it
checks who decides, makes the store's conditional update and, when the run's last pending
approval is decided, wakes the lanes here and in every process (the run is `queued` again and
resumes wherever it is claimed). `sweep_forever` times out what waited too long: in one process,
the `approvals` leader, when several share the store (as the alert evaluator; the store's update
is conditional besides, so each approval is decided once even by two leaders in a race).

Never silent: each decision, refused or not, is a log line with the ids (never the arguments
nor a token), a row in the store, and `hookwise_approval_decisions{outcome}`.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from ...engine.config.approvals import ApprovalsConfig
from .. import metrics
from ..ids import new_id
from ..store.approvals import ApprovalRecord, Decided
from ..store.base import RunRecord, Store
from .parking import Parked, ParkedState

log = logging.getLogger("hookwise.approvals")

#: the longest wait between two timeout sweeps
SWEEP_MAX = 5.0
#: the leadership (`Store.try_lead`) of the process that sweeps when several share the store
LEADERSHIP = "approvals"


async def _unknown(run: RunRecord) -> tuple[str | None, bool]:
    return None, False


def token_hash(token: str) -> str:
    """What the store keeps of an approval token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@attrs.frozen
class Request:
    """A new approval and its token (held in memory only, to be sent where people are)."""

    approval: ApprovalRecord
    token: str


class Approvals:
    """Parking, deciding and timing out approvals for one gateway process."""

    def __init__(
        self,
        store: Store,
        config: ApprovalsConfig,
        *,
        on_resumed: Callable[[], None],
        shared: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self.config = config
        #: several processes share the store: only the `approvals` leader sweeps
        self._shared = shared
        self._on_resumed = on_resumed
        self._clock = clock
        #: whether approvers see a call's arguments (where payloads are kept) or only their digest
        self.show_arguments = False
        #: who sent the hook that started a run (its request's client), and whether its
        #: signature was verified (the gateway points this at its request log and rules)
        self.sender_of: Callable[[RunRecord], Awaitable[tuple[str | None, bool]]] = _unknown
        #: told of each new request with its token (channels that ask people; none: listed only)
        self.on_request: Callable[[Request], None] = lambda request: None

    async def park(self, run: RunRecord, parked: Parked, content: str) -> bool:
        """Write the run's wait; False when it could not be parked (it is not running here)."""
        now = self._clock()
        usage = parked.usage
        state = ParkedState(
            conversation=parked.conversation,
            results=parked.results,
            content=content,
            recorded=parked.recorded,
            input_tokens=usage.input_tokens if usage else None,
            output_tokens=usage.output_tokens if usage else None,
        )
        requests: list[Request] = []
        try:
            sender, verified = await self.sender_of(run)
        except Exception:
            log.exception("run %s: who sent its hook could not be read", run.run_id)
            sender, verified = None, False
        for i, gated in enumerate(parked.gated):
            arguments = json.dumps(gated.call.arguments or {}, sort_keys=True)
            token = secrets.token_urlsafe(24)
            record = ApprovalRecord(
                approval_id=new_id(),
                run_id=run.run_id,
                seq=i + 1,
                call_id=gated.call.id,
                server=gated.server,
                tool=gated.tool,
                arguments=arguments,
                arguments_digest="sha256:" + hashlib.sha256(arguments.encode()).hexdigest(),
                token_hash=token_hash(token),
                state="pending",
                created_at=now,
                expires_at=now + float(self.config.timeout),
                agent_id=run.agent_id,
                rule_id=run.rule_id,
                session_key=run.session_key,
                sender=sender,
                verified=verified,
            )
            requests.append(Request(record, token))
        written = await self._store.park_run(
            run.run_id, state.dumps(), [r.approval for r in requests]
        )
        if not written:
            log.error("run %s: could not be parked for approval: it is not running", run.run_id)
            return False
        log.info(
            "run %s: waiting for approval of %d call(s): %s",
            run.run_id,
            len(requests),
            ", ".join(
                f"{r.approval.approval_id} {r.approval.server}.{r.approval.tool}" for r in requests
            ),
        )
        for request in requests:
            try:
                self.on_request(request)
            except Exception:
                log.exception("approval %s: asking for it failed", request.approval.approval_id)
        return True

    async def decide(
        self,
        *,
        approve: bool,
        by: str,
        via: str,
        approval_id: str | None = None,
        token: str | None = None,
        approver: tuple[str, str] | None = None,
        refuse: str | None = None,
    ) -> Decided:
        """Decide an approval by id (an operator) or by token (a channel, a link). `approver`
        (channel, verified user id) must be a listed approver, else the decision is refused;
        `refuse` refuses it outright (a forged link), recorded like any refusal."""
        if approver is not None and not self.config.approves(*approver):
            refuse = f"{approver[0]}:{approver[1]} is not a listed approver"
        decided = await self._store.decide_approval(
            approval_id=approval_id,
            token_hash=token_hash(token) if token is not None else None,
            state="approved" if approve else "denied",
            by=by,
            via=via,
            now=self._clock(),
            refuse=refuse,
        )
        shown = decided.approval.approval_id if decided.approval else "(unknown)"
        if decided.counted:
            outcome = "approved" if approve else "denied"
            metrics.approval_decision(outcome)
            log.info(
                "approval %s of run %s: %s by %s via %s",
                shown,
                decided.approval.run_id if decided.approval else "-",
                outcome,
                by,
                via,
            )
        else:
            metrics.approval_decision("refused")
            log.warning("approval %s: a decision by %s via %s was refused", shown, by, via)
        if decided.resumed:
            self._on_resumed()
        return decided

    async def refuse_unauthenticated(self, via: str) -> None:
        """A callback whose authentication failed (a forged request): recorded, counted."""
        await self._store.decide_approval(
            token_hash="",
            state="denied",
            by="unauthenticated",
            via=via,
            now=self._clock(),
            refuse=f"a {via} callback failed authentication",
        )
        metrics.approval_decision("refused")
        log.warning("a %s approval callback failed authentication: refused", via)

    async def sweep(self) -> int:
        """Time out what waited too long; the runs released. When several processes share the
        store, only the one holding the `approvals` leadership sweeps (the others: 0)."""
        if self._shared and not await self._store.try_lead(LEADERSHIP):
            return 0
        state = "approved" if self.config.on_timeout == "approve" else "timed_out"
        released = await self._store.expire_approvals(now=self._clock(), state=state)
        if released:
            log.info("approvals timed out (%s): runs %s resume", state, ", ".join(released))
            for _ in released:
                metrics.approval_decision("timed_out")
            self._on_resumed()
        return len(released)

    async def sweep_forever(self) -> None:
        every = max(0.2, min(SWEEP_MAX, float(self.config.timeout) / 4))
        while True:
            await asyncio.sleep(every)
            try:
                await self.sweep()
            except Exception:
                log.exception("the approvals' timeout sweep failed")


def link_secret(auth: Any) -> str | None:
    """The key that signs approval links: derived from every admin token of `gateway.auth`
    (the single `token` and the scoped `tokens`), so a link is worthless to whoever holds no
    admin token and every link is void once the tokens change; None without an admin token."""
    tokens = sorted({t.token for t in auth.tokens if t.token} | ({auth.token} - {None, ""}))
    if not tokens:
        return None
    return hashlib.sha256(("approval-links\0" + "\0".join(tokens)).encode()).hexdigest()


def link_signature(secret: str, approval_id: str) -> str:
    """The signature of a console link to one approval (HMAC-SHA256 over its id)."""
    return hmac.new(secret.encode(), f"approval:{approval_id}".encode(), hashlib.sha256).hexdigest()
