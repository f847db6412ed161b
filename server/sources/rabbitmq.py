"""RabbitMQ (AMQP 0-9-1): a queue consumed with manual acknowledgements and a bounded prefetch.

The channel's prefetch is the source's `maxInFlight`: the broker sends no more than that many
unacknowledged messages to this gateway, and gateways consuming the same queue share it. Each
message is acknowledged (`basic.ack`) after its commit; a message the rules refuse is rejected
without requeueing (`basic.reject`), which sends it to the queue's dead-letter exchange when it
has one (`deadLetterExchange`: with `declare`, the exchange and a `<queue>.refused` queue bound to
it are declared too) and drops it otherwise (the request log keeps the refusal). A message that
could not be stored is requeued (`basic.nack`, requeue). When a gateway dies, RabbitMQ requeues
its unacknowledged messages for the others (`redelivered` set).

The message id for deduplication is the `message_id` property; a message published without one
is known by the SHA-256 of its body and headers (two identical messages without ids within the
idempotency window are then taken for one: publishers should set `message_id`).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from typing import Any

from ...engine.config.sources import RabbitMqSourceConfig
from .core import Pulled
from .enter import Message

#: how long a fetch waits for the first message
FETCH_WAIT = 2.0


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


class RabbitBroker:
    """One consumer of a RabbitMQ queue."""

    def __init__(self, config: RabbitMqSourceConfig, max_in_flight: int) -> None:
        self.config = config
        self._prefetch = max_in_flight
        self._conn: Any = None
        self._channel: Any = None
        self._inbox: asyncio.Queue[Any] = asyncio.Queue()

    async def connect(self) -> None:
        import aio_pika

        c = self.config
        self._inbox = asyncio.Queue()
        self._conn = await aio_pika.connect(c.url, timeout=10)
        self._channel = await self._conn.channel()
        await self._channel.set_qos(prefetch_count=self._prefetch)
        if c.declare:
            arguments = {}
            if c.dead_letter_exchange:
                exchange = await self._channel.declare_exchange(
                    c.dead_letter_exchange, aio_pika.ExchangeType.FANOUT, durable=True
                )
                refused = await self._channel.declare_queue(f"{c.queue}.refused", durable=True)
                await refused.bind(exchange)
                arguments["x-dead-letter-exchange"] = c.dead_letter_exchange
            queue = await self._channel.declare_queue(c.queue, durable=True, arguments=arguments)
        else:
            queue = await self._channel.declare_queue(c.queue, passive=True)
        await queue.consume(self._inbox.put, no_ack=False)

    async def fetch(self, limit: int) -> Sequence[Pulled]:
        if self._conn is None or self._conn.is_closed:
            raise ConnectionError("the AMQP connection is closed")
        try:
            first = await asyncio.wait_for(self._inbox.get(), FETCH_WAIT)
        except TimeoutError:
            return []
        got = [first]
        while len(got) < limit and not self._inbox.empty():
            got.append(self._inbox.get_nowait())
        return [Pulled(self._message(m), m) for m in got]

    def _message(self, m: Any) -> Message:
        headers = [(str(k), _text(v)) for k, v in (m.headers or {}).items()]
        if m.content_type:
            headers.append(("content-type", m.content_type))
        body: bytes = m.body
        message_id = m.message_id
        if not message_id:
            digest = hashlib.sha256(body)
            for k, v in sorted(headers):
                digest.update(f"\n{k}:{v}".encode())
            message_id = "sha256:" + digest.hexdigest()
        return Message(
            f"{self.config.queue}:{message_id}", body, tuple(headers), bool(m.redelivered)
        )

    async def ack(self, handles: Sequence[Any]) -> None:
        for m in handles:
            await m.ack()

    async def refuse(self, handles: Sequence[Any]) -> None:
        for m in handles:
            await m.reject(requeue=False)

    async def release(self, handles: Sequence[Any]) -> None:
        for m in handles:
            await m.nack(requeue=True)

    async def lag(self) -> int | None:
        if self._channel is None:
            return None
        queue = await self._channel.declare_queue(self.config.queue, passive=True)
        count = queue.declaration_result.message_count
        return None if count is None else int(count)

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            self._channel = None
            if not conn.is_closed:
                await conn.close()
