"""The runtime: what makes accepted events and runs happen, behind the dispatcher.

`Runtime` wires, for each agent of the roster (`agents.list`, or the single `main`), its
heartbeat and its run lane, and the shared delivery worker and model providers, to the store, listens to the dispatcher for new work, and owns their start-up (seed the last
route, recover runs a crash left running) and shutdown (runs in flight go back to the queue
without using up an attempt).

When several processes share the store (`shared`: PostgreSQL, or `--workers N`), one of them is
the heartbeat leader for every agent (a lock in the store; another takes over within
`LEAD_EVERY` seconds when it dies), the others pass heartbeat requests to it through the store's
signals (one topic per agent), new runs are
signalled to every process's idle workers, and work a dead process held is taken back once its
lease expires (`RECOVER_EVERY`), never while its owner may be alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...engine.config.agents import Agent, Roster
from ...engine.config.grants import Entry
from ...engine.config.models import Config
from ..store.base import NewEvent, NewRun, RunRecord, Store
from ..store.modelcalls import BreakerPolicy
from ..store.records import Route, RunOutcome
from .budgets import Budgets
from .callbacks import SignedOutcomes
from .chain import Accounting
from .deliveries import DeliveryWorker
from .heartbeat import Heartbeats
from .providers.base import Usage
from .providers.registry import Providers
from .routing import Router
from .runs import RunWorkers
from .toolloop import BeatTools, LaneTools, StoreRecorder
from .waiting import TOPIC as WAIT_TOPIC
from .waiting import RunWaiters

log = logging.getLogger("hookwise.runtime")

LEAD_EVERY = 2.0
RECOVER_EVERY = 10.0


class Runtime:
    """Heartbeats, run workers and deliveries for one gateway process."""

    def __init__(
        self,
        config: Config,
        store: Store,
        *,
        channels: Mapping[str, Any],
        base_dir: Path | None = None,
        shared: bool = False,
        waiters: RunWaiters | None = None,
    ) -> None:
        self._config = config
        #: the requests of this process waiting for runs to end (`wait`)
        self.waiters = waiters or RunWaiters(
            store, max_waiting=config.hooks.limits.max_waiting, shared=shared
        )
        self._store = store
        self.shared = shared
        self.leader = False
        self._tasks: list[asyncio.Task[None]] = []
        self._signalling: set[str] = set()
        self._started = False
        self._signal_again: set[str] = set()
        defaults = config.agents.defaults
        delivery = config.delivery
        self.deliveries = DeliveryWorker(
            store=store,
            channels=channels,
            max_attempts=delivery.max_attempts,
            base_delay=delivery.base_delay_seconds,
            max_delay=delivery.max_delay_seconds,
            concurrency=delivery.concurrency,
        )
        self.providers = Providers.from_config(config.models, base_dir=base_dir)
        self.router = Router(store, channels, defaults.fallback_channel)
        self.roster = Roster.from_config(config)
        breaker = config.models.breaker
        #: prices, breakers and the records of every model call (see `chain`)
        self.accounting = Accounting(
            store,
            self.providers,
            prices=config.models.prices,
            breaker=BreakerPolicy(
                failures=breaker.failures,
                window=float(breaker.window),
                cooldown=float(breaker.cooldown),
            ),
        )
        from ..tools.host import ToolHost

        #: the MCP servers of this process (connected on first use)
        self.tool_host = ToolHost(config.tools, base_dir=Path(base_dir or os.getcwd()))
        #: a mapping's tool grant by rule id (the gateway points it at its live rules)
        self.rule_tools: Callable[[str], Sequence[Entry]] = lambda rule_id: ()
        #: each mapping's `maxConcurrentRuns` by rule id (the gateway points it at its rules)
        self.mapping_caps: Callable[[], Mapping[str, int]] = dict
        #: the budget check of claimed runs (the gateway sets it when a budget is configured)
        self.budgets: Budgets | None = None
        from .approvals import Approvals

        #: tool calls that wait for a person (`hookwise.server.runtime.approvals`)
        self.approvals = Approvals(
            store, config.approvals, on_resumed=self.resumed, shared=self.shared
        )
        several = len(self.roster.agents) > 1
        retention = config.hooks.payload_retention
        # tool results are kept where payloads of every kind are (a written retainPayloads)
        keep_payloads = retention is not None and retention.keeps_built_in
        #: approvers see a call's arguments only where payloads are kept
        self.approvals.show_arguments = keep_payloads
        #: each agent's heartbeat and run lane, by agent id
        self.heartbeats: dict[str, Heartbeats] = {}
        self.lanes: dict[str, RunWorkers] = {}
        for agent in self.roster.agents:
            self.heartbeats[agent.id] = Heartbeats(
                store=store,
                providers=self.providers,
                model=agent.default_model,
                every=float(agent.heartbeat.every),
                coalesce=agent.heartbeat.coalesce_ms / 1000.0,
                ack_max_chars=agent.heartbeat.ack_max_chars,
                timeout=agent.timeout_seconds,
                deliveries=self.router.plan,
                on_delivery=self.deliveries.notify,
                agent_id=agent.id,
                session=agent.main_session,
                system_prompt=agent.system_prompt,
                tools_for=BeatTools(
                    self.tool_host, store, agent_tools=agent.tools, keep_payloads=keep_payloads
                ),
                accounting=self.accounting,
                fallbacks=agent.models.fallbacks,
            )
            self.lanes[agent.id] = RunWorkers(
                store=store,
                providers=self.providers,
                default_model=agent.default_model,
                default_timeout=agent.timeout_seconds,
                concurrency=agent.max_concurrent_runs,
                ack_max_chars=agent.heartbeat.ack_max_chars,
                router=self.router,
                on_heartbeat=self._heartbeat_of(agent),
                on_delivery=self.deliveries.notify,
                on_finished=self._run_finished,
                signed=SignedOutcomes(config.events.subscribers),
                lease_grace=defaults.lease_grace_seconds,
                agent_id=agent.id if several else None,
                main_session=agent.main_session,
                system_prompt=agent.system_prompt,
                tools_for=LaneTools(
                    self.tool_host,
                    StoreRecorder(store),
                    agent_tools=agent.tools,
                    rule_tools=lambda rule_id: self.rule_tools(rule_id),
                    keep_payloads=keep_payloads,
                    over_budget=self._crossed,
                ),
                alone=not shared,
                mapping_caps=lambda: self.mapping_caps(),
                accounting=self.accounting,
                fallbacks=agent.models.fallbacks,
                admit=self._admit,
                park=self.approvals.park,
            )
        self._topics = {
            a.id: "heartbeat" if a.default else f"heartbeat_{i}"
            for i, a in enumerate(self.roster.agents)
        }
        self._recover_every = max(0.5, min(RECOVER_EVERY, defaults.lease_grace_seconds / 2))

    @property
    def runs(self) -> RunWorkers:
        """The default agent's run lane."""
        return self.lanes[self.roster.default.id]

    def _heartbeat_of(self, agent: Agent) -> Callable[[str], None]:
        return lambda reason: self.request_heartbeat(reason, agent.id)

    def request_heartbeat(self, reason: str, agent_id: str | None = None) -> None:
        """A heartbeat of an agent (default: the default agent) soon: here when this process
        leads, else through the leader."""
        agent_id = agent_id or self.roster.default.id
        if self.leader:
            self.heartbeats[agent_id].request(reason)
        else:
            self._signal(self._topics[agent_id])

    def _run_finished(self, run: RunRecord, outcome: RunOutcome) -> None:
        """A lane of this process committed a run's ending: wake its waiters, here and (through
        the store) in every other process."""
        self.waiters.finished(run.run_id)
        if self.shared:
            self._signal(WAIT_TOPIC)

    def _notify_lanes(self) -> None:
        for lane in self.lanes.values():
            lane.notify()

    def _signal(self, topic: str) -> None:
        """Tell the other processes, coalescing: while one notification is on its way, more
        requests for the same topic make exactly one more, not one each."""
        if topic in self._signalling:
            self._signal_again.add(topic)
            return
        self._signalling.add(topic)

        async def send() -> None:
            try:
                while True:
                    self._signal_again.discard(topic)
                    await self._store.notify(topic)
                    if topic not in self._signal_again:
                        return
            except Exception:
                log.exception("signalling %s failed", topic)
            finally:
                self._signalling.discard(topic)

        self._spawn(send())

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.append(task)
        task.add_done_callback(self._tasks.remove)

    def on_accepted(self, events: Sequence[NewEvent], runs: Sequence[NewRun]) -> None:
        """Dispatcher listener: new work was committed."""
        for agent_id in {r.agent_id for r in runs}:
            lane = self.lanes.get(agent_id)
            (lane.notify if lane is not None else self._notify_lanes)()
        for r in runs:  # a coalescing run: claimable when its window closes
            if r.not_before is not None:
                lane = self.lanes.get(r.agent_id)
                for each in [lane] if lane is not None else self.lanes.values():
                    each.notify_at(r.not_before)
        if runs and self.shared:
            self._signal("runs")
        woken = {e.session for e in events if e.mode == "now"}
        for session in woken:
            agent = self.roster.by_main_session.get(session, self.roster.default)
            self.request_heartbeat("wake", agent.id)

    async def _admit(self, runs: list[RunRecord]) -> list[RunRecord]:
        """Claimed runs that may start: all of them unless budgets are configured."""
        return runs if self.budgets is None else await self.budgets.admit(runs)

    async def _crossed(self, run: RunRecord, usage: Usage | None) -> str | None:
        """Why a run in progress must stop calling tools (a budget crossed); None: go on."""
        return None if self.budgets is None else await self.budgets.crossed(run, usage)

    def released(self) -> None:
        """Held work was released (a pause lifted): every lane claims, in every process, and
        every agent's heartbeat takes the wakes that were held. (Before `start`, nothing to
        tell: the lanes claim as they start.)"""
        if not self._started:
            return
        self._notify_lanes()
        if self.shared:
            self._signal("runs")
        for agent in self.roster.agents:
            self.request_heartbeat("resume", agent.id)

    def resumed(self) -> None:
        """Runs decided out of `awaiting_approval` are queued again: every lane claims, in every
        process."""
        if not self._started:
            return
        self._notify_lanes()
        if self.shared:
            self._signal("runs")

    def requeued(self, kind: str) -> None:
        """Failed work went back to the queue (an admin retry): `run` or `delivery`."""
        if kind == "run":
            self.runs.notify()
            if self.shared:
                self._signal("runs")
        else:
            self.deliveries.notify()

    async def start(self) -> None:
        self._started = True
        now = time.time()
        route = self._config.session.last_route
        if route is not None:
            await self._store.set_last_route(
                self.roster.default.main_session,
                Route(route.channel, route.to),
                now=now,
                only_if_unset=True,
            )
        await self._recover(now)
        if not self.shared:
            await self._store.recover_deliveries()
            self.leader = True
            self._start_heartbeats()
        else:
            self._store.subscribe("runs", self._notify_lanes)
            for agent_id, topic in self._topics.items():
                beat = self.heartbeats[agent_id]
                self._store.subscribe(topic, self._signal_to(beat))
            self._tasks.append(asyncio.create_task(self._lead_forever(), name="hookwise-lead"))
            self._tasks.append(
                asyncio.create_task(self._recover_forever(), name="hookwise-recover")
            )
        self.waiters.start()
        self._tasks.append(
            asyncio.create_task(self.approvals.sweep_forever(), name="hookwise-approvals")
        )
        for lane in self.lanes.values():
            lane.start()
        self.deliveries.start()

    def _signal_to(self, beat: Heartbeats) -> Callable[[], None]:
        """What a heartbeat signal from another process does here: ask `beat` for a heartbeat,
        when this process leads the heartbeats."""

        def signal() -> None:
            if self.leader:
                beat.request("signal")

        return signal

    def _start_heartbeats(self) -> None:
        for beat in self.heartbeats.values():
            beat.start()

    async def _stop_heartbeats(self) -> None:
        for beat in self.heartbeats.values():
            await beat.stop()

    async def _recover(self, now: float) -> None:
        requeued, failed = await self._store.recover_runs(
            max_attempts=self._config.agents.defaults.max_attempts,
            now=now,
            expired_only=self.shared,
        )
        if requeued or failed:
            log.warning("recovered interrupted runs: %d re-queued, %d failed", requeued, failed)
            self._notify_lanes()

    async def _recover_forever(self) -> None:
        while True:
            await asyncio.sleep(self._recover_every)
            try:
                await self._recover(time.time())
            except Exception:
                log.exception("recovering runs failed")

    async def _lead_forever(self) -> None:
        """Try to become (or stay) the heartbeat leader."""
        while True:
            try:
                held = await self._store.try_lead("heartbeat")
            except Exception:
                log.exception("the leadership check failed")
                held = False
            if held and not self.leader:
                log.info("process %d now leads the heartbeat", os.getpid())
                self.leader = True
                self._start_heartbeats()
                for beat in self.heartbeats.values():
                    beat.request("leader")
            elif not held and self.leader:
                log.warning("heartbeat leadership lost")
                self.leader = False
                await self._stop_heartbeats()
            await asyncio.sleep(LEAD_EVERY)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        interrupted = [i for lane in self.lanes.values() for i in await lane.stop()]
        await self._stop_heartbeats()
        if self.leader and self.shared:
            await self._store.resign("heartbeat")
        await self.deliveries.stop()
        await self.accounting.drain(timeout=5.0)
        if interrupted:
            await self._store.requeue_runs(interrupted)
            log.info("%d run(s) in flight went back to the queue", len(interrupted))
        await self.providers.aclose()
        await self.tool_host.aclose()
