"""`forEach`: the items a rule fans out over, and the payload each item is rendered with.

A plain path (`$.messages`, `$.messages[*]`) must lead to a list (`400 missing_value` naming the
path otherwise); each item then sees the payload with that list replaced by `[item]`. Any other
expression fans out over its matches (or the one list it yields) with the payload left whole.
More items than `forEachMax` (default 200, the peer's cap) refuse the whole batch: `413
for_each_max_exceeded` naming `forEachMax`, nothing stored.
"""

from __future__ import annotations

from typing import Any

from ..config.convert import kind_of
from ..errors import Refusal
from .extract import JsonPath
from .rule import CompiledRule

#: a step that leads nowhere (distinct from a null value)
_ABSENT = object()


def capped(rule: CompiledRule, items: list[Any]) -> list[Any]:
    """`items` when there are at most `forEachMax` of them; otherwise the whole batch is
    refused (`413 for_each_max_exceeded`, field `forEachMax`): never truncate and accept."""
    cap = rule.config.for_each_max
    if len(items) <= cap:
        return items
    raise Refusal(
        "for_each_max_exceeded",
        f"rule {rule.id!r}: forEach: {(rule.config.for_each or '').strip()} has {len(items)}"
        f" items, more than forEachMax ({cap}); nothing was accepted, send smaller batches",
        "forEachMax",
        rule.id,
    )


def items_of(rule: CompiledRule, expr: JsonPath, payload: Any) -> list[Any]:
    values = expr.all(payload)
    if len(values) == 1 and isinstance(values[0], list):
        values = values[0]
    return capped(rule, values)


def listed(rule: CompiledRule, payload: Any) -> list[Any]:
    """The items of a plain `forEach` path: 400 `missing_value` when the list is missing or is
    not a list (naming the path, never quoting the payload)."""
    assert rule.for_each_list is not None and rule.config.for_each is not None
    value = payload
    for step in rule.for_each_list:
        if isinstance(step, int):
            value = value[step] if isinstance(value, list) and step < len(value) else _ABSENT
        else:
            value = value.get(step, _ABSENT) if isinstance(value, dict) else _ABSENT
        if value is _ABSENT:
            break
    path = rule.config.for_each.strip()
    if value is _ABSENT or value is None:
        problem = "is missing from the payload"
    elif not isinstance(value, list):
        problem = f"is not a list (it is {kind_of(value)})"
    else:
        return capped(rule, value)
    raise Refusal(
        "missing_value", f"rule {rule.id!r}: forEach: {path} {problem}", "forEach", rule.id
    )


def with_list(data: Any, steps: tuple[str | int, ...], replacement: list[Any]) -> Any:
    """`data` with the value at `steps` replaced, copying only the containers on the way."""
    if not steps:
        return replacement
    head, rest = steps[0], steps[1:]
    if isinstance(data, dict):
        return {**data, head: with_list(data[head], rest, replacement)}
    copy = list(data)
    copy[head] = with_list(data[head], rest, replacement)  # type: ignore[index]
    return copy
