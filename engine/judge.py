"""The judge stage of the hook path: what an authenticated, parsed request becomes.

`judge` is the one judgement every request gets, whoever brings it: a live request (after the
door and the body stages in `hookwise.server.ingress`), a replayed one (the admin API) and a
message pulled from a broker (`hookwise.server.sources`). It selects the rule, runs it (verify,
extract, render, transform: `RuleSet.evaluate`), validates the actions it makes against the
configured policy (agents, session keys, models, channels) and answers a `Judgement`, or raises
a typed refusal (`Refusal`: a stable code, a sentence, the field and the rule).

`wake` and `agent` are judged as their payload itself; every other name goes through the rules
a `RuleSource` gives at that moment (the gateway's current rules, swapped on reload).

Pure: no I/O of its own (a transform runs in the transform host the rules were compiled with),
the clock only through the `InboundRequest` the caller builds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import attrs

from .actions import ValidationPolicy, validate_action, validate_agent, validate_wake
from .errors import Refusal
from .judgement import Judgement
from .request import InboundRequest
from .rules.rule import CompiledRule
from .rules.ruleset import Outcome
from .rules.unmatched import Unmatched
from .signatures import Verifier
from .signatures.door import Door


class Rules(Protocol):
    """What the hook path asks of the rules (`hookwise.engine.rules.RuleSet` is the one kind)."""

    def door(self, path: str) -> Door | None: ...

    def unmatched(self, path: str) -> Unmatched: ...

    def why_unmatched(self, request: InboundRequest) -> str: ...

    def select(self, request: InboundRequest) -> CompiledRule | None: ...

    async def evaluate(
        self, rule: CompiledRule, request: InboundRequest, *, verified: Verifier | None = None
    ) -> Outcome: ...


class RuleSource(Protocol):
    """Gives the rules in force now (None: hooks have no mapped rules); asked once per request,
    so a reload takes effect for the next request and never in the middle of one."""

    def __call__(self) -> Rules | None: ...


def no_rules() -> Rules | None:
    """The `RuleSource` of a gateway without mapped hooks."""
    return None


async def judge(
    sub: str,
    payload: Any,
    request_of: Callable[[Any], InboundRequest],
    *,
    rules: Rules | None,
    policy: ValidationPolicy,
    url: Callable[[], str] | None = None,
    verified: Verifier | None = None,
    acknowledge: bool = False,
) -> Judgement:
    """Judge the request to the hook `sub` carrying `payload`: `wake`, `agent`, or the mapped
    rules for any other name; the validated actions, or a `Refusal`.

    `request_of(payload)` builds the engine's view of a mapped request (not built for `wake` and
    `agent`); `url` gives the URL for schemes that sign it (asked only when one may); `verified`
    is the door's block already checked; `acknowledge` (a live request) lets a path whose
    `unmatched` is `acknowledge` answer a request no rule matched with `Judgement.ignored`
    instead of refusing it (a replay of it is still refused until a rule matches)."""
    if sub == "wake":
        return Judgement((validate_wake(payload, policy),))
    if sub == "agent":
        return Judgement((validate_agent(payload, policy),))
    if rules is None:
        raise Refusal("not_found", f"no hook or mapping matches {sub!r}")
    request = request_of(payload)
    rule = rules.select(request)
    if rule is None:
        if acknowledge and rules.unmatched(sub) == "acknowledge":
            return Judgement((), ignored=True)
        raise Refusal("not_found", rules.why_unmatched(request))
    signs_url = rule.verifier is not None or rules.door(sub) is not None
    if url is not None and not request.url and signs_url:
        # only schemes that sign the URL read it (Twilio, Square): made when one may
        request = attrs.evolve(request, url=url())
    outcome = await rules.evaluate(rule, request, verified=verified)
    rule_id = outcome.rule_id
    if outcome.skipped or not outcome.actions:
        return Judgement(
            (), rule_id, outcome.respond, skipped=True, delivery_id=outcome.delivery_id
        )
    source = rule.key_source
    try:
        # every item of a batch is validated before anything of it is stored
        actions = tuple(
            validate_action(spec.kind, spec.fields, policy, internal=True, source=source)
            for spec in outcome.actions
        )
    except Refusal as e:
        raise attrs.evolve(
            e,
            message=f"rule {rule_id!r} produced an invalid action: {e.message}",
            rule_id=rule_id,
        ) from None
    return Judgement(
        actions,
        rule_id,
        outcome.respond,
        delivery_id=outcome.delivery_id,
        batch=rule.for_each is not None,
        callback_url=outcome.callback_url,
        coalesce=rule.config.coalesce,
        coalesce_key=outcome.coalesce_key,
        sender=outcome.sender,
    )
