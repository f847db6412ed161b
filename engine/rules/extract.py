"""JSONPath for rules: expressions parsed once at load, evaluated against payloads many times.

jsonpath-ng's extended syntax (filters `[?(@.state == 'open')]`, `len`, arithmetic, ...). Plain
paths made only of names and non-negative indexes (`$.messages[0].subject`, `$['x-id']`) take a
fast path that walks the data directly, with the same results as jsonpath-ng; a bare path
without `$` (`messages`, `batch.items[0]`, as the peer writes `forEach`) is that same plain path.
"""

from __future__ import annotations

import re
from typing import Any

import attrs
from jsonpath_ng.ext import parse as _parse

_MISSING = object()
_SIMPLE = re.compile(r"^\$((?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\]|\['[^'\\]*'\])*)$")
_BARE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\])*$")
_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\['([^'\\]*)'\]")


class JsonPathError(ValueError):
    """An expression that does not parse."""


def _walk(steps: tuple[str | int, ...], data: Any) -> Any:
    for step in steps:
        if isinstance(step, int):
            if not isinstance(data, list) or step >= len(data):
                return _MISSING
            data = data[step]
        else:
            if not isinstance(data, dict) or step not in data:
                return _MISSING
            data = data[step]
    return data


@attrs.frozen
class JsonPath:
    """A compiled JSONPath: `first` gives the first match (None if none), `all` every match."""

    source: str
    _expr: Any = attrs.field(repr=False, eq=False)
    _steps: tuple[str | int, ...] | None = attrs.field(repr=False, eq=False)

    @property
    def steps(self) -> tuple[str | int, ...] | None:
        """The names and indexes of a plain path (`$.a.b[0]`); None for any other expression."""
        return self._steps

    def first(self, data: Any) -> Any:
        if self._steps is not None:
            value = _walk(self._steps, data)
            return None if value is _MISSING else value
        matches = self._expr.find(data)
        return matches[0].value if matches else None

    def all(self, data: Any) -> list[Any]:
        if self._steps is not None:
            value = _walk(self._steps, data)
            return [] if value is _MISSING else [value]
        return [m.value for m in self._expr.find(data)]

    def exists(self, data: Any) -> bool:
        if self._steps is not None:
            return _walk(self._steps, data) is not _MISSING
        return bool(self._expr.find(data))


def compile_jsonpath(source: str) -> JsonPath:
    """Parse once. Raises `JsonPathError` with the parser's reason."""
    text = source.strip()
    if not text:
        raise JsonPathError("JSONPath is empty")
    try:
        expr = _parse(text)
    except Exception as exc:  # jsonpath-ng raises several types for bad input
        raise JsonPathError(f"invalid JSONPath {text!r}: {exc}") from None
    steps: tuple[str | int, ...] | None = None
    # a bare path (`messages`, `batch.items`), as the peer's configurations write it, is the
    # same plain path as `$.messages` (jsonpath-ng reads both alike)
    simple = _SIMPLE.match(text) or (_SIMPLE.match("$." + text) if _BARE.match(text) else None)
    if simple:
        parsed: list[str | int] = []
        for name, index, quoted in _STEP.findall(simple.group(1)):
            parsed.append(int(index) if index else (name or quoted))
        steps = tuple(parsed)
    return JsonPath(text, expr, steps)
