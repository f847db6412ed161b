"""The delivery worker: sends pending deliveries to their channels, with retries and fallback.

Deliveries are rows in the store (`pending -> sent | skipped | failed`). The worker claims due
rows with a lease (a process that dies mid-send loses its lease, and the row is sent again), sends
them through the channel adapters, and records the outcome: `sent` with the channel's message
ids, or another attempt after a backoff (429 honouring `Retry-After`, 5xx, network errors), or
`failed` with the channel's error text (other 4xx, or attempts exhausted). A row once marked
`sent` is never sent again. When a delivery fails for good and has a fallback channel, it moves
there (to that channel's `defaultTo`). Every successful delivery updates the main session's last
route.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Mapping

import attrs
import httpx

from ...engine.config.models import SubscriberConfig
from .. import telemetry
from ..channels.base import Channel, DeliveryError
from ..retry import Backoff
from ..store.base import Store
from ..store.records import DeliveryRecord, Route
from ..version import outbound_client
from . import report
from .callbacks import failed_events

log = logging.getLogger("hookwise.deliveries")

POLL_SECONDS = 5.0


class DeliveryWorker:
    """Sends due deliveries, at most `concurrency` at a time."""

    def __init__(
        self,
        *,
        store: Store,
        channels: Mapping[str, Channel],
        max_attempts: int = 8,
        base_delay: float = 2.0,
        max_delay: float = 300.0,
        lease: float = 120.0,
        concurrency: int = 4,
        clock: Callable[[], float] = time.time,
        jitter: Callable[[], float] = random.random,
        senders: Callable[[str], Channel | None] = lambda name: None,
    ) -> None:
        self._store = store
        self._channels = channels
        #: the senders that are not configured channels: a mapping's callback, by name
        self.senders = senders
        #: lifecycle subscribers (`events.subscribers`): told of a delivery that failed for good
        self.subscribers: tuple[SubscriberConfig, ...] = ()
        self._max_attempts = max_attempts
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._lease = lease
        self._concurrency = concurrency
        self._clock = clock
        self._jitter = jitter
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._client: httpx.AsyncClient | None = None

    def notify(self) -> None:
        self._wakeup.set()

    def start(self) -> None:
        self._client = outbound_client(timeout=httpx.Timeout(30.0, connect=10.0))
        self._task = asyncio.create_task(self._loop(), name="hookwise-deliveries")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._client is not None:
            await self._client.aclose()

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before the next attempt: exponential with jitter, at least `Retry-After`."""
        policy = Backoff(base=self._base_delay, cap=self._max_delay)
        return policy.delay(attempt - 1, rand=self._jitter(), retry_after=retry_after)

    async def _loop(self) -> None:
        while True:
            try:
                batch = await self._store.claim_deliveries(
                    limit=self._concurrency, now=self._clock(), lease=self._lease
                )
                if batch:
                    await asyncio.gather(*(self._deliver(d) for d in batch))
                    continue
                due = await self._store.next_delivery_due()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the delivery loop failed; retrying")
                due = None
            wait = POLL_SECONDS if due is None else min(POLL_SECONDS, max(0.0, due - self._clock()))
            self._wakeup.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._wakeup.wait()

    async def _deliver(self, d: DeliveryRecord) -> None:
        # tracing: each attempt is a span in its run's trace (one read of the run when on)
        if not telemetry.active():
            await self._attempt(d, None)
            return
        parent = None
        if d.run_id is not None:
            with contextlib.suppress(Exception):  # untraced rather than undelivered
                run = await self._store.get_run(d.run_id)
                parent = run.trace if run is not None else None
        with telemetry.delivery_attempt(d, parent) as span:
            await self._attempt(d, span)

    async def _attempt(self, d: DeliveryRecord, span: object) -> None:
        """One attempt at `d`; its outcome on the attempt's `span` (None: untraced)."""
        now = self._clock
        channel = self._channels.get(d.channel or "") or self.senders(d.channel or "")
        if channel is None:
            missing = (
                f"channel {d.channel} is not configured"
                if d.channel
                else "no channel to deliver to (no last route, no channel named)"
            )
            await self._fail(d, missing)
            return
        if d.to is None and channel.default_to:  # a notification without `to`
            d = attrs.evolve(d, to=channel.default_to)
        problem = channel.validate_recipient(d.to or "")
        if problem:
            await self._fail(d, f"{d.channel}: invalid recipient: {problem}")
            return
        assert self._client is not None and d.to is not None
        try:
            signed = getattr(channel, "send_signed", None)
            if signed is not None:  # a signed webhook: its id is the delivery's, every attempt
                result = await signed(self._client, d.to, d.text, msg_id=d.delivery_id)
            else:
                result = await channel.send(
                    self._client, d.to, d.text, skip_parts=len(d.message_ids)
                )
        except DeliveryError as e:
            sent = d.message_ids + e.sent_ids
            if e.retryable and d.attempts < self._max_attempts:
                delay = self.backoff(d.attempts, e.retry_after)
                log.info(
                    "delivery %s: attempt %d failed (%s); retry in %.1f s",
                    d.delivery_id,
                    d.attempts,
                    e.status,
                    delay,
                )
                await self._store.update_delivery(
                    d.delivery_id,
                    state="pending",
                    now=now(),
                    last_error=e.message,
                    message_ids=sent,
                    next_attempt_at=now() + delay,
                )
                report.delivery_retried(d)
                telemetry.delivery_outcome(span, "retry")
                return
            reason = (
                e.message
                if not e.retryable
                else f"{e.message} (gave up after {d.attempts} attempts)"
            )
            await self._fail(d, reason, sent)
            telemetry.delivery_outcome(span, "failed")
            return
        except Exception as e:
            log.exception("delivery %s: unexpected error", d.delivery_id)
            await self._fail(d, f"{d.channel}: internal error ({type(e).__name__})")
            telemetry.delivery_outcome(span, "failed")
            return
        await self._store.update_delivery(
            d.delivery_id,
            state="sent",
            now=now(),
            message_ids=d.message_ids + result.message_ids,
        )
        report.delivery_sent(d, channel.id)
        telemetry.delivery_outcome(span, "sent")
        conversation = d.run_id is not None or d.heartbeat_id is not None  # not a notification
        if conversation and getattr(channel, "keeps_route", True):  # nor a callback
            await self._store.set_last_route(d.route_session, Route(channel.id, d.to), now=now())
        log.info(
            "delivery %s: sent to %s (%d message(s))",
            d.delivery_id,
            channel.id,
            len(result.message_ids),
        )

    async def _fail(self, d: DeliveryRecord, reason: str, sent: tuple[str, ...] = ()) -> None:
        fallback = d.fallback_channel
        target = self._channels.get(fallback or "")
        if fallback and fallback != d.channel and target is not None and target.default_to:
            log.info(
                "delivery %s: %s failed for good; falling back to %s",
                d.delivery_id,
                d.channel,
                fallback,
            )
            await self._store.update_delivery(
                d.delivery_id,
                state="pending",
                now=self._clock(),
                last_error=f"{reason}; falling back to {fallback}",
                next_attempt_at=self._clock(),
                channel=fallback,
                to=target.default_to,
                fallback_channel="",
                reset=True,
            )
            self._wakeup.set()
            return
        now = self._clock()
        events = failed_events(self.subscribers, d, reason, now=now)
        await self._store.update_delivery(
            d.delivery_id,
            state="failed",
            now=now,
            last_error=reason,
            message_ids=sent,
            then=events,
        )
        report.delivery_failed(d, reason)
        if events:
            self._wakeup.set()
