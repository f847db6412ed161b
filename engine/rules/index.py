"""Rule selection that does not grow with the rules: an index over the rules that may serve a path.

Selection is first-match over the rules in their configured order (`hookwise.engine.rules.ruleset`). With
many rules on one path (one generic ingest path routing many sources), trying each rule's
conditions in turn costs time in proportion to the rules. The index keeps the result and drops
that cost:

- A rule's **discriminator** is one equality test it requires: `match.source`, or an `equals` /
  `in` test on a header, query parameter or JSONPath that `match.when` requires (the condition
  itself, or a part of a top-level `all`; never inside `any` or `not`). A rule that requires
  several is indexed by the one most rules on the path share (ties: source, then the order the
  tests are written), so that a request makes few look-ups.
- A request reads each indexed subject once (its `source`, the header, the JSONPath's matches),
  looks the values up, and gets the positions of the rules that may match. Those, merged with
  the rules that have no discriminator, are tried in their original order with the full match;
  the first that matches wins. A rule left out can never match the request (its required value
  is not there), so the result is exactly that of trying every rule in order.
- Values compare as `equals` does (`hookwise.engine.rules.conditions.equality_key`: `true` is not `1`,
  a header's `200` is the text `"200"`); values no key stands for (lists, objects) are not
  indexed, and such a rule is simply tried on every request.

`shadowed(rules)` finds rules that can never be selected because an earlier rule matches every
request they match (a conservative check: it only claims what it can show).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ..request import InboundRequest
from .conditions import Equality, equality_key, requirements, subject_reader

if TYPE_CHECKING:
    from .rule import CompiledRule

# ("source", "") | ("header", name) | ("query", name) | ("jsonpath", path)
Subject = tuple[str, str]
Reader = Callable[[InboundRequest], list[Any]]


@attrs.frozen
class Discriminator:
    """The equality a rule is indexed by: `subject` equals one of `values`."""

    subject: Subject
    values: tuple[Any, ...]

    def describe(self) -> str:
        kind, name = self.subject
        shown = ", ".join(repr(v) for v in self.values)
        what = "match.source" if kind == "source" else f"{kind} {name!r}"
        return f"{what} = {shown}" if len(self.values) == 1 else f"{what} in [{shown}]"


def _read_source(request: InboundRequest) -> list[Any]:
    payload = request.payload
    source = payload.get("source") if isinstance(payload, dict) else None
    return [source.strip()] if isinstance(source, str) else []


def _reader(subject: Subject) -> Reader:
    kind, name = subject
    return _read_source if kind == "source" else subject_reader(kind, name)


def candidate_discriminators(rule: CompiledRule) -> list[Discriminator]:
    """Every equality the rule requires that an index can hold, in the order written."""
    found = []
    if rule.source is not None:
        found.append(Discriminator(("source", ""), (rule.source,)))
    for eq in requirements(rule.when).equalities:
        if eq.values and all(equality_key(v) is not None for v in eq.values):
            found.append(Discriminator((eq.subject, eq.name), eq.values))
    return found


def choose_discriminators(rules: Sequence[CompiledRule]) -> list[Discriminator | None]:
    """For each rule, the discriminator it is indexed by (None: tried on every request)."""
    options = [candidate_discriminators(r) for r in rules]
    popular = Counter(subject for found in options for subject in {d.subject for d in found})
    chosen: list[Discriminator | None] = []
    for found in options:
        best = None
        for d in found:
            if best is None or popular[d.subject] > popular[best.subject]:
                best = d
        chosen.append(best)
    return chosen


class RuleIndex:
    """The rules that may serve one path, in order, with their discriminators indexed."""

    def __init__(self, rules: Sequence[CompiledRule]) -> None:
        self.rules = tuple(rules)
        self.discriminators = choose_discriminators(self.rules)
        tables: dict[Subject, dict[Any, list[int]]] = {}
        unindexed: list[int] = []
        for position, d in enumerate(self.discriminators):
            if d is None:
                unindexed.append(position)
                continue
            table = tables.setdefault(d.subject, {})
            for key in {equality_key(v) for v in d.values}:
                table.setdefault(key, []).append(position)
        self._groups = tuple(
            (_reader(subject), {k: tuple(v) for k, v in table.items()})
            for subject, table in tables.items()
        )
        self._unindexed = tuple(unindexed)

    def candidates(self, request: InboundRequest) -> list[int] | tuple[int, ...]:
        """Positions of the rules that may match `request`, ascending."""
        found: list[int] = []
        hits = 0
        for read, table in self._groups:
            for value in read(request):
                key = equality_key(value)
                positions = table.get(key) if key is not None else None
                if positions:
                    found.extend(positions)
                    hits += 1
        if not hits:
            return self._unindexed
        if hits == 1 and not self._unindexed:
            return found
        return sorted(set(found).union(self._unindexed))

    def select(self, request: InboundRequest) -> CompiledRule | None:
        """The first rule (in configured order) that matches `request`, or None."""
        rules = self.rules
        for position in self.candidates(request):
            rule = rules[position]
            if rule.matches(request):
                return rule
        return None


# ------------------------------------------------------------------------------ shadowed rules


def _implies(later: Sequence[Equality], earlier: Equality) -> bool:
    """Some equality of `later` on the same subject allows only values `earlier` allows."""
    allowed = {equality_key(v) for v in earlier.values}
    if None in allowed:
        return False
    for eq in later:
        if (eq.subject, eq.name) != (earlier.subject, earlier.name):
            continue
        keys = {equality_key(v) for v in eq.values}
        if None not in keys and keys <= allowed:
            return True
    return False


@attrs.frozen
class _Needs:
    path: str | None
    source: str | None
    equalities: tuple[Equality, ...]
    exact: bool

    @classmethod
    def of(cls, rule: CompiledRule) -> _Needs:
        found = requirements(rule.when)
        return cls(rule.path, rule.source, found.equalities, found.exact)


def _covers(first: _Needs, later: _Needs) -> bool:
    """Every request `later` matches is matched by `first` (as far as can be shown)."""
    if not first.exact:
        return False
    if first.path is not None and first.path != later.path:
        return False
    if first.source is not None and first.source != later.source:
        return False
    return all(_implies(later.equalities, eq) for eq in first.equalities)


def shadowed(rules: Sequence[CompiledRule]) -> list[tuple[CompiledRule, CompiledRule]]:
    """(rule, the earlier rule that shadows it) for each rule that can never be selected: the
    earlier one matches every request it matches (path, source and `when`; a check that claims
    only what it can show, so some unreachable rules go unreported)."""
    needs = [_Needs.of(r) for r in rules]
    out = []
    for i, later in enumerate(needs):
        for j in range(i):
            if _covers(needs[j], later):
                out.append((rules[i], rules[j]))
                break
    return out
