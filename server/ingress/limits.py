"""Per-route limits at the hook endpoint: `rateLimit` (429 `rate_limited` with `Retry-After`) and
`maxInFlight` (429 `too_many_in_flight`), as configured in `hookwise.engine.config.limits`.

A request is counted once it is authenticated (by token; on a path whose door authenticates by
signature, once the address is not locked out) and before its body is read, so a refusal costs
no body, no rule and no store write. On a path whose door authenticates by signature, the
in-flight slot is taken only once the body is read (within `bodyTimeoutSeconds`): a sender that
cannot sign, dribbling its body, holds its own connection but never a slot that correctly signed
deliveries need. The rate is GCRA: `requests` at once, then one every
`per / requests`; `by: address` keeps one count per client address as the trusted-proxy rules
resolve it (`hookwise.server.ingress.proxies`). In flight are the requests of the route being
read, checked and committed at once; the agent runs they queue are not counted.

`RouteLimiter` counts in the process (one gateway process on SQLite), or, given `SharedCounters`
(the PostgreSQL store), in the database, so every gateway process shares the count. A flood on
one route does not reach the database per request: a rate refusal is remembered until its
`Retry-After` (nothing can admit the key earlier), each process never lets more than `maxInFlight`
in itself, and a shared in-flight refusal is remembered for `FULL_MEMORY` seconds. Each route has
its own keys: a flood on one route counts nothing on another.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Protocol

from ...engine.config.limits import HookLimitsConfig, RateLimitConfig, RouteLimitsConfig
from ...engine.errors import RequestError
from .. import metrics

log = logging.getLogger("hookwise.limits")

#: seconds a process remembers that a route's shared in-flight count was full
FULL_MEMORY = 0.1
#: a process's in-flight count lapses when it has not been touched for this long (it died)
STALE_AFTER = 120.0
#: keys remembered in the process (per-address rates); the least recently used are forgotten
MAX_KEYS = 100_000
#: one log line per key at most this often (a flood is counted in metrics, not logged per request)
LOG_EVERY = 60.0


class Limited(Exception):
    """A request refused by a limit: the error to send and its `Retry-After` (seconds)."""

    def __init__(self, error: RequestError, retry_after: int) -> None:
        super().__init__(error.message)
        self.error = error
        self.retry_after = retry_after

    @property
    def headers(self) -> list[tuple[bytes, bytes]]:
        return [(b"retry-after", str(self.retry_after).encode())]


class SharedCounters(Protocol):
    """Counters every gateway process shares (`PostgresStore` implements them)."""

    async def limit_rate(self, key: str, *, now: float, step: float, burst: float) -> float: ...

    async def limit_enter(
        self, key: str, owner: str, *, most: int, now: float, stale: float
    ) -> bool: ...

    async def limit_leave(self, key: str, owner: str, *, now: float) -> None: ...


class _Bounded(OrderedDict[str, float]):
    """A dict of the `MAX_KEYS` most recently set keys."""

    def put(self, key: str, value: float) -> None:
        self[key] = value
        self.move_to_end(key)
        if len(self) > MAX_KEYS:
            self.popitem(last=False)


class RouteLimiter:
    """Admits or refuses hook requests by the limits of their route (see the module docstring).

    `limits_of(sub)` is the route's configuration (None: no limits); `route_of(sub)` its name in
    metrics and logs (the hook path and the sub-path)."""

    def __init__(
        self,
        limits_of: Callable[[str], RouteLimitsConfig | None],
        route_of: Callable[[str], str],
        *,
        shared: SharedCounters | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._limits_of = limits_of
        self._route_of = route_of
        self._shared = shared
        self._clock = clock
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._tat = _Bounded()  # in-process GCRA state (no shared counters)
        self._refused_until = _Bounded()  # shared rate refusals, remembered until they end
        self._full_until: dict[str, float] = {}
        self._in_flight: dict[str, int] = {}
        self._logged = _Bounded()

    @asynccontextmanager
    async def admit(self, sub: str, client: str, *, hold: bool = True) -> AsyncIterator[None]:
        """Count the request for the time of the block; raises `Limited` when over a limit.
        With `hold=False` only the rate is counted: the caller takes its in-flight slot later
        (`hold`), once the body is read."""
        limits = self._limits_of(sub)
        if limits is not None and limits.rate_limit is not None:
            await self._take(self._route_of(sub), limits.rate_limit, client)
        if not hold:
            yield
            return
        async with self.hold(sub):
            yield

    @asynccontextmanager
    async def hold(self, sub: str) -> AsyncIterator[None]:
        """An in-flight slot of the route for the time of the block (`Limited` if none)."""
        limits = self._limits_of(sub)
        if limits is None or limits.max_in_flight is None:
            yield
            return
        route = self._route_of(sub)
        await self._enter(route, limits.max_in_flight)
        metrics.in_flight(route, 1)
        try:
            yield
        finally:
            # the gauge falls once the slot is free everywhere (the shared count included), so
            # what the metrics say is never ahead of what the next request is admitted by
            await self._leave(route)
            metrics.in_flight(route, -1)

    async def _take(self, route: str, rate: RateLimitConfig, client: str) -> None:
        key = f"rate\n{route}" + (f"\n{client}" if rate.by == "address" else "")
        now = self._clock()
        wait = self._refused_until.get(key, 0.0) - now
        if wait <= 0:
            if self._shared is not None:
                wait = await self._shared.limit_rate(
                    key, now=now, step=rate.interval, burst=float(rate.per)
                )
                if wait > 0:
                    self._refused_until.put(key, now + wait)
            else:
                wait = self._take_here(key, now, rate.interval, float(rate.per))
        if wait > 0:
            retry = max(1, math.ceil(wait))
            who = f" from {client}" if rate.by == "address" else ""
            self._refuse(
                key,
                route,
                RequestError(
                    429,
                    "rate_limited",
                    f"{route}{who} is over its rate of {rate.requests} per"
                    f" {float(rate.per):g}s; try again in {retry}s",
                ),
                retry,
            )

    def _take_here(self, key: str, now: float, step: float, burst: float) -> float:
        tat = max(self._tat.get(key, now), now) + step
        if tat - now > burst:
            return tat - burst - now
        self._tat.put(key, tat)
        return 0.0

    async def _enter(self, route: str, most: int) -> None:
        here = self._in_flight.get(route, 0)
        now = self._clock()
        admitted = here < most and self._full_until.get(route, 0.0) <= now
        if admitted and self._shared is not None:
            admitted = await self._shared.limit_enter(
                route, self.owner, most=most, now=now, stale=STALE_AFTER
            )
            if not admitted:
                self._full_until[route] = now + FULL_MEMORY
        if not admitted:
            self._refuse(
                route,
                route,
                RequestError(
                    429,
                    "too_many_in_flight",
                    f"{route} is handling {most} requests already; try again shortly",
                ),
                1,
            )
        self._in_flight[route] = self._in_flight.get(route, 0) + 1

    async def _leave(self, route: str) -> None:
        self._in_flight[route] -= 1
        # a slot this process held is free: what it remembered of a full shared count is stale
        self._full_until.pop(route, None)
        if self._shared is not None:
            try:
                await self._shared.limit_leave(route, self.owner, now=self._clock())
            except Exception:  # the count lapses after STALE_AFTER; the request itself is done
                log.warning("could not record the end of a request of %s", route, exc_info=True)

    def _refuse(self, key: str, route: str, error: RequestError, retry: int) -> None:
        metrics.limited(route, error.code)
        now = self._clock()
        if self._logged.get(key, -LOG_EVERY) <= now - LOG_EVERY:
            self._logged.put(key, now)
            log.info("%s: 429 %s (%s)", route, error.code, error.message)
        raise Limited(error, retry)


def route_limits(
    builtin: HookLimitsConfig, rules: Callable[[], object]
) -> Callable[[str], RouteLimitsConfig | None]:
    """The limits of a sub-path: `hooks.limits` for `wake` and `agent`, else the current rules'
    (`RuleSet.limits`; the rules are read at each request, so a reload takes effect at once)."""

    def limits_of(sub: str) -> RouteLimitsConfig | None:
        if sub in ("wake", "agent"):
            found: RouteLimitsConfig | None = getattr(builtin, sub)
            return None if found is None or found.empty else found
        current = rules()
        return current.limits(sub) if current is not None else None  # type: ignore[attr-defined]

    return limits_of
