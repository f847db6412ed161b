"""Isolated agent runs: a bounded pool of workers that takes queued runs from the store.

Each agent has its own pool (its run lane: `maxConcurrentRuns` slots that claim only its runs),
so a flood of hooks for one agent never holds another's slots. A run is one turn in its own session (`sessionKey`); earlier turns of the same session are its
history. Runs of one session are serial (its session lane): the store's claim takes a run only
while no run of its session runs and none older waits, so each run reads the turns its
predecessors wrote, and a session's waiting runs never hold a slot. When a run's ending is
committed, the lane claims again at once (its session's next run may be waiting). The hook's message reaches the model wrapped as external, untrusted content unless the
mapping allowed unsafe content. A run is bounded by its `timeoutSeconds` (default
`agents.defaults.timeoutSeconds`) and ends `succeeded`, `failed` or `timed_out`. Its ending is
one commit: the run's state, its transcript turns, the summary event for the main session, and
the pending delivery of the reply. The summary goes to the run's agent's main session, and `last`
delivers along that session's last route. Then `wakeMode: now` requests that agent's heartbeat.

A run whose model asks for a call that needs approval is parked (`hookwise.server.runtime.
approvals`): its conversation and pending approvals are written, it leaves its slot, and no
ending is written. Once decided it is queued again; claimed, it resumes from the stored
conversation (`parking`), in whichever process claims it.

Slots bound only the model calls; the final commit happens outside the slot so that the pool
keeps the provider busy while commits are grouped.

A run is never orphaned while the gateway lives (see docs/faults.md). A final commit that fails
(the SQLite writer process died, the store is unreachable) is retried with a growing wait
(`FINISH_RETRY`) until the store takes it: the lane still holds the run's outcome, so the model
is not called again. A retry writes only while the run is still `running` (the first try may
have been committed before its answer was lost). A claim that fails may have been committed too:
when this process is the store's only user, the lane puts back every running run of its agent
that it does not execute (`Store.release_runs`) before it claims again; with several processes,
such runs come back when their lease expires (the runtime's recovery).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping

import attrs

from ...engine.config.agents import DEFAULT_MAIN_SESSION
from .. import telemetry
from ..ids import new_id
from ..retry import Backoff
from ..store.base import NewEvent, RunRecord, Store, StoreUnavailable
from ..store.modelcalls import BreakerPolicy
from ..store.records import NewDelivery, NewTurn, RunOutcome
from ..store.senders import NO_SENDER
from . import report
from .ack import is_ack
from .callbacks import SignedOutcomes
from .chain import Accounting
from .external import wrap_external
from .parking import Parked, ParkedState, Resume
from .prompts import RUN_SYSTEM, safe_name, summary_line
from .providers.base import ChatMessage, ProviderError, ProviderTimeout
from .providers.registry import Providers
from .routing import Router
from .slots import Slots
from .toolloop import RunTools, converse

log = logging.getLogger("hookwise.runs")

HISTORY_TURNS = 40
#: what a lane plans at an ending without lifecycle subscribers: the callback only
_CALLBACK_ONLY = SignedOutcomes()
POLL_SECONDS = 5.0
#: a claim woken for a run's `not_before` comes this long after it (clocks compare in floats)
NOT_BEFORE_SLACK = 0.01
#: waits between tries of a run's final commit after it failed: 0.25 s, doubling, at most 2 s
FINISH_RETRY = Backoff(base=0.25, cap=2.0, jitter=0.0)
#: tries of a final commit that fails with an error other than the store being unavailable,
#: before the run is recorded `failed` without its result
FINISH_TRIES = 5


class RunWorkers:
    """Claims queued runs and executes them, at most `concurrency` at a time."""

    def __init__(
        self,
        *,
        store: Store,
        providers: Providers,
        default_model: str,
        default_timeout: float,
        concurrency: int,
        ack_max_chars: int,
        router: Router,
        on_heartbeat: Callable[[str], None],
        on_delivery: Callable[[], None] = lambda: None,
        on_finished: Callable[[RunRecord, RunOutcome], None] = lambda run, outcome: None,
        signed: Callable[[RunRecord, RunOutcome], tuple[NewDelivery, ...]] = _CALLBACK_ONLY,
        lease_grace: float = 60.0,
        clock: Callable[[], float] = time.time,
        agent_id: str | None = None,
        main_session: str = DEFAULT_MAIN_SESSION,
        system_prompt: str | None = None,
        tools_for: Callable[[RunRecord], RunTools | None] = lambda run: None,
        alone: bool = True,
        mapping_caps: Callable[[], Mapping[str, int]] = dict,
        accounting: Accounting | None = None,
        fallbacks: tuple[str, ...] = (),
        admit: Callable[[list[RunRecord]], Awaitable[list[RunRecord]]] | None = None,
        park: Callable[[RunRecord, Parked, str], Awaitable[bool]] | None = None,
    ) -> None:
        #: parks a run whose model asked for calls that need approval (None: none do)
        self._park = park
        #: the budget check of claimed runs (`hookwise.server.runtime.budgets`); None: no budgets
        self._admit = admit
        #: each mapping's `maxConcurrentRuns` (rule id -> cap), read at every claim (reloads)
        self._mapping_caps = mapping_caps
        #: runs executing here, per mapping (rule id)
        self._by_rule: Counter[str] = Counter()
        #: prices, breakers and the records of model calls (see `chain`)
        self._accounting = accounting or Accounting(
            store, providers, prices={}, breaker=BreakerPolicy(failures=0)
        )
        #: the models tried after the default one, for runs that name none
        self._fallbacks = fallbacks
        #: the tools a run may use (its grant, the host, where calls are recorded)
        self._tools_for = tools_for
        #: this process is the only one using the store (see `Store.release_runs`)
        self._alone = alone
        #: the agent whose runs this pool claims (None: every run, when there is one agent)
        self.agent_id = agent_id
        self._main_session = main_session
        self._system = system_prompt or RUN_SYSTEM
        self._store = store
        self._providers = providers
        self._default_model = default_model
        self._default_timeout = default_timeout
        self._concurrency = concurrency
        self._ack_max_chars = ack_max_chars
        self._router = router
        self._on_heartbeat = on_heartbeat
        self._on_delivery = on_delivery
        #: told once a run's ending is committed (waiting callers, callbacks)
        self._on_finished = on_finished
        #: the signed POSTs an ending plans (its callback, lifecycle events)
        self._signed = signed
        self._lease_grace = lease_grace
        self._clock = clock
        self._wakeup = asyncio.Event()
        self._slots = Slots(concurrency)
        self._active: dict[str, asyncio.Task[None]] = {}
        self._loop_task: asyncio.Task[None] | None = None
        self.completed = 0

    def notify(self) -> None:
        """New runs were queued."""
        self._wakeup.set()

    def notify_at(self, when: float) -> None:
        """A run becomes claimable at `when` (a coalescing window closes): claim then."""
        delay = max(0.0, when - self._clock()) + NOT_BEFORE_SLACK
        asyncio.get_running_loop().call_later(delay, self._wakeup.set)

    def start(self) -> None:
        self._wakeup.set()
        self._loop_task = asyncio.create_task(self._loop(), name="hookwise-runs")

    async def stop(self) -> list[str]:
        """Stop claiming and cancel runs in flight; returns their ids (to be re-queued)."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        interrupted = list(self._active)
        for task in self._active.values():
            task.cancel()
        for task in list(self._active.values()):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return interrupted

    async def _loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POLL_SECONDS):
                    await self._wakeup.wait()
            self._wakeup.clear()
            while True:
                await self._slots.any_free()
                grant = self._slots.grant()
                caps = self._mapping_caps()
                full = tuple(r for r, cap in caps.items() if self._by_rule[r] >= cap)
                try:
                    runs = await self._store.claim_runs(
                        # sized when the claim executes: every slot free by then (see slots)
                        limit=grant,
                        now=self._clock(),
                        lease=self._lease_grace,
                        default_timeout=self._default_timeout,
                        agent_id=self.agent_id,
                        full=full,
                    )
                except Exception as e:
                    log.error("claiming runs failed: %s: %s", type(e).__name__, e)
                    self._slots.give(grant.taken or 0)
                    await self._release_lost()
                    break
                runs = await self._within_caps(runs, caps)
                if self._admit is not None and runs:
                    claimed = len(runs)
                    runs = await self._admit(runs)
                    self._slots.give(claimed - len(runs))
                self._slots.give((grant.taken or 0) - len(runs))
                if not runs:
                    break
                for run in runs:
                    if run.rule_id is not None:
                        self._by_rule[run.rule_id] += 1
                    self._active[run.run_id] = asyncio.create_task(
                        self._execute(run), name=f"hookwise-run-{run.run_id}"
                    )

    async def _within_caps(self, runs: list[RunRecord], caps: Mapping[str, int]) -> list[RunRecord]:
        """`runs` without those past their mapping's `maxConcurrentRuns` here (one claim may
        take several runs of a mapping with room for fewer): those go back to the queue, at
        their place and without using up an attempt."""
        if not caps:
            return runs
        taken: Counter[str] = Counter()
        keep, back = [], []
        for run in runs:
            cap = caps.get(run.rule_id) if run.rule_id is not None else None
            if cap is not None and run.rule_id is not None:
                taken[run.rule_id] += 1
                if self._by_rule[run.rule_id] + taken[run.rule_id] > cap:
                    back.append(run.run_id)
                    continue
            keep.append(run)
        if back:
            try:
                await self._store.requeue_runs(back)
            except Exception as e:  # they come back when their lease expires
                log.error(
                    "putting back %d run(s) over their mapping's cap failed: %s", len(back), e
                )
        return keep

    async def _release_lost(self) -> None:
        """After a failed claim (committed or not): put back the runs it may have taken, once
        the store answers again (only when this process is the store's only user)."""
        if not self._alone:
            return
        for attempt in range(1_000_000):
            try:
                released = await self._store.release_runs(
                    agent_id=self.agent_id, keep=list(self._active)
                )
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("putting back runs of a failed claim failed: %s", e)
                await asyncio.sleep(FINISH_RETRY.step(attempt))
                continue
            if released:
                log.warning("%d run(s) of a failed claim went back to the queue", released)
            self._wakeup.set()
            return

    async def _finish(self, run: RunRecord, outcome: RunOutcome) -> None:
        """Commit the run's ending, trying again until the store takes it (see the module)."""
        try:
            await self._store.finish_run(outcome)
            return
        except Exception as e:
            log.error(
                "run %s: its final write failed (%s: %s); trying again until the store takes it",
                run.run_id,
                type(e).__name__,
                e,
            )
        refused = 0
        attempt = 0
        while True:
            await asyncio.sleep(FINISH_RETRY.step(attempt))
            attempt += 1
            try:
                written = await self._store.finish_run(outcome, again=True)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("run %s: final write try %d failed: %s", run.run_id, attempt, e)
                refused += not _unavailable(e)
                if refused >= FINISH_TRIES:
                    # the store refuses this ending itself: record the run failed without it
                    outcome, refused = _without_result(outcome, e), 0
                    # its callback and events say what is stored: failed
                    outcome = attrs.evolve(outcome, signed=self._signed(run, outcome))
                continue
            log.warning(
                "run %s: final write %s on try %d",
                run.run_id,
                "committed" if written else "had already been committed",
                attempt + 1,
            )
            return

    async def _execute(self, run: RunRecord) -> None:
        released = False
        try:
            with telemetry.run_span(run) as span:  # tracing: under the request's trace
                outcome = await self._call_model(run)
                telemetry.run_ended(span, outcome.state if outcome else "awaiting_approval")
            self._slots.give()
            released = True
            # what the run spent is in the store before its ending is visible (budgets)
            await self._accounting.settle(run.run_id)
            if outcome is None:  # parked for approval: nothing ends; its lane may go on
                self._wakeup.set()
                return
            await self._finish(run, outcome)
            # the run's session is free: its next run may be claimed now (session lanes)
            self._wakeup.set()
            self._on_finished(run, outcome)
            self.completed += 1
            report.run_ended(run, outcome)
            report.delivery_planned(outcome.delivery)
            for signed in outcome.signed:
                report.delivery_planned(signed)
            if any(
                d is not None and d.state == "pending" for d in (outcome.delivery, *outcome.signed)
            ):
                self._on_delivery()
            if run.wake_mode == "now":
                self._on_heartbeat(f"run:{run.run_id}")
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("run %s could not be finished", run.run_id)
        finally:
            if not released:
                self._slots.give()
            self._active.pop(run.run_id, None)
            if run.rule_id is not None and self._by_rule[run.rule_id] > 0:
                self._by_rule[run.rule_id] -= 1
                if self._mapping_caps().get(run.rule_id) is not None:
                    self._wakeup.set()  # a full mapping has room again

    async def _call_model(self, run: RunRecord) -> RunOutcome | None:
        """The run's ending, or None when it was parked for approval."""
        timeout = run.timeout_seconds or self._default_timeout
        # a run's `model` is its chain: the models in the order tried, separated by spaces
        models = run.model.split() if run.model else [self._default_model, *self._fallbacks]
        chain = self._accounting.chain(
            models,
            owner_id=run.run_id,
            agent_id=run.agent_id,
            rule_id=run.rule_id,
            attempt=max(1, run.attempts),
            sender=run.sender or NO_SENDER,
        )
        content = (
            run.message
            if run.allow_unsafe_external_content
            else wrap_external(run.message, source=f"hook {safe_name(run.name)}")
        )
        reply = error = model_used = None
        usage_in = usage_out = None
        state = "succeeded"
        resume: Resume | None = None
        try:
            if run.parked is not None:
                stored = ParkedState.loads(run.parked)
                content = stored.content
                resume = Resume(stored, tuple(await self._store.approvals(run_id=run.run_id)))
                messages: list[ChatMessage] = []
            else:
                history = await self._store.session_turns(run.session_key, limit=HISTORY_TURNS)
                messages = [
                    ChatMessage("system", self._system),
                    *(ChatMessage(t.role, t.content) for t in history),
                    ChatMessage("user", content),
                ]
            tools = self._tools_for(run)
            async with asyncio.timeout(timeout):
                completion, _calls = await converse(
                    chain,
                    models[0],
                    messages,
                    thinking=run.thinking,
                    deadline=time.monotonic() + timeout,
                    tools=tools,
                    resume=resume,
                )
            reply = completion.text
            model_used = f"{(chain.used or models[0]).split('/', 1)[0]}/{completion.model}"
            if completion.usage is not None:
                usage_in, usage_out = completion.usage.input_tokens, completion.usage.output_tokens
        except Parked as parked:
            if self._park is not None and await self._park(run, parked, content):
                return None
            state = "failed"
            error = "the run asked for a call that needs approval, and could not wait"
        except (TimeoutError, ProviderTimeout):
            state, error = "timed_out", f"the run took longer than {timeout:g} s and was cancelled"
        except ProviderError as e:
            state, error = "failed", e.message
        except Exception as e:
            log.exception("run %s failed unexpectedly", run.run_id)
            state, error = "failed", f"internal error ({type(e).__name__})"

        now = self._clock()
        turns: tuple[NewTurn, ...] = ()
        delivery: NewDelivery | None = None
        if reply is not None:
            turns = (
                NewTurn(run.session_key, "user", content, run.run_id),
                NewTurn(run.session_key, "assistant", reply, run.run_id),
            )
            if run.deliver:
                if is_ack(reply, max_chars=self._ack_max_chars):
                    delivery = NewDelivery(
                        delivery_id=new_id(),
                        text=reply,
                        state="skipped",
                        channel=None,
                        to=None,
                        run_id=run.run_id,
                        last_error="the reply is only a heartbeat acknowledgment",
                    )
                else:
                    delivery = await self._router.plan(
                        text=reply,
                        channel=run.channel,
                        to=run.to,
                        fallback_channel=run.fallback_channel,
                        from_mapping=run.rule_id is not None,
                        run_id=run.run_id,
                        session=self._main_session,
                    )
        summary = NewEvent(
            event_id=new_id(),
            session=self._main_session,
            text=summary_line(run.name, state, reply if reply is not None else error or ""),
            source=f"run:{run.run_id}",
            mode=run.wake_mode,
            trusted=False,
        )
        outcome = RunOutcome(
            run_id=run.run_id,
            state=state,
            finished_at=now,
            reply=reply,
            error=error,
            model_used=model_used,
            input_tokens=usage_in,
            output_tokens=usage_out,
            turns=turns,
            summary=summary,
            delivery=delivery,
        )
        return attrs.evolve(outcome, signed=self._signed(run, outcome))


def _unavailable(error: BaseException) -> bool:
    """The store could not be reached (worth trying again as is), as opposed to a write it
    refused."""
    return isinstance(error, (StoreUnavailable, TimeoutError, ConnectionError, OSError))


def _without_result(outcome: RunOutcome, error: BaseException) -> RunOutcome:
    """The run's ending as `failed`, without what the store refused to take."""
    return RunOutcome(
        run_id=outcome.run_id,
        state="failed",
        finished_at=outcome.finished_at,
        error=f"the run's result could not be stored ({type(error).__name__})",
        model_used=outcome.model_used,
        input_tokens=outcome.input_tokens,
        output_tokens=outcome.output_tokens,
    )
