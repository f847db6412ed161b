"""Explaining a rule: one sample request put through the compiled rules as the hook endpoint would,
then every action validated and the status the server would answer worked out (`ignored` and 200
when no rule matched on a path that acknowledges such requests).

`hookwise rules test` prints it; the web console's rule tester shows it.
"""

from __future__ import annotations

from typing import Any

import attrs

from ...engine.actions import Action, ValidationPolicy, validate_action
from ...engine.errors import Refusal
from ...engine.request import InboundRequest
from ...engine.rules.ruleset import RuleSet
from .refusals import status_of


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _action_json(action: Action) -> dict[str, Any]:
    return {_camel(k): v for k, v in attrs.asdict(action).items()}


def explain_with_validation(
    ruleset: RuleSet, request: InboundRequest, policy: ValidationPolicy
) -> dict[str, Any]:
    """`hookwise.engine.rules.tool.explain` plus what the hook endpoint does next: validate every action
    (as a mapping's, `internal=True`) and work out the status the server would answer with."""
    from ...engine.rules.tool import explain

    return _validated(ruleset, explain(ruleset, request), policy)


async def explain_with_validation_async(
    ruleset: RuleSet, request: InboundRequest, policy: ValidationPolicy
) -> dict[str, Any]:
    """`explain_with_validation` for callers inside an event loop (the web console)."""
    from ...engine.rules.tool import explain_async

    return _validated(ruleset, await explain_async(ruleset, request), policy)


def _validated(
    ruleset: RuleSet, report: dict[str, Any], policy: ValidationPolicy
) -> dict[str, Any]:
    if report["error"] is not None:  # the engine's refusal: its status is chosen here
        report["error"] = {"status": status_of(report["error"]["code"]), **report["error"]}
    rule = next((r for r in ruleset.rules if r.id == report["matched"]), None)
    source = rule.key_source if rule is not None else "mapping"
    actions: list[dict[str, Any]] = []
    for entry in report["actions"]:
        item: dict[str, Any] = {
            "kind": entry["kind"],
            "rendered": entry["fields"],
            "validated": None,
            "error": None,
        }
        try:
            item["validated"] = _action_json(
                validate_action(
                    entry["kind"], entry["fields"], policy, internal=True, source=source
                )
            )
        except Refusal as e:
            e = attrs.evolve(
                e,
                message=f"rule {report['matched']!r} produced an invalid action: {e.message}",
                rule_id=report["matched"],
            )
            item["error"] = {"status": status_of(e.code), **e.to_body()}
            if report["error"] is None:
                report["error"] = item["error"]
        actions.append(item)
    report["actions"] = actions
    # a path that acknowledges what no rule matched answers 200 `ignored`, as the server does
    report["ignored"] = report["matched"] is None and ruleset.unmatched(report["path"]) == (
        "acknowledge"
    )
    report["status"] = 200 if report["ignored"] else _status(report)
    return report


def _status(report: dict[str, Any]) -> int:
    if report["matched"] is None:
        return 404
    if report["error"] is not None:
        return int(report["error"]["status"])
    if report["skipped"]:
        return 204
    if report["respond"] is not None:
        return int(report["respond"]["status"])
    return 202 if any(a["kind"] == "agent" for a in report["actions"]) else 200
