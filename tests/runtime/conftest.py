"""Fixtures for runtime tests: the loopback model server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.model_server import ModelServer


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    """A fresh fake OpenAI + Anthropic server on 127.0.0.1; see tests/fakes/model_server.py."""
    with ModelServer() as server:
        yield server
