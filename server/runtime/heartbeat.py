"""The heartbeat: an agent's main-session turn that drains its pending system events.

Each agent has its own (its own timer, coalescing and queue), on its own lane, separate from the
isolated runs, so a flood of hooks cannot starve it, nor a busy agent another's heartbeat. It runs every
`agents.defaults.heartbeat.every` (0 disables the timer) and soon after a request (`wake` with
mode `now`, a run with `wakeMode: now`). Requests that arrive within the coalescing window make
one heartbeat; at most one heartbeat runs at a time, and requests that arrive during one make
exactly one more. Events are marked consumed in the same commit that records the heartbeat, so a
crash mid-heartbeat leaves them pending for the next one.

A heartbeat takes a batch bounded by count, characters and read time (`BEAT_MAX_*`), not a
fixed hundred: under a flood it consumes thousands of events at once, and the model reads them
as a bounded digest (`digest`); when a bound stopped the batch, another heartbeat follows.

With the agent's tool grant (`agents.list[].tools`, else `agents.defaults.tools`) the model call is
the run loop of `toolloop`. Before its first tool call, a heartbeat is written `started` and its
events consumed, durably: whatever happens next (a crash, a timeout, a model error), those events
are not shown to the model again, so no tool call is repeated for them; the heartbeat's row shows
what became of them and its tool calls are recorded like a run's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from ...engine.config.agents import DEFAULT_AGENT_ID, DEFAULT_MAIN_SESSION
from ..ids import new_id
from ..store.base import EventRecord, Store
from ..store.modelcalls import BreakerPolicy
from ..store.records import HeartbeatOutcome, NewTurn
from . import report
from .ack import is_ack
from .chain import Accounting
from .prompts import MAIN_SYSTEM, heartbeat_prompt
from .providers.base import ChatMessage, ProviderError
from .providers.registry import Providers
from .toolloop import BeatTools, converse

log = logging.getLogger("hookwise.heartbeat")

#: what one heartbeat takes of the pending events, read page by page, oldest first, until one
#: of these bounds is reached (the prompt shows them as a bounded digest: see `digest`)
BEAT_MAX_EVENTS = 5000
BEAT_MAX_CHARS = 4_000_000  # of event text
BEAT_MAX_READ_SECONDS = 0.5
BEAT_PAGE = 500
HISTORY_TURNS = 20
#: the error of a heartbeat written `started` (it stays only if the beat never finished)
UNFINISHED = (
    "the heartbeat had begun calling tools and did not finish (it is still running, or the"
    " gateway stopped); its events are not shown to the model again so that no tool call is"
    " repeated"
)


class Heartbeats:
    """Schedules and runs heartbeats for one agent's main session."""

    def __init__(
        self,
        *,
        store: Store,
        providers: Providers,
        model: str,
        every: float,
        coalesce: float,
        ack_max_chars: int,
        timeout: float,
        deliveries: Callable[..., Any],
        on_delivery: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.time,
        agent_id: str = DEFAULT_AGENT_ID,
        session: str = DEFAULT_MAIN_SESSION,
        system_prompt: str | None = None,
        tools_for: BeatTools | None = None,
        accounting: Accounting | None = None,
        fallbacks: tuple[str, ...] = (),
    ) -> None:
        #: prices, breakers and the records of model calls (see `chain`)
        self._accounting = accounting or Accounting(
            store, providers, prices={}, breaker=BreakerPolicy(failures=0)
        )
        self._fallbacks = fallbacks
        #: the agent's tool grant and where a beat's calls are recorded (None: no tools)
        self._tools_for = tools_for
        self.agent_id = agent_id
        self._session = session
        self._system = system_prompt or MAIN_SYSTEM
        self._store = store
        self._providers = providers
        self._model = model
        self._every = every
        self._coalesce = coalesce
        self._ack_max_chars = ack_max_chars
        self._timeout = timeout
        self._deliveries = deliveries
        self._on_delivery = on_delivery
        self._clock = clock
        self._wakeup = asyncio.Event()
        self._request: tuple[str, float] | None = None
        self._task: asyncio.Task[None] | None = None
        self.beats = 0

    def request(self, reason: str) -> None:
        """Ask for a heartbeat soon (coalesced with other requests)."""
        if self._request is None:
            self._request = (reason, self._clock())
        self._wakeup.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name=f"hookwise-heartbeat-{self.agent_id}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        next_periodic = loop.time() + self._every if self._every > 0 else None
        while True:
            timeout = None if next_periodic is None else max(0.0, next_periodic - loop.time())
            try:
                async with asyncio.timeout(timeout):
                    await self._wakeup.wait()
                await asyncio.sleep(self._coalesce)
            except TimeoutError:
                pass
            self._wakeup.clear()
            reason, requested_at = self._request or ("interval", None)
            self._request = None
            try:
                more = await self._beat(reason, requested_at)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("heartbeat of agent %s failed", self.agent_id)
                report.heartbeat_crashed(self.agent_id)
                more = False
            if more:
                self.request("backlog")
            if self._every > 0:
                next_periodic = loop.time() + self._every

    async def _beat(self, reason: str, requested_at: float | None) -> bool:
        started = self._clock()
        hb_id = new_id()
        events, full = await self._take()
        history = await self._store.session_turns(self._session, limit=HISTORY_TURNS)
        prompt = heartbeat_prompt(events, reason, started)
        messages = [
            ChatMessage("system", self._system),
            *(ChatMessage(t.role, t.content) for t in history),
            ChatMessage("user", prompt),
        ]
        reply = error = model_used = None
        state = "succeeded"
        event_ids = tuple(e.event_id for e in events)

        async def begin() -> None:  # before the first tool call: see the module's docstring
            await self._store.finish_heartbeat(
                HeartbeatOutcome(
                    heartbeat_id=hb_id,
                    reason=reason,
                    state="started",
                    event_ids=event_ids,
                    requested_at=requested_at,
                    started_at=started,
                    finished_at=self._clock(),
                    error=UNFINISHED,
                    agent_id=self.agent_id,
                )
            )

        tools, recorder = (None, None) if self._tools_for is None else self._tools_for(hb_id, begin)
        try:
            chain = self._accounting.chain(
                (self._model, *self._fallbacks), owner_id=hb_id, agent_id=self.agent_id, attempt=0
            )
            async with asyncio.timeout(self._timeout):
                completion, _calls = await converse(
                    chain,
                    self._model,
                    messages,
                    thinking=None,
                    deadline=time.monotonic() + self._timeout,
                    tools=tools,
                )
            reply, model_used = (
                completion.text,
                f"{(chain.used or self._model).split('/', 1)[0]}/{completion.model}",
            )
        except TimeoutError:
            state, error = "timed_out", f"the heartbeat took longer than {self._timeout:g} s"
        except ProviderError as e:
            state, error = "failed", e.message
        acknowledged = reply is not None and is_ack(reply, max_chars=self._ack_max_chars)
        turns: tuple[NewTurn, ...] = ()
        delivery = None
        if reply is not None and not acknowledged:
            turns = (
                NewTurn(self._session, "user", prompt),
                NewTurn(self._session, "assistant", reply),
            )
            delivery = await self._deliveries(text=reply, heartbeat_id=hb_id, session=self._session)
        outcome = HeartbeatOutcome(
            heartbeat_id=hb_id,
            reason=reason,
            state=state,
            # consumed when answered, and once tools were called for them whatever the end
            event_ids=event_ids
            if state == "succeeded" or (recorder is not None and recorder.began)
            else (),
            requested_at=requested_at,
            started_at=started,
            finished_at=self._clock(),
            reply=reply,
            error=error,
            acknowledged=acknowledged,
            model_used=model_used,
            turns=turns,
            delivery=delivery,
            agent_id=self.agent_id,
        )
        await self._accounting.settle(hb_id)  # its spend is stored before its ending
        await self._store.finish_heartbeat(outcome)
        self.beats += 1
        if delivery is not None and delivery.state == "pending":
            self._on_delivery()
        report.heartbeat_ended(outcome, len(events), self.agent_id)
        report.delivery_planned(delivery)
        return state == "succeeded" and full

    async def _take(self) -> tuple[list[EventRecord], bool]:
        """The events this heartbeat consumes, oldest first, bounded by count, characters and
        read time (`BEAT_MAX_*`); and whether a bound stopped it (more may be pending)."""
        events: list[EventRecord] = []
        chars = 0
        deadline = time.monotonic() + BEAT_MAX_READ_SECONDS
        after = 0
        while True:
            want = min(BEAT_PAGE, BEAT_MAX_EVENTS - len(events))
            page = await self._store.pending_events(self._session, limit=want, after=after)
            for event in page:
                events.append(event)
                chars += len(event.text)
                if chars >= BEAT_MAX_CHARS:
                    return events, True
            if len(page) < want:
                return events, False
            if len(events) >= BEAT_MAX_EVENTS or time.monotonic() >= deadline:
                return events, True
            after = page[-1].seq
