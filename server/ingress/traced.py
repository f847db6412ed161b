"""The judge stage's spans (imported by the walker, `ingress.hooks`, only): a `Rules` that times rule selection (`hook.rule`) and the
evaluation of the chosen rule (`hook.transform`: extraction, templates and the transform, its
sandbox worker's time included, each call in its worker a `transform.execute` span) on the
request's span.

The judge itself lives in the pure `engine` (`hookwise.engine.judge`) and knows nothing of
tracing; the hook path hands it these rules instead of the plain ones only while a request is
traced (`traced_rules`), so tracing off costs one check per request.
"""

from __future__ import annotations

import time
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

    # each stage timed by hand rather than in `spans.stage`: four calls fewer per stage, on
    # the path of every traced request

    def select(self, request: InboundRequest) -> Any:
        span = spans.current_request()
        started = time.time_ns()
        try:
            found = self._rules.select(request)
        except Exception as e:
            if span is not None:
                span.timed("hook.rule", started, None, e)
            raise
        if span is not None:
            span.timed("hook.rule", started, None)
        return found

    async def evaluate(
        self, rule: Any, request: InboundRequest, *, verified: Verifier | None = None
    ) -> Any:
        span = spans.current_request()
        transform = rule.transform
        attributes = {"hookwise.rule": rule.id}
        started = time.time_ns()
        try:
            if transform is None:
                done = await self._rules.evaluate(rule, request, verified=verified)
            else:
                attributes["hookwise.transform"] = type(transform).__name__
                # each call in its sandbox worker: a `transform.execute` span under this stage
                with spans.transform_calls(rule.id, transform.runtime):
                    done = await self._rules.evaluate(rule, request, verified=verified)
        except Exception as e:
            if span is not None:
                span.timed("hook.transform", started, attributes, e)
            raise
        if span is not None:
            span.timed("hook.transform", started, attributes)
        return done


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
