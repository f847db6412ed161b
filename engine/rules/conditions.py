"""`match.when`: conditions on a request beyond its path and source, compiled once at load.

The YAML shape:

```yaml
when:                       # a condition, or a list of conditions (= all of them)
  all:                      # every one holds
    - header: x-github-event      # subject: `jsonpath`, `header` or `query` (exactly one)
      equals: pull_request        # test: `equals`, `in`, `regex` or `exists` (exactly one)
    - jsonpath: $.action
      in: [opened, reopened]
    - not: {jsonpath: $.pull_request.draft, equals: true}
    - any:                  # at least one holds
        - query: env
          regex: "^prod"
        - jsonpath: $.labels[*].name
          equals: urgent
```

Semantics:
- A `jsonpath` subject yields every match in the payload; a test passes when ANY match passes it.
  `exists: true` holds when there is at least one match (even a null one).
- `header` names are case-insensitive; `header` and `query` yield the value when present. Their
  values are text, so a number or boolean in `equals`/`in` is compared as its text (`200`, `true`).
- `equals`/`in` compare JSON values; `true` does not equal `1`. `regex` searches (Python `re`,
  anywhere in the text) strings and numbers, never objects, lists, booleans or null.
- `not` negates one condition; `all: []` holds and `any: []` does not.

Errors name the key path (`hooks.mappings[0].match.when.all[1].regex: ...`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from typing import Any, Protocol

import attrs

from ..errors import ConfigError, ConfigIssue
from ..request import InboundRequest
from .extract import JsonPathError, compile_jsonpath

_SUBJECTS = ("jsonpath", "header", "query")
_TESTS = ("equals", "in", "regex", "exists")
_KNOWN = (*_SUBJECTS, *_TESTS, "all", "any", "not")


class Condition(Protocol):
    """A compiled condition: `holds` decides; `why_not` names the part that failed (or None)."""

    def holds(self, request: InboundRequest) -> bool: ...

    def why_not(self, request: InboundRequest) -> str | None: ...


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def _as_text(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return value


@attrs.frozen
class _Leaf:
    where: str
    subject: str
    name: str
    test: str
    expected: Any
    _read: Any = attrs.field(repr=False, eq=False)
    _check: Any = attrs.field(repr=False, eq=False)

    def holds(self, request: InboundRequest) -> bool:
        return bool(self._check(self._read(request)))

    def why_not(self, request: InboundRequest) -> str | None:
        if self.holds(request):
            return None
        return f"{self.where}: {self.subject} {self.name!r} {self.test} {self.expected!r} is false"


@attrs.frozen
class _All:
    where: str
    parts: tuple[Condition, ...]

    def holds(self, request: InboundRequest) -> bool:
        return all(p.holds(request) for p in self.parts)

    def why_not(self, request: InboundRequest) -> str | None:
        for p in self.parts:
            reason = p.why_not(request)
            if reason is not None:
                return reason
        return None


@attrs.frozen
class _Any:
    where: str
    parts: tuple[Condition, ...]

    def holds(self, request: InboundRequest) -> bool:
        return any(p.holds(request) for p in self.parts)

    def why_not(self, request: InboundRequest) -> str | None:
        if self.holds(request):
            return None
        return f"{self.where}: none of the {len(self.parts)} alternatives holds"


@attrs.frozen
class _Not:
    where: str
    part: Condition

    def holds(self, request: InboundRequest) -> bool:
        return not self.part.holds(request)

    def why_not(self, request: InboundRequest) -> str | None:
        if self.holds(request):
            return None
        return f"{self.where}: the negated condition holds"


def subject_reader(subject: str, name: str) -> Callable[[InboundRequest], list[Any]]:
    """How a condition reads its subject from a request: every JSONPath match, or the header's
    (name case-insensitive) or query parameter's value when present. Raises `JsonPathError`."""
    if subject == "jsonpath":
        expr = compile_jsonpath(name)
        return lambda request: expr.all(request.payload)
    if subject == "header":
        key = name.strip().lower()

        def read_header(request: InboundRequest) -> list[Any]:
            value = request.headers.get(key)
            return [] if value is None else [value]

        return read_header

    def read_query(request: InboundRequest) -> list[Any]:
        value = request.query.get(name)
        return [] if value is None else [value]

    return read_query


class _Compiler:
    def __init__(self) -> None:
        self.issues: list[ConfigIssue] = []

    def fail(self, where: str, message: str) -> None:
        self.issues.append(ConfigIssue(where, message))

    def node(self, data: Any, where: str) -> Condition | None:
        if isinstance(data, list):
            return self.group(_All, data, where)
        if not isinstance(data, dict):
            self.fail(where, "must be a condition (a mapping) or a list of conditions")
            return None
        for key in data:
            if key not in _KNOWN:
                hint = difflib.get_close_matches(str(key), _KNOWN, n=1, cutoff=0.6)
                self.fail(
                    f"{where}.{key}",
                    "unknown key" + (f"; did you mean {hint[0]!r}?" if hint else ""),
                )
        combinators = [k for k in ("all", "any", "not") if k in data]
        if combinators:
            if len(data) != 1:
                others = ", ".join(sorted(str(k) for k in data if k != combinators[0]))
                self.fail(where, f"`{combinators[0]}` must stand alone (found also: {others})")
                return None
            key = combinators[0]
            if key == "not":
                inner = self.node(data["not"], f"{where}.not")
                return _Not(where, inner) if inner is not None else None
            if not isinstance(data[key], list):
                self.fail(f"{where}.{key}", "must be a list of conditions")
                return None
            return self.group(_All if key == "all" else _Any, data[key], f"{where}.{key}")
        return self.leaf(data, where)

    def group(
        self, kind: type[_All] | type[_Any], items: list[Any], where: str
    ) -> Condition | None:
        parts = [self.node(item, f"{where}[{i}]") for i, item in enumerate(items)]
        if any(p is None for p in parts):
            return None
        return kind(where, tuple(p for p in parts if p is not None))

    def leaf(self, data: dict[str, Any], where: str) -> Condition | None:
        subjects = [k for k in _SUBJECTS if k in data]
        tests = [k for k in _TESTS if k in data]
        if len(subjects) != 1:
            self.fail(where, "needs exactly one of jsonpath, header, query, or all/any/not")
            return None
        if len(tests) != 1:
            self.fail(where, "needs exactly one test: equals, in, regex or exists")
            return None
        subject, test = subjects[0], tests[0]
        name, expected = data[subject], data[test]
        if not isinstance(name, str) or not name.strip():
            self.fail(f"{where}.{subject}", "must be a non-empty string")
            return None
        read = self.reader(subject, name, f"{where}.{subject}")
        check = self.checker(subject, test, expected, f"{where}.{test}")
        if read is None or check is None:
            return None
        return _Leaf(where, subject, name, test, expected, read, check)

    def reader(self, subject: str, name: str, where: str) -> Any:
        try:
            return subject_reader(subject, name)
        except JsonPathError as exc:
            self.fail(where, str(exc))
            return None

    def checker(self, subject: str, test: str, expected: Any, where: str) -> Any:
        textual = subject != "jsonpath"
        if test == "exists":
            if not isinstance(expected, bool):
                self.fail(where, "must be true or false")
                return None
            return lambda values: bool(values) == expected
        if test == "regex":
            if not isinstance(expected, str):
                self.fail(where, "must be a regular expression (a string)")
                return None
            try:
                rx = re.compile(expected)
            except re.error as exc:
                self.fail(where, f"invalid regular expression: {exc}")
                return None

            def search(values: list[Any]) -> bool:
                return any(
                    isinstance(v, (str, int, float))
                    and not isinstance(v, bool)
                    and rx.search(v if isinstance(v, str) else str(v)) is not None
                    for v in values
                )

            return search
        if test == "in":
            if not isinstance(expected, list):
                self.fail(where, "must be a list of values")
                return None
            options = [_as_text(o) for o in expected] if textual else list(expected)
            return lambda values: any(_same(v, o) for v in values for o in options)
        target = _as_text(expected) if textual else expected
        return lambda values: any(_same(v, target) for v in values)


def compile_when(data: Any, where: str = "match.when") -> Condition | None:
    """Compile a `match.when` value; None when there is none. Raises `ConfigError` (all issues)."""
    if data is None:
        return None
    compiler = _Compiler()
    condition = compiler.node(data, where)
    if compiler.issues:
        raise ConfigError(compiler.issues)
    return condition


@attrs.frozen
class Equality:
    """A test a condition requires: `subject` (`jsonpath`, `header` or `query`) `name` equals one
    of `values` (a header's or query parameter's already in their text form), read from a request
    as the condition reads it. Used to index rules (`hookwise.engine.rules.index`)."""

    subject: str
    name: str
    values: tuple[Any, ...]


@attrs.frozen
class Requirements:
    """What a condition requires: `equalities` must all hold; `exact` when the condition is
    nothing more than them (so it holds whenever they all do)."""

    equalities: tuple[Equality, ...]
    exact: bool


def requirements(condition: Condition | None) -> Requirements:
    """The `equals`/`in` tests that must hold for `condition` to hold: the condition itself, or
    the parts of an `all` (nested `all`s included). `any` and `not` require none of their parts."""
    if condition is None:
        return Requirements((), True)
    if isinstance(condition, _All):
        parts = [requirements(p) for p in condition.parts]
        found = tuple(eq for part in parts for eq in part.equalities)
        return Requirements(found, all(p.exact for p in parts))
    if not isinstance(condition, _Leaf) or condition.test not in ("equals", "in"):
        return Requirements((), False)
    expected = condition.expected if condition.test == "in" else [condition.expected]
    textual = condition.subject != "jsonpath"
    values = tuple(_as_text(v) if textual else v for v in expected)
    name = condition.name  # read as the leaf reads it
    if condition.subject == "header":
        name = name.strip().lower()
    elif condition.subject == "jsonpath":
        name = name.strip()
    return Requirements((Equality(condition.subject, name, values),), True)


def equality_key(value: Any) -> Any:
    """A hashable key such that two values have the same key exactly when `equals` holds between
    them (`true` is not `1`, `1` is `1.0`); None for values no key stands for (lists, objects,
    NaN), which an index must not hold."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("num", value) if value == value else None
    if isinstance(value, str):
        return ("str", value)
    if value is None:
        return ("null",)
    return None
