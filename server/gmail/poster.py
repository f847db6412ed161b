"""Handing one message to the gateway: POST `{"source": "gmail", "messages": [item]}`.

Each POST carries `Authorization: Bearer <hook token>` and `Idempotency-Key: gmail-<sha256 of
the Message-ID>`, so a retry (or a re-send after a crash) never starts a second run. Outcomes:

- 2xx: accepted.
- 408, 429, 5xx, or no answer at all (gateway down, connection refused, timeout): retried with
  exponential backoff (honouring `Retry-After`), for as long as it takes, until stopped.
- any other 4xx: refused for good. Logged (status and error code, no body) and skipped, so one
  bad message does not block the mailbox.

One message per POST: the gateway's idempotency and the watcher's checkpoint then work per
message, and a refused message never takes others with it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Any, Literal

import httpx

from ..retry import Backoff, Retries, retry_after_seconds
from ..version import USER_AGENT, outbound_client

log = logging.getLogger("hookwise.gmail")

PostOutcome = Literal["accepted", "refused"]
_RETRY_STATUSES = frozenset({408, 429})


class Stopped(Exception):
    """The watcher was asked to stop while a message was still being retried."""


def reconnect_retries(minimum: float, maximum: float) -> Retries:
    """Successive waits of the one back-off policy: from `minimum`, doubling, capped at
    `maximum`, equal jitter; `next(retry_after)` never waits less than the server asked for."""
    return Retries(Backoff(base=minimum, cap=maximum), random.random)


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep `seconds` unless `stop` is set first. True when stopped."""
    if stop.is_set():
        return True
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except TimeoutError:
        return False
    return True


class Poster:
    """POSTs payloads to the hook URL with the hook token; owns one HTTP connection pool."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        retry_min: float = 0.5,
        retry_max: float = 60.0,
        timeout: float = 60.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = url
        self._token = token
        self._retry_min = retry_min
        self._retry_max = retry_max
        self._client = client or outbound_client(timeout=timeout, trust_env=False)
        self._own_client = client is None

    async def aclose(self) -> None:
        if self._own_client:
            await self._client.aclose()

    async def post(self, item: dict[str, Any], *, key: str, stop: asyncio.Event) -> PostOutcome:
        """Deliver one message item. Raises `Stopped` if `stop` is set before it is delivered."""
        body = {"source": "gmail", "messages": [item]}
        headers = {
            "Authorization": f"Bearer {self._token}",
            "Idempotency-Key": key,
            "User-Agent": f"{USER_AGENT} gmail-watcher",
        }
        backoff = reconnect_retries(self._retry_min, self._retry_max)
        attempt = 0
        while True:
            if stop.is_set():
                raise Stopped
            attempt += 1
            retry_after: float | None = None
            try:
                resp = await self._client.post(self.url, json=body, headers=headers)
            except httpx.HTTPError as e:
                why = f"no answer ({type(e).__name__})"
            else:
                status = resp.status_code
                if 200 <= status < 300:
                    if attempt > 1:
                        log.info(
                            "gmail: message %s accepted after %d attempts", item["id"], attempt
                        )
                    return "accepted"
                if status in _RETRY_STATUSES or status >= 500:
                    why = f"status {status}"
                    retry_after = retry_after_seconds(
                        resp.headers.get("retry-after"), now=time.time()
                    )
                else:
                    log.warning(
                        "gmail: gateway refused message %s: status %d%s; skipped",
                        item["id"],
                        status,
                        _error_code(resp),
                    )
                    return "refused"
            delay = backoff.next(retry_after)
            log.warning(
                "gmail: posting message %s failed (%s, attempt %d); retrying in %.1f s",
                item["id"],
                why,
                attempt,
                delay,
            )
            if await sleep_or_stop(stop, delay):
                raise Stopped


def _error_code(resp: httpx.Response) -> str:
    try:
        data = resp.json()
    except ValueError:
        return ""
    code = data.get("code") if isinstance(data, dict) else None
    return f" ({code})" if isinstance(code, str) else ""


__all__ = ["PostOutcome", "Poster", "Stopped", "reconnect_retries", "sleep_or_stop"]
