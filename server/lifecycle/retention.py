"""Retention: the loop that keeps the store bounded, every `retention.interval`.

For each kind of record with a non-zero `retention.<kind>`, it finds the rows older than that
(`Store.retention_boundary`) and deletes the finished ones in batches of `retention.batchSize`
(`Store.prune_batch`), pausing between batches so that the request path's commits go first.
What may be pruned, and why queued, running and pending work never is: see
`hookwise.server.store.retention`. With several processes on one store, only the one holding the
`retention` leadership prunes in a round.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from ...engine.config.models import RetentionConfig
from ..logs import fields
from ..store.base import Store
from ..store.retention import TARGETS

log = logging.getLogger("hookwise.retention")

PAUSE = 0.02  # seconds between two batches


class Retention:
    """Prunes finished records older than their retention, off the hot path."""

    def __init__(
        self,
        store: Store,
        config: RetentionConfig,
        *,
        shared: bool,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._config = config
        self._shared = shared
        self._clock = clock

    async def run_forever(self) -> None:
        interval = float(self._config.interval)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.prune_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("pruning old records failed; trying again in %g s", interval)

    async def prune_once(self) -> dict[str, int]:
        """One round over every kind of record; returns how many of each went."""
        if self._shared and not await self._store.try_lead("retention"):
            return {}
        pruned: dict[str, int] = {}
        batch = self._config.batch_size
        for target in TARGETS:
            keep = float(getattr(self._config, target.key))
            if keep <= 0:
                continue
            cutoff = self._clock() - keep
            upto = await self._store.retention_boundary(target, cutoff)
            total = 0
            while upto:
                n = await self._store.prune_batch(target, upto=upto, cutoff=cutoff, limit=batch)
                total += n
                if n < batch:
                    break
                await asyncio.sleep(PAUSE)
            if total:
                pruned[target.name] = total
        if pruned:
            await self._store.reclaim([t for t in TARGETS if t.name in pruned])
            summary = ", ".join(f"{n} {key}" for key, n in pruned.items())
            log.info("retention: pruned %s", summary, extra=fields(pruned=pruned))
        return pruned
