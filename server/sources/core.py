"""The consumer loop every pull source shares, and the state that every surface reads.

A `Broker` (one module per broker beside this one) connects, hands out batches of at most
`maxInFlight` messages, and acknowledges, refuses or releases each. `Consumer.run_forever`
drives it:

1. connect; on failure, retry with `hookwise.server.retry.Backoff` (`reconnectMinSeconds` up to
   `reconnectMaxSeconds`), the source shown not connected with its last error (`/readyz`, the
   admin API, the console) while the HTTP door goes on serving;
2. fetch a batch (the broker's own wait when there is nothing), enter its messages at once
   (`hookwise.server.sources.enter`, so their store writes share group commits), and only when
   each one's outcome is known: acknowledge what was committed or was already committed,
   refuse what the rules refuse (acknowledged, or dead-lettered where the broker has one),
   release the rest for redelivery;
3. fetch the next batch only then: at most `maxInFlight` messages are held unacknowledged, so a
   slow store slows pulling instead of filling memory. After a batch that could not be stored
   the loop waits (the same backoff) before pulling again;
4. before each fetch, while the store holds more queued runs than `maxQueuedRuns` (the lanes
   are saturated), wait: the messages stay in the broker, where they are durable and where the
   broker's lag shows them, instead of becoming an ever longer queue of runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Sequence
from typing import Any, Protocol

import attrs

from ...engine.config.sources import SourceConfig
from .. import metrics
from ..retry import Backoff
from .enter import Entry, Message

log = logging.getLogger("hookwise.sources")

#: how often the lag is asked of the broker while consuming
LAG_EVERY = 2.0
#: how often the queued runs are counted again while pulling waits for the lanes
LANES_EVERY = 0.5


@attrs.frozen
class Pulled:
    """A message and the broker's handle to acknowledge it by."""

    message: Message
    handle: Any


class Broker(Protocol):
    """What the consumer loop asks of a broker client."""

    async def connect(self) -> None:
        """Connect (creating the group or consumer when missing); raises when it cannot."""

    async def fetch(self, limit: int) -> Sequence[Pulled]:
        """At most `limit` messages; empty after the broker's wait when there are none."""
        ...

    async def ack(self, handles: Sequence[Any]) -> None:
        """Acknowledge committed messages: never delivered again."""

    async def refuse(self, handles: Sequence[Any]) -> None:
        """Settle messages the rules refuse: acknowledged, or dead-lettered."""

    async def release(self, handles: Sequence[Any]) -> None:
        """Leave messages that were not stored for redelivery."""

    async def lag(self) -> int | None:
        """Messages waiting for the group, when the broker reports it."""
        ...

    async def close(self) -> None:
        """Disconnect (safe to call when not connected)."""


@attrs.define
class SourceState:
    """What is known of one source in this process: the one truth of every surface."""

    name: str
    kind: str
    path: str
    connected: bool = False
    lag: int | None = None
    last_error: str | None = None
    last_error_at: float | None = None
    received: int = 0
    acked: int = 0
    redelivered: int = 0
    duplicates: int = 0
    refused: int = 0
    retried: int = 0
    #: pulling waits: the store holds more queued runs than `maxQueuedRuns`
    waiting_for_lanes: bool = False

    def failed(self, error: str) -> None:
        self.last_error = error
        self.last_error_at = time.time()


class Consumer:
    """Pulls one source's messages into the store, for as long as it runs."""

    def __init__(self, config: SourceConfig, broker: Broker, entry: Entry) -> None:
        self.config = config
        self.broker = broker
        self.entry = entry
        self.state = SourceState(config.name, config.kind, config.path.strip("/"))
        self._backoff = Backoff(
            base=float(config.reconnect_min_seconds), cap=float(config.reconnect_max_seconds)
        )
        self._lag_at = 0.0

    async def run_forever(self) -> None:
        attempt = 0
        name = self.config.name
        while True:
            try:
                await self.broker.connect()
                self.state.connected = True
                metrics.source_connected(name, True)
                if attempt:
                    log.info("source %s: connected", name)
                attempt = 0
                await self._consume()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                self.state.connected = False
                self.state.failed(text)
                metrics.source_connected(name, False)
                delay = self._backoff.delay(attempt, rand=random.random())
                log.warning(
                    "source %s (%s): %s; retrying in %.1f s", name, self.state.kind, text, delay
                )
                attempt += 1
                with contextlib.suppress(Exception):
                    await self.broker.close()
                await asyncio.sleep(delay)

    async def stop(self) -> None:
        with contextlib.suppress(Exception):
            await self.broker.close()
        self.state.connected = False

    async def _consume(self) -> None:
        stalled = 0
        while True:
            await self._refresh_lag()
            await self._room_in_lanes()
            batch = await self.broker.fetch(self.config.max_in_flight)
            if not batch:
                continue
            settled = await self._settle(batch)
            if settled:
                stalled = 0
                continue
            # nothing of the batch could be stored: wait before pulling it again
            await asyncio.sleep(self._backoff.delay(stalled, rand=random.random()))
            stalled += 1

    async def _room_in_lanes(self) -> None:
        """Return once the store holds at most `maxQueuedRuns` queued runs (checked again every
        `LANES_EVERY` seconds while it holds more)."""
        limit = self.config.max_queued_runs
        if limit is None:
            return
        name = self.config.name
        while True:
            try:
                queued = await self.entry.queued_runs()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the store's own trouble shows when the batch is entered
                log.debug("source %s: queued runs unknown: %s", name, e)
                return
            if queued <= limit:
                if self.state.waiting_for_lanes:
                    self.state.waiting_for_lanes = False
                    log.info("source %s: the lanes have room again; pulling", name)
                return
            if not self.state.waiting_for_lanes:
                self.state.waiting_for_lanes = True
                log.warning(
                    "source %s: %d queued runs, over maxQueuedRuns %d: pulling waits",
                    name,
                    queued,
                    limit,
                )
            await asyncio.sleep(LANES_EVERY)

    async def _settle(self, batch: Sequence[Pulled]) -> bool:
        """Enter a batch and settle each message by its outcome; False when none was stored."""
        name = self.config.name
        state = self.state
        state.received += len(batch)
        metrics.source_messages(name, "received", len(batch))
        again = sum(1 for p in batch if p.message.redelivered)
        if again:
            state.redelivered += again
            metrics.source_messages(name, "redelivered", again)
        entered = await asyncio.gather(*(self.entry.enter(p.message) for p in batch))
        acks, refused, release = [], [], []
        for pulled, outcome in zip(batch, entered, strict=True):
            if outcome.outcome == "refused":
                refused.append(pulled.handle)
            elif outcome.outcome == "retry":
                release.append(pulled.handle)
                state.failed(f"message not stored: {outcome.code}")
            else:
                acks.append(pulled.handle)
                if outcome.outcome == "replayed":
                    state.duplicates += 1
                    metrics.source_messages(name, "duplicate", 1)
        if acks:
            await self.broker.ack(acks)
            state.acked += len(acks)
            metrics.source_messages(name, "acked", len(acks))
        if refused:
            await self.broker.refuse(refused)
            state.refused += len(refused)
            metrics.source_messages(name, "refused", len(refused))
        if release:
            await self.broker.release(release)
            state.retried += len(release)
            metrics.source_messages(name, "retried", len(release))
        return len(release) < len(batch)

    async def _refresh_lag(self) -> None:
        now = time.monotonic()
        if now - self._lag_at < LAG_EVERY:
            return
        self._lag_at = now
        try:
            self.state.lag = await self.broker.lag()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the lag is a report: a failure to read it stops nothing
            log.debug("source %s: lag unknown: %s", self.config.name, e)
            self.state.lag = None
        metrics.source_lag(self.config.name, self.state.lag)
