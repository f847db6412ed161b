"""Pacing of refusals: a client that keeps sending after a `429` waits for its next ones.

A refusal by a limit (`rate_limited`, `too_many_in_flight`) or by the authentication lock-out
(`locked_out`) costs no body, no rule and no store write, but it is still an HTTP request to
parse and answer. A client that ignores `Retry-After` and sends as fast as it can would take the
gateway's CPU from every other route with requests that are all refused. So refusals to one
client on one route are answered at once up to `BURST` in a row, then at most `RATE` per second:
the next one is held until its turn (at most `MAX_DELAY` seconds) before it is sent. Over HTTP/1.1
a client sends its next request on a connection once it has the answer to the previous one, so a
flood paces itself to the gateway; a client that waits as told is never held.

Only refusals are held, never an admitted request, and the hold is a timer, not work: a held
refusal costs a sleeping task. At most `MAX_HELD` are held at once (beyond that they are answered
at once), and `MAX_KEYS` clients are remembered (the least recently refused are forgotten).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable

from .. import metrics

#: refusals answered at once to one client on one route before pacing starts
BURST = 10
#: refusals per second to one client on one route once paced
RATE = 10.0
#: the longest a refusal is held (a client with many connections gets one each hold)
MAX_DELAY = 1.0
#: refusals held at once, over every client (beyond it: answered at once)
MAX_HELD = 10_000
#: clients remembered
MAX_KEYS = 100_000


class RefusalPacer:
    """How long to hold a refusal (GCRA per client and route; see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._tat: OrderedDict[str, float] = OrderedDict()  # theoretical arrival time per key
        self._held = 0

    def delay(self, route: str, client: str) -> float:
        """Seconds to hold this refusal before it is sent (0: send it now)."""
        key = f"{route}\n{client}"
        now = self._clock()
        step = 1.0 / RATE
        tat = max(self._tat.get(key, now), now) + step
        # the GCRA bound: BURST refusals fit before the schedule is ahead of the clock
        wait = tat - now - BURST * step
        if wait > MAX_DELAY:  # held the longest; the schedule does not run further ahead
            tat -= wait - MAX_DELAY
            wait = MAX_DELAY
        self._tat[key] = tat
        self._tat.move_to_end(key)
        if len(self._tat) > MAX_KEYS:
            self._tat.popitem(last=False)
        if wait <= 1e-6 or self._held >= MAX_HELD:  # (a float sum of steps: not exact)
            return 0.0
        return wait

    async def hold(self, route: str, client: str) -> None:
        """Wait as long as `delay` says (the caller then sends the refusal)."""
        wait = self.delay(route, client)
        if wait <= 0:
            return
        self._held += 1
        metrics.refusals_held(1)
        try:
            await asyncio.sleep(wait)
        finally:
            self._held -= 1
            metrics.refusals_held(-1)
