"""The runtime: what makes accepted events and runs happen, behind the dispatcher.

`Runtime` wires the heartbeat lane, the run workers, the delivery worker and the model providers
to the store, listens to the dispatcher for new work, and owns their start-up (seed the last
route, recover runs a crash left running) and shutdown (runs in flight go back to the queue
without using up an attempt).

When several processes share the store (`shared`: PostgreSQL, or `--workers N`), one of them is
the heartbeat leader (a lock in the store; another takes over within `LEAD_EVERY` seconds when
it dies), the others pass heartbeat requests to it through the store's signals, new runs are
signalled to every process's idle workers, and work a dead process held is taken back once its
lease expires (`RECOVER_EVERY`), never while its owner may be alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from hookwise.engine.config import Config
from hookwise.engine.models import ModelPolicy
from hookwise.server.runtime.deliveries import DeliveryWorker
from hookwise.server.runtime.heartbeat import Heartbeats
from hookwise.server.runtime.providers.registry import Providers
from hookwise.server.runtime.routing import Router
from hookwise.server.runtime.runs import RunWorkers
from hookwise.server.store.base import NewEvent, NewRun, Route

log = logging.getLogger("hookwise.runtime")

MAIN = "main"
LEAD_EVERY = 2.0
RECOVER_EVERY = 10.0


class Runtime:
    """Heartbeats, run workers and deliveries for one gateway process."""

    def __init__(
        self,
        config: Config,
        store: Any,
        *,
        channels: Mapping[str, Any],
        base_dir: Any = None,
        shared: bool = False,
    ) -> None:
        self._config = config
        self._store = store
        self.shared = shared
        self.leader = False
        self._tasks: list[asyncio.Task[None]] = []
        self._signalling: set[str] = set()
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
        self.models = ModelPolicy.from_config(defaults)
        self.router = Router(store, channels, defaults.fallback_channel)
        self.heartbeats = Heartbeats(
            store=store,
            providers=self.providers,
            model=self.models.default_model,
            every=float(defaults.heartbeat.every),
            coalesce=defaults.heartbeat.coalesce_ms / 1000.0,
            ack_max_chars=defaults.heartbeat.ack_max_chars,
            timeout=defaults.timeout_seconds,
            deliveries=self.router.plan,
            on_delivery=self.deliveries.notify,
        )
        self.runs = RunWorkers(
            store=store,
            providers=self.providers,
            default_model=self.models.default_model,
            default_timeout=defaults.timeout_seconds,
            concurrency=defaults.max_concurrent_runs,
            ack_max_chars=defaults.heartbeat.ack_max_chars,
            router=self.router,
            on_heartbeat=self.request_heartbeat,
            on_delivery=self.deliveries.notify,
            lease_grace=defaults.lease_grace_seconds,
        )
        self._recover_every = max(0.5, min(RECOVER_EVERY, defaults.lease_grace_seconds / 2))

    def request_heartbeat(self, reason: str) -> None:
        """A heartbeat soon: here when this process leads, else through the leader."""
        if self.leader:
            self.heartbeats.request(reason)
        else:
            self._signal("heartbeat")

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
        if runs:
            self.runs.notify()
            if self.shared:
                self._signal("runs")
        if any(e.mode == "now" for e in events):
            self.request_heartbeat("wake")

    def requeued(self, kind: str) -> None:
        """Failed work went back to the queue (an admin retry): `run` or `delivery`."""
        if kind == "run":
            self.runs.notify()
            if self.shared:
                self._signal("runs")
        else:
            self.deliveries.notify()

    async def start(self) -> None:
        now = time.time()
        route = self._config.session.last_route
        if route is not None:
            await self._store.set_last_route(
                MAIN, Route(route.channel, route.to), now=now, only_if_unset=True
            )
        await self._recover(now)
        if not self.shared:
            await self._store.recover_deliveries()
            self.leader = True
            self.heartbeats.start()
        else:
            self._store.subscribe("runs", self.runs.notify)
            self._store.subscribe(
                "heartbeat", lambda: self.leader and self.heartbeats.request("signal")
            )
            self._tasks.append(asyncio.create_task(self._lead_forever(), name="hookwise-lead"))
            self._tasks.append(
                asyncio.create_task(self._recover_forever(), name="hookwise-recover")
            )
        self.runs.start()
        self.deliveries.start()

    async def _recover(self, now: float) -> None:
        requeued, failed = await self._store.recover_runs(
            max_attempts=self._config.agents.defaults.max_attempts,
            now=now,
            expired_only=self.shared,
        )
        if requeued or failed:
            log.warning("recovered interrupted runs: %d re-queued, %d failed", requeued, failed)
            self.runs.notify()

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
                self.heartbeats.start()
                self.heartbeats.request("leader")
            elif not held and self.leader:
                log.warning("heartbeat leadership lost")
                self.leader = False
                await self.heartbeats.stop()
            await asyncio.sleep(LEAD_EVERY)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        interrupted = await self.runs.stop()
        await self.heartbeats.stop()
        if self.leader and self.shared:
            await self._store.resign("heartbeat")
        await self.deliveries.stop()
        if interrupted:
            await self._store.requeue_runs(interrupted)
            log.info("%d run(s) in flight went back to the queue", len(interrupted))
        await self.providers.aclose()
