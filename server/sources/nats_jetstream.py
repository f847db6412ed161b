"""NATS JetStream: a durable pull consumer, each message acknowledged after its commit.

The stream must exist (it is the operator's: subjects, retention, replicas); the durable
consumer (`durable`, explicit acks, `ackWait`, the optional `subject` filter, at most
`maxInFlight` unacknowledged) is created when missing, and shared by every gateway that names
it, so JetStream spreads the messages over them. A message not acknowledged within `ackWait`
(its gateway was killed) is delivered again, to whichever gateway fetches next; it counts as
redelivered (`num_delivered > 1`). A message the rules refuse is terminated (`+TERM`: never
delivered again, and JetStream's advisory says so); one that could not be stored is
negatively acknowledged with a delay (`-NAK`) and comes back.

The message id for deduplication is the stream's sequence number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...engine.config.sources import NatsSourceConfig
from .core import Pulled
from .enter import Message

#: the wait before a message that could not be stored is delivered again
NAK_DELAY = 1.0


class NatsBroker:
    """One gateway's share of a durable JetStream pull consumer."""

    def __init__(self, config: NatsSourceConfig, max_in_flight: int) -> None:
        self.config = config
        self._max_in_flight = max_in_flight
        self._nc: Any = None
        self._sub: Any = None

    async def connect(self) -> None:
        import nats
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
        from nats.js.errors import NotFoundError

        c = self.config
        self._nc = await nats.connect(
            c.url, allow_reconnect=False, connect_timeout=5, max_reconnect_attempts=0
        )
        js = self._nc.jetstream()
        await js.stream_info(c.stream)  # a missing stream is the operator's to create: say so
        config = ConsumerConfig(
            durable_name=c.durable,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            ack_wait=float(c.ack_wait),
            max_ack_pending=-1,
            filter_subject=c.subject,
        )
        try:
            await js.consumer_info(c.stream, c.durable)
        except NotFoundError:
            await js.add_consumer(c.stream, config)
        self._sub = await js.pull_subscribe_bind(durable=c.durable, stream=c.stream)

    async def fetch(self, limit: int) -> Sequence[Pulled]:
        from nats.errors import TimeoutError as NatsTimeout

        if self._nc is None or not self._nc.is_connected:
            raise ConnectionError("the NATS connection is closed")
        try:
            msgs = await self._sub.fetch(limit, timeout=float(self.config.fetch_wait))
        except NatsTimeout:
            return []
        out = []
        for msg in msgs:
            meta = msg.metadata
            headers = tuple((k, str(v)) for k, v in (msg.headers or {}).items())
            message = Message(
                f"{meta.stream}:{meta.sequence.stream}",
                msg.data,
                headers,
                redelivered=meta.num_delivered > 1,
            )
            out.append(Pulled(message, msg))
        return out

    async def ack(self, handles: Sequence[Any]) -> None:
        for msg in handles:
            await msg.ack()
        await self._nc.flush()

    async def refuse(self, handles: Sequence[Any]) -> None:
        for msg in handles:
            await msg.term()
        await self._nc.flush()

    async def release(self, handles: Sequence[Any]) -> None:
        for msg in handles:
            await msg.nak(delay=NAK_DELAY)
        await self._nc.flush()

    async def lag(self) -> int | None:
        info = await self._sub.consumer_info()
        return int(info.num_pending or 0) + int(info.num_ack_pending or 0)

    async def close(self) -> None:
        if self._nc is not None:
            nc, self._nc = self._nc, None
            if not nc.is_closed:
                await nc.close()
