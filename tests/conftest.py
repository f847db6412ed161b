"""Shared fixtures: a factory for real gateway processes on loopback."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.gateway import GatewayProcess, base_config


@pytest.fixture
def start_gateway(tmp_path: Path) -> Iterator[Callable[..., GatewayProcess]]:
    """Start gateways with a given config (default: `base_config()`); all are stopped afterwards."""
    started: list[GatewayProcess] = []

    def start(
        config: dict[str, Any] | None = None,
        *,
        env: dict[str, str] | None = None,
        name: str = "gw",
        extra_args: list[str] | None = None,
    ) -> GatewayProcess:
        gw = GatewayProcess(
            config or base_config(), tmp_path / name, env=env, extra_args=extra_args
        )
        started.append(gw)
        return gw.start()

    yield start
    for gw in started:
        gw.stop()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """One gateway with the base config, shared by a module's tests."""
    gw = GatewayProcess(base_config(), tmp_path_factory.mktemp("gateway"))
    gw.start()
    yield gw
    gw.stop()
