"""The HTTP suite runs on both stores: every test once on SQLite, once on PostgreSQL."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)
