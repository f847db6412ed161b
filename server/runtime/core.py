"""The runtime: what makes accepted events and runs happen, behind the dispatcher.

`Runtime` wires the heartbeat lane, the run workers, the delivery worker and the model providers
to the store, listens to the dispatcher for new work, and owns their start-up (seed the last
route, recover runs a crash left running) and shutdown (runs in flight go back to the queue
without using up an attempt).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from engine.config import Config
from engine.models import ModelPolicy
from server.runtime.deliveries import DeliveryWorker
from server.runtime.heartbeat import Heartbeats
from server.runtime.providers.registry import Providers
from server.runtime.routing import Router
from server.runtime.runs import RunWorkers
from server.store.base import NewEvent, NewRun, Route

log = logging.getLogger("hookwise.runtime")

MAIN = "main"


class Runtime:
    """Heartbeats, run workers and deliveries for one gateway process."""

    def __init__(
        self, config: Config, store: Any, *, channels: Mapping[str, Any], base_dir: Any = None
    ) -> None:
        self._config = config
        self._store = store
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
            on_heartbeat=self.heartbeats.request,
            on_delivery=self.deliveries.notify,
        )

    def on_accepted(self, events: Sequence[NewEvent], runs: Sequence[NewRun]) -> None:
        """Dispatcher listener: new work was committed."""
        if runs:
            self.runs.notify()
        if any(e.mode == "now" for e in events):
            self.heartbeats.request("wake")

    async def start(self) -> None:
        now = time.time()
        route = self._config.session.last_route
        if route is not None:
            await self._store.set_last_route(
                MAIN, Route(route.channel, route.to), now=now, only_if_unset=True
            )
        requeued, failed = await self._store.recover_runs(
            max_attempts=self._config.agents.defaults.max_attempts, now=now
        )
        if requeued or failed:
            log.warning(
                "recovered runs interrupted by a stop: %d re-queued, %d failed", requeued, failed
            )
        await self._store.recover_deliveries()
        self.heartbeats.start()
        self.runs.start()
        self.deliveries.start()

    async def stop(self) -> None:
        interrupted = await self.runs.stop()
        await self.heartbeats.stop()
        await self.deliveries.stop()
        if interrupted:
            await self._store.requeue_runs(interrupted)
            log.info("%d run(s) in flight went back to the queue", len(interrupted))
        await self.providers.aclose()
