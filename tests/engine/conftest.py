"""Fixtures for the engine tests: compile rules from plain data, build requests, run coroutines."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from hookwise.engine.config.convert import structure
from hookwise.engine.config.mapping import MappingConfig
from hookwise.engine.request import InboundRequest
from hookwise.engine.rules.ruleset import Outcome, RuleSet
from hookwise.engine.transforms import TransformLimits

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 5, 1, 12, 30, 0, tzinfo=UTC)


def make_request(
    path: str = "hook",
    payload: dict[str, Any] | None = None,
    *,
    headers: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
    raw_body: bytes = b"",
) -> InboundRequest:
    return InboundRequest(
        path=path,
        payload=payload if payload is not None else {},
        headers={k.lower(): v for k, v in (headers or {}).items()},
        query=query or {},
        raw_body=raw_body,
        now=NOW,
    )


def run(coro: Any) -> Any:
    return asyncio.run(coro)


class Rules:
    """Compiles rule sets from plain mapping data and closes them after the test."""

    def __init__(self, transforms_dir: Path) -> None:
        self.transforms_dir = transforms_dir
        self._open: list[RuleSet] = []

    def compile(
        self,
        mappings: list[dict[str, Any]] = (),  # type: ignore[assignment]
        *,
        limits: TransformLimits | None = None,
        **kwargs: Any,
    ) -> RuleSet:
        configs = [
            structure(m, MappingConfig, f"hooks.mappings[{i}]") for i, m in enumerate(mappings)
        ]
        kwargs.setdefault("transforms_dir", self.transforms_dir)
        ruleset = RuleSet.compile(configs, limits=limits or TransformLimits(), **kwargs)
        self._open.append(ruleset)
        return ruleset

    def outcome(self, ruleset: RuleSet, request: InboundRequest) -> Outcome:
        rule = ruleset.select(request)
        assert rule is not None, "no rule matched"
        return run(ruleset.evaluate(rule, request))

    def one(self, mapping: dict[str, Any], payload: dict[str, Any], **request: Any) -> Outcome:
        """Compile one mapping (path `hook`) and evaluate one payload through it."""
        mapping = {"match": {"path": "hook"}, **mapping}
        ruleset = self.compile([mapping])
        return self.outcome(ruleset, make_request("hook", payload, **request))

    def close(self) -> None:
        for ruleset in self._open:
            ruleset.close()


@pytest.fixture
def transforms_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "transforms"
    folder.mkdir()
    return folder


@pytest.fixture
def write_transform(transforms_dir: Path) -> Callable[[str, str], str]:
    def write(name: str, source: str) -> str:
        (transforms_dir / name).write_text(source, encoding="utf-8")
        return name

    return write


@pytest.fixture
def rules(transforms_dir: Path) -> Iterator[Rules]:
    helper = Rules(transforms_dir)
    yield helper
    helper.close()
