"""The judge stage's spans (imported by the walker, `ingress.hooks`, only): a `Rules` that times rule selection (`hook.rule`) and the
evaluation of the chosen rule (`hook.transform`: extraction, templates and the transform, its
sandbox worker's time included, each call in its worker a `transform.execute` span) on the
request's span.

The judge itself lives in the pure `engine` (`hookwise.engine.judge`) and knows nothing of
tracing; the hook path hands it these rules instead of the plain ones only while a request is
traced (`traced_rules`), so tracing off costs one check per request.
"""

from __future__ import annotations

from typing import Any

from ...engine.judge import Rules
from ...engine.request import InboundRequest
from ...engine.signatures import Verifier
from ..telemetry import spans


class TracedRules:
    """`rules`, with `select` and `evaluate` each in a stage span."""

    def __init__(self, rules: Rules) -> None:
        self._rules = rules

    def door(self, path: str) -> Any:
        return self._rules.door(path)

    def unmatched(self, path: str) -> Any:
        return self._rules.unmatched(path)

    def why_unmatched(self, request: InboundRequest) -> str:
        return self._rules.why_unmatched(request)

    def select(self, request: InboundRequest) -> Any:
        with spans.stage("hook.rule"):
            return self._rules.select(request)

    async def evaluate(
        self, rule: Any, request: InboundRequest, *, verified: Verifier | None = None
    ) -> Any:
        transform = rule.transform
        attributes = {"hookwise.rule": rule.id}
        if transform is None:
            with spans.stage("hook.transform", attributes):
                return await self._rules.evaluate(rule, request, verified=verified)
        attributes["hookwise.transform"] = type(transform).__name__
        # each call in its sandbox worker: a `transform.execute` span under this stage
        with (
            spans.stage("hook.transform", attributes),
            spans.transform_calls(rule.id, transform.runtime),
        ):
            return await self._rules.evaluate(rule, request, verified=verified)


#: the last rules wrapped, and their wrapper (the rules change only on a reload)
_last: tuple[Rules | None, TracedRules | None] = (None, None)


def traced_rules(rules: Rules | None) -> Rules | None:
    """`rules` timed in spans while a request is traced here, else `rules` itself."""
    global _last
    if rules is None or not spans.tracing_request():
        return rules
    wrapped, traced = _last
    if wrapped is not rules or traced is None:
        traced = TracedRules(rules)
        _last = (rules, traced)
    return traced
