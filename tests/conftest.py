"""Shared fixtures: factories for real gateway processes on loopback.

Gateways run on SQLite (a file in their state dir) unless a suite overrides `store_kind`:
`tests/http` runs every test on both stores, each PostgreSQL gateway on a fresh database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.support.approvals import chat_approvals  # noqa: F401 - fixture
from tests.support.clients import share_tls_contexts
from tests.support.gateway import GatewayProcess, base_config
from tests.support.postgres import fresh_database

share_tls_contexts()  # the tests' HTTP clients: 17 ms of CPU less each (tests/support/clients.py)


@pytest.fixture(scope="module")
def store_kind() -> str:
    """The store the gateways of a test run on: `sqlite` or `postgres`."""
    return "sqlite"


class Gateways:
    """Starts gateways under `root`, each with its own store (its state dir's SQLite file or a
    fresh PostgreSQL database, kept across restarts); `close()` stops them and drops the
    databases."""

    def __init__(self, root: Path, store_kind: str) -> None:
        self.root = root
        self.store_kind = store_kind
        self.started: list[GatewayProcess] = []
        self._databases = ExitStack()

    def start(
        self,
        config: dict[str, Any] | None = None,
        *,
        env: dict[str, str] | None = None,
        name: str = "gw",
        extra_args: list[str] | None = None,
        workdir: Path | None = None,
    ) -> GatewayProcess:
        store: list[str] = []
        if self.store_kind == "postgres":
            store = ["--store", self._databases.enter_context(fresh_database())]
        gw = GatewayProcess(
            config or base_config(),
            workdir or self.root / name,
            env=env,
            extra_args=[*store, *(extra_args or [])],
        )
        self.started.append(gw)
        return gw.start()

    def close(self) -> None:
        with self._databases:
            for gw in self.started:
                gw.stop()


@pytest.fixture
def start_gateway(tmp_path: Path, store_kind: str) -> Iterator[Callable[..., GatewayProcess]]:
    """Start gateways with a given config (default: `base_config()`) for one test."""
    gateways = Gateways(tmp_path, store_kind)
    yield gateways.start
    gateways.close()


@pytest.fixture(scope="module")
def start_module_gateway(
    tmp_path_factory: pytest.TempPathFactory, store_kind: str
) -> Iterator[Callable[..., GatewayProcess]]:
    """Start gateways shared by a module's tests (same options as `start_gateway`, and
    `workdir=` for a gateway whose config names files beside it)."""
    gateways = Gateways(tmp_path_factory.mktemp("gateways"), store_kind)
    yield gateways.start
    gateways.close()


@pytest.fixture(scope="module")
def gateway(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    """One gateway with the base config, shared by a module's tests."""
    return start_module_gateway(name="gateway")
