"""Redis Streams: a consumer group read with `XREADGROUP`, acknowledged with `XACK`.

The group is created (with the stream, `MKSTREAM`) when missing, from the stream's start. Each
gateway process is one consumer of the group (`<host>-<pid>` unless `consumer` is set), so N
gateways share the stream's entries. On (re)connecting the consumer first reads its own pending
entries (`XREADGROUP ... 0`: those it read and did not acknowledge before the connection broke),
then new ones (`>`). Every `claimIdle / 2` it claims entries another consumer has held pending
for longer than `claimIdle` (`XAUTOCLAIM`): those of a gateway that was killed. Claimed and
re-read entries count as redelivered. A refused entry is acknowledged (Redis has no dead-letter
list of its own; the request log keeps the refusal).

An entry's `bodyField` (`body`) is the payload; its other fields are the headers.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence
from typing import Any

from ...engine.config.sources import RedisSourceConfig
from .core import Pulled
from .enter import Message


def consumer_name() -> str:
    """This process's name in a consumer group: `<host>-<pid>`."""
    return f"{socket.gethostname()}-{os.getpid()}"


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class RedisBroker:
    """One consumer of a Redis stream's consumer group."""

    def __init__(self, config: RedisSourceConfig) -> None:
        self.config = config
        self.consumer = config.consumer or consumer_name()
        self._redis: Any = None
        self._own_pending = True
        self._claim_cursor = "0-0"
        self._claimed_at = 0.0

    async def connect(self) -> None:
        from redis import asyncio as aioredis
        from redis.exceptions import ResponseError

        c = self.config
        self._redis = aioredis.from_url(c.url, socket_connect_timeout=5, socket_keepalive=True)
        try:
            await self._redis.xgroup_create(c.stream, c.group, id="0", mkstream=True)
        except ResponseError as e:
            if "BUSYGROUP" not in str(e):
                raise
        self._own_pending = True

    async def fetch(self, limit: int) -> Sequence[Pulled]:
        c = self.config
        now = time.monotonic()
        if now - self._claimed_at >= max(0.05, float(c.claim_idle) / 2):
            claimed = await self._claim(limit)
            if claimed:
                return claimed
            self._claimed_at = now
        if self._own_pending:
            got = await self._redis.xreadgroup(c.group, self.consumer, {c.stream: "0"}, count=limit)
            entries = got[0][1] if got else []
            if entries:
                return self._pulled(entries, redelivered=True)
            self._own_pending = False
        got = await self._redis.xreadgroup(
            c.group,
            self.consumer,
            {c.stream: ">"},
            count=limit,
            block=max(1, int(float(c.block) * 1000)),
        )
        return self._pulled(got[0][1] if got else [], redelivered=False)

    async def _claim(self, limit: int) -> list[Pulled]:
        c = self.config
        found = await self._redis.xautoclaim(
            c.stream,
            c.group,
            self.consumer,
            min_idle_time=int(float(c.claim_idle) * 1000),
            start_id=self._claim_cursor,
            count=limit,
        )
        cursor, entries = found[0], found[1]
        self._claim_cursor = _text(cursor)
        if self._claim_cursor == "0-0":
            self._claimed_at = time.monotonic()  # a full pass: the next one after the interval
        return self._pulled(entries, redelivered=True)

    def _pulled(self, entries: Sequence[Any], *, redelivered: bool) -> list[Pulled]:
        out = []
        body_field = self.config.body_field
        for entry_id, fields in entries:
            if fields is None:  # deleted from the stream while pending
                continue
            body = b""
            headers = []
            for k, v in fields.items():
                name = _text(k)
                if name == body_field:
                    body = v if isinstance(v, bytes) else str(v).encode()
                else:
                    headers.append((name, _text(v)))
            eid = _text(entry_id)
            message = Message(
                f"{self.config.stream}:{eid}", body, tuple(headers), redelivered=redelivered
            )
            out.append(Pulled(message, eid))
        return out

    async def ack(self, handles: Sequence[Any]) -> None:
        await self._redis.xack(self.config.stream, self.config.group, *handles)

    async def refuse(self, handles: Sequence[Any]) -> None:
        await self.ack(handles)

    async def release(self, handles: Sequence[Any]) -> None:
        self._own_pending = True  # still pending for this consumer: read again from `0`

    async def lag(self) -> int | None:
        groups = await self._redis.xinfo_groups(self.config.stream)
        for g in groups:
            if _text(g.get("name")) == self.config.group:
                waiting = g.get("lag")
                pending = int(g.get("pending") or 0)
                return None if waiting is None else int(waiting) + pending
        return None

    async def close(self) -> None:
        if self._redis is not None:
            redis, self._redis = self._redis, None
            await redis.aclose()
