"""One mail watcher per deployment: the watcher runs only in the process leading `gmail`.

With `--workers N` (or several gateways on one PostgreSQL database) every process would start its
own IMAP watcher on the one checkpoint file, and each new mail would be fetched and posted N
times. The store's leadership lock (the one that chooses the heartbeat leader: a file lock beside
the SQLite database, a session advisory lock on PostgreSQL) decides instead: every process tries
to take `gmail` every `LEAD_EVERY` seconds, and the one that holds it runs the watcher. When that
process dies, the OS (or PostgreSQL) releases the lock and another takes over within seconds;
the checkpoint makes it resume where the first stopped.

A watcher that ends on its own (a configuration that cannot work, already logged) is not
restarted: its process keeps the lead, so no other starts a watcher that would fail the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Coroutine
from typing import Any

from ..store.base import Store

log = logging.getLogger("hookwise.gmail")

LEADERSHIP = "gmail"
LEAD_EVERY = 2.0


async def run_as_leader(
    store: Store,
    watch: Callable[[], Coroutine[Any, Any, None]],
    *,
    name: str = LEADERSHIP,
    every: float = LEAD_EVERY,
) -> None:
    """Run `watch()` only while this process holds leadership `name`, until cancelled."""
    task: asyncio.Task[None] | None = None
    try:
        while True:
            try:
                held = bool(await store.try_lead(name))
            except Exception:
                log.exception("gmail: the leadership check failed")
                held = False
            if held and task is None:
                log.info("gmail: process %d runs the mail watcher", os.getpid())
                task = asyncio.create_task(watch(), name="hookwise-gmail-watcher")
            elif not held and task is not None:
                log.warning("gmail: mail watcher leadership lost; stopping the watcher here")
                await _cancel(task)
                task = None
            await asyncio.sleep(every)
    finally:
        if task is not None:
            await _cancel(task)
        with contextlib.suppress(Exception):
            await store.resign(name)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


__all__ = ["LEADERSHIP", "run_as_leader"]
