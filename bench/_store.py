"""What the store benches share (`alerts.py`, `approvals.py`, `coalesce.py`): the `--store`
option and a fresh store of the kind it names (a temporary SQLite file, or a fresh PostgreSQL
database dropped afterwards), the rows they fill it with, and the timing of concurrent writers.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.pgstore import DEFAULT_PG_URL, fresh_database, is_postgres
from hookwise.server.store.base import AcceptOp, NewRun, RequestLogEntry
from hookwise.server.store.coalesce import CoalesceSpec
from hookwise.server.store.postgres import PostgresStore
from hookwise.server.store.sqlite import SQLiteStore

#: a function that makes a new (unopened) store on the bench's fresh database or file
MakeStore = Callable[[], Any]


def add_store_option(parser: argparse.ArgumentParser) -> None:
    """`--store sqlite|postgresql|URL` (default sqlite)."""
    parser.add_argument(
        "--store",
        default="sqlite",
        help="sqlite (a temporary file), postgresql (a fresh database on the default server) "
        "or a PostgreSQL server URL",
    )


@dataclass(frozen=True)
class StoreKind:
    """The store `--store` names: SQLite, or PostgreSQL on `server`."""

    server: str | None = None

    @property
    def name(self) -> str:
        return "sqlite" if self.server is None else "postgresql"

    @classmethod
    def parse(cls, value: str) -> StoreKind | None:
        """The kind `value` names; None (after a message on stderr) if it names none."""
        if value == "sqlite":
            return cls()
        server = DEFAULT_PG_URL if value == "postgresql" else value
        if not is_postgres(server):
            print(f"unknown --store {value!r}", file=sys.stderr)
            return None
        return cls(server)

    @contextmanager
    def fresh(self, pool_size: int = 8) -> Iterator[MakeStore]:
        """A maker of stores on a fresh database (PostgreSQL) or file (SQLite), removed on
        exit."""
        with ExitStack() as stack:
            if self.server is not None:
                url = stack.enter_context(fresh_database(self.server))

                def make_pg() -> Any:
                    return PostgresStore(url, pool_size=pool_size)

                yield make_pg
            else:
                folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))

                def make_sqlite() -> Any:
                    return SQLiteStore(folder / "bench.db")

                yield make_sqlite


def bench_run(n: int, *, message: str, rule_id: str, wake_mode: str = "next-heartbeat") -> NewRun:
    """Run number `n` (id `run-000000n`, session `hook:s<n>`), not delivered."""
    return NewRun(
        run_id=f"run-{n:07d}",
        session_key=f"hook:s{n}",
        name="bench",
        message=message,
        rule_id=rule_id,
        wake_mode=wake_mode,
        deliver=False,
        channel="last",
        to=None,
        model=None,
        thinking=None,
        timeout_seconds=None,
        fallback_channel=None,
        allow_unsafe_external_content=False,
    )


def accept_run(
    run: NewRun, path: str, *, body: bytes = b"{}", coalesce: CoalesceSpec | None = None
) -> AcceptOp:
    """The accept operation of a request to `path` that queued `run` (202, logged)."""
    now = time.time()
    log = RequestLogEntry(at=now, path=path, status=202, client=None, size=0, run_ids=(run.run_id,))
    return AcceptOp(status=202, body=body, log=log, runs=(run,), now=now, coalesce=coalesce)


async def concurrently(fn: Callable[[int], Awaitable[Any]], count: int, concurrency: int) -> float:
    """Seconds taken to await `fn(n)` for n in 0..count-1, `concurrency` at a time (as the HTTP
    layer submits them: each writer awaits its call before taking the next number)."""
    numbers = iter(range(count))

    async def worker() -> None:
        for n in numbers:
            await fn(n)

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - began
