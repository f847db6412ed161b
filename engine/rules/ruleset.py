"""The rule set of mapped hooks: compile mappings once, then select and evaluate per request.

Its parts: where rules come from (`hookwise.engine.rules.files`), one rule compiled
(`hookwise.engine.rules.rule`), selection by path and discriminator (`hookwise.engine.rules.index`) and
`forEach`'s items (`hookwise.engine.rules.fanout`); this module holds the set and its evaluation.

Order and identity:
- Rules are tried in this order: `hooks.mappings`, then the mappings of each `hooks.rules` file (in
  the order listed; a glob's files sorted by name), then the presets named in `hooks.presets`
  (from the project's `rules/presets/<name>.yaml`). The first rule that matches wins. Selection
  looks candidates up by path and discriminator (`hookwise.engine.rules.index`), with the result
  of trying every rule in order.
- A rule without `id` is `mapping-N`, N being its 1-based position in that combined order (as
  OpenClaw numbers `mapping-${index + 1}` over custom mappings then presets). Ids must be unique.

Matching: `match.path` equals the request's sub-path (slashes trimmed on both); `match.source`
equals the payload's `source` when that is a string; `match.when` holds (see
`hookwise.engine.rules.conditions`). A missing part matches anything.

Evaluation (`RuleSet.evaluate`) produces `ActionSpec`s: the raw fields of a direct `/wake` or
`/agent` payload, not yet validated. Templates fill `text` (`textTemplate`) or `message`
(`messageTemplate`), and `name`, `sessionKey`, `to`, `model`, `thinking` (trimmed; left out when
they render empty). Fields the mapping does not set are left out, except `channel` (`last`) and
`mode`/`wakeMode` (the mapping's `wakeMode`, default `now`).

`forEach` (a JSONPath) fans out: when it yields one list, each element is an item; otherwise each
match is. More than `forEachMax` items (default 200, the peer's cap) refuse the whole batch (`413
for_each_max_exceeded`, field `forEachMax`): nothing is truncated and accepted. Each item gives one
action, rendered with two more variables: `item` (the element) and `index` (0-based), and, as the
peer shows it, with the payload in which the fanned-out list is replaced by `[item]`: so both
`{{item.subject}}` and `{{messages[0].subject}}` (and `payload.messages[0]`, and a transform's
`payload`) are the current element. That holds when `forEach` is a plain path (`$.messages`) or a
plain path with `[*]`; other expressions leave the payload whole. `extract` values are taken
from the whole batch. For a plain path, a list that is missing from the payload, or is not a
list, is `400 missing_value` naming the path (a misspelt `messages` is a mistake, not an empty
mailbox); an empty list means no action (skipped, 204). The transform, if any, runs per item.

A transform's result: `None` skips (for that item), nothing keeps the templated action, a dict is
merged over it: keys of the action's kind replace the templated ones (a null value keeps the
templated one, like OpenClaw), other keys are ignored. `kind` may switch between wake and agent;
then nothing templated carries over and the dict must supply the new kind's fields.

`verify` checks the provider's signature (`hookwise.engine.signatures`) on the raw body, first
thing in `evaluate` and only for the selected rule: nothing is extracted, rendered or transformed
for a request whose signature does not verify. A path's door (`RuleSet.door`: `hooks.verify.<path>`
or the first rule on the path with `verify`) is checked by the server before any rule is
selected when it is path-level or authenticates by signature; `evaluate` then skips that same
block. `Outcome.delivery_id` is the provider's delivery id (`dedupe`), for deduplication. Its secret (`secret`, or `secretFile` relative to the
folder of the file holding the rule) is resolved at compile time. `${NAME}` references in rule
files (`hooks.rules`) are resolved from the `env` given to `RuleSet.compile` (the engine reads no
environment itself), as the config loader does for `hooks.mappings`.

`respond` gives the caller a fixed answer: its status (2xx) and headers as written, string values
of its body rendered as templates. It is returned whenever the rule matched, skipped or not.

Errors (`hookwise.engine.errors.Refusal`, always naming the rule, never quoting the payload):
401 `invalid_signature` (missing, malformed or wrong signature, or a stale signed timestamp),
400 `missing_value` (a `| required` value is absent), 400 `template_error`, 500
`transform_failed` (raised, bad result, memory limit), 504 `transform_timeout`, 503
`transform_busy` (no JS context became free in time).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from functools import partial
from pathlib import Path
from typing import Any

import attrs

from ..actions import AGENT_FIELDS, INTERNAL_AGENT_FIELDS, NOTIFY_FIELDS, WAKE_FIELDS
from ..callbacks import refuse_url
from ..config.grants import Entry, with_approvals
from ..config.limits import RouteLimitsConfig, path_limits
from ..config.mapping import CallbackConfig, MappingConfig, RespondConfig, VerifyConfig
from ..config.sessions import SessionPolicy
from ..errors import ConfigError, ConfigIssue, Refusal
from ..request import InboundRequest
from ..signatures import SignatureError, Verifier
from ..signatures.door import Door, compile_doors
from ..transforms import (
    KEEP,
    Transform,
    TransformBusy,
    TransformContext,
    TransformError,
    TransformHost,
    TransformLimits,
    TransformTimedOut,
)
from .fanout import items_of, listed, with_list
from .files import gather
from .index import RuleIndex
from .render import (
    MissingValueError,
    RequestView,
    TemplateRenderError,
    TemplateVariables,
)
from .rule import ActionKind, CompiledRule, compile_rule
from .unmatched import Unmatched, path_unmatched, token_warnings, why_unmatched

__all__ = ["ActionKind", "ActionSpec", "CompiledRule", "Outcome", "RuleSet"]

_FIELDS: dict[str, tuple[str, ...]] = {
    "wake": WAKE_FIELDS,
    "agent": AGENT_FIELDS + INTERNAL_AGENT_FIELDS,
    "notify": NOTIFY_FIELDS,
}
# Action field -> (mapping key, whether it is optional: trimmed and dropped when empty).
_TEMPLATED: dict[str, dict[str, tuple[str, bool]]] = {
    "wake": {"text": ("textTemplate", False)},
    "notify": {"text": ("textTemplate", False), "to": ("to", True)},
    "agent": {
        "message": ("messageTemplate", False),
        "name": ("name", True),
        "sessionKey": ("sessionKey", True),
        "to": ("to", True),
        "model": ("model", True),
        "thinking": ("thinking", True),
    },
}


@attrs.frozen
class ActionSpec:
    """One normalized action, payload-shaped, NOT yet validated: `fields` are exactly keys of the
    direct `/wake` (`text`, `mode`) or `/agent` payload (camelCase)."""

    kind: ActionKind
    fields: dict[str, Any]


@attrs.frozen
class Outcome:
    """What a matched rule made of a request. `actions` is empty when skipped (answer 204)."""

    rule_id: str
    actions: tuple[ActionSpec, ...]
    skipped: bool
    respond: RespondConfig | None
    extracted: dict[str, Any]
    delivery_id: str | None = None  # the provider's id of this delivery (see `dedupe`)
    #: where the runs' outcomes are posted when they end (`callback`), already judged
    callback_url: str | None = None
    #: the rule's `coalesce.key` rendered for this request (None: the rule does not coalesce)
    coalesce_key: str | None = None
    #: who signed the request, when a `verify` block was checked here (`Verifier.sender`)
    sender: str | None = None


def _merge(kind: ActionKind, fields: dict[str, Any], override: dict[str, Any]) -> ActionSpec:
    new_kind = override.get("kind", kind)
    if new_kind not in _FIELDS:
        raise _BadResult("transform returned a kind other than 'wake', 'agent' or 'notify'")
    merged = dict(fields) if new_kind == kind else {}
    for key in _FIELDS[new_kind]:
        value = override.get(key)
        if value is not None:
            merged[key] = value
    return ActionSpec(new_kind, merged)


class _BadResult(Exception):
    pass


class RuleSet:
    """Compiled rules, in the order they are tried. Safe to share between concurrent requests."""

    def __init__(
        self,
        rules: Sequence[CompiledRule],
        host: TransformHost,
        doors: Mapping[str, Door] | None = None,
        warnings: Sequence[str] = (),
        limits: Mapping[str, RouteLimitsConfig] | None = None,
        unmatched: Mapping[str, Unmatched] | None = None,
    ) -> None:
        self._rules = tuple(rules)
        self._by_id = {r.id: r for r in self._rules}
        self._host = host
        self._doors = dict(doors or {})
        self._limits = dict(limits or {})
        self._unmatched = dict(unmatched or {})
        #: what loaded but deserves a word (an unknown `agentId` falls back to the default agent)
        self.warnings = tuple(warnings)
        # Selection: a lookup by path, then by discriminator (`hookwise.engine.rules.index`).
        self._wildcard = RuleIndex([r for r in self._rules if r.path is None])
        paths = {r.path for r in self._rules if r.path is not None}
        self._by_path = {
            p: RuleIndex([r for r in self._rules if r.path is None or r.path == p]) for p in paths
        }

    @property
    def rules(self) -> tuple[CompiledRule, ...]:
        return self._rules

    @classmethod
    def compile(
        cls,
        mappings: Sequence[MappingConfig],
        *,
        presets: Sequence[str] = (),
        rule_files: Sequence[str] = (),
        base_dir: Path | None = None,
        transforms_dir: Path | None = None,
        limits: TransformLimits = TransformLimits(),  # noqa: B008 (frozen value)
        env: Mapping[str, str] | None = None,
        verify: Mapping[str, VerifyConfig] | None = None,
        sessions: SessionPolicy | None = None,
        tool_servers: frozenset[str] | None = None,
    ) -> RuleSet:
        """Compile everything at once; raise `ConfigError` with every problem found (file, rule
        id, key path). `rule_files` (files or globs) and a relative `transforms_dir` are relative
        to `base_dir` (the config file's folder); `transforms_dir` defaults to
        `<base_dir>/hooks/transforms`, as in OpenClaw. `env` resolves `${NAME}` in rule files
        (none given: an empty environment; `hooks.mappings` arrive already resolved).
        `verify` holds the path-level blocks (`hooks.verify`). `sessions` checks each rule's
        `agentId`, `sessionKey` and `sessionMode` (default: the built-in policy); its warnings are
        kept in `warnings`."""
        base = (base_dir or Path.cwd()).resolve()
        issues: list[ConfigIssue] = []
        entries = gather(mappings, presets, rule_files, base, env, issues)

        if transforms_dir is None:
            tdir = base / "hooks" / "transforms" if base_dir is not None else None
        else:
            tdir = transforms_dir if transforms_dir.is_absolute() else base / transforms_dir
        host = TransformHost(tdir, limits)
        rules: list[CompiledRule] = []
        warnings: list[str] = []
        policy = sessions if sessions is not None else SessionPolicy()
        seen: dict[str, str] = {}
        try:
            for n, entry in enumerate(entries, 1):
                given = entry.config.id.strip() if entry.config.id else ""
                rule_id = given or f"mapping-{n}"
                if rule_id in seen:
                    issues.append(
                        ConfigIssue(
                            f"{entry.where}.id",
                            f"duplicate rule id (also used by {seen[rule_id]})",
                            file=entry.file,
                            rule_id=rule_id,
                        )
                    )
                    continue
                seen[rule_id] = f"{entry.file}: {entry.where}" if entry.file else entry.where
                try:
                    rule = compile_rule(
                        entry.config,
                        rule_id,
                        entry.where,
                        host,
                        entry.folder,
                        policy,
                        warnings,
                        tool_servers,
                    )
                    if entry.file:
                        rule = attrs.evolve(rule, origin=f"{entry.file}{entry.where}")
                    rules.append(rule)
                except ConfigError as exc:
                    issues.extend(
                        attrs.evolve(x, file=entry.file, rule_id=rule_id) for x in exc.issues
                    )
        except BaseException:
            host.close()
            raise
        host.loaded()
        doors, door_issues = compile_doors(
            verify or {}, ((r.id, r.path, r.verifier) for r in rules), base
        )
        issues.extend(door_issues)
        warnings.extend(token_warnings(doors))
        route_limits, limit_issues = path_limits((r.id, r.path, r.config.limits) for r in rules)
        issues.extend(limit_issues)
        unmatched, unmatched_issues = path_unmatched(
            (r.id, r.path, r.config.unmatched) for r in rules
        )
        issues.extend(unmatched_issues)
        if issues:
            host.close()
            raise ConfigError(issues)
        return cls(rules, host, doors, warnings, route_limits, unmatched)

    def tools_of(self, rule_id: str) -> tuple[Entry, ...]:
        """The tool grant of rule `rule_id` with its `approve` globs (none for a rule that is
        not, or no longer, there)."""
        rule = self._by_id.get(rule_id)
        return with_approvals(rule.config.tools, rule.config.approve) if rule is not None else ()

    def verifies(self, rule_id: str) -> bool:
        """Whether rule `rule_id` checks its provider's signature (`verify`): a request it
        accepted carried a valid one."""
        rule = self._by_id.get(rule_id)
        return rule is not None and rule.config.verify is not None

    def callback_of(self, rule_id: str) -> CallbackConfig | None:
        """The `callback` of rule `rule_id` (None for a rule that is not, or no longer, there)."""
        rule = self._by_id.get(rule_id)
        return rule.config.callback if rule is not None else None

    def door(self, path: str) -> Door | None:
        """The verify block guarding a mapped path, if any."""
        return self._doors.get(path.strip("/"))

    def limits(self, path: str) -> RouteLimitsConfig | None:
        """The rate and concurrency limits of a mapped path, if any (`hookwise.engine.config.limits`)."""
        return self._limits.get(path.strip("/"))

    def unmatched(self, path: str) -> Unmatched:
        """What `path` answers a request none of its rules matched: its rules' `unmatched`, else
        `acknowledge` when a signature block guards it, else `reject`."""
        key = path.strip("/")
        given = self._unmatched.get(key)
        if given is not None:
            return given
        return "acknowledge" if key in self._doors else "reject"

    def why_unmatched(self, request: InboundRequest) -> str:
        """Why no rule matched `request`: the rules of its path and the condition each failed."""
        return why_unmatched(self._rules, request)

    def select(self, request: InboundRequest) -> CompiledRule | None:
        """The first rule matching the request, or None (answer 404)."""
        return self._by_path.get(request.path.strip("/"), self._wildcard).select(request)

    def indexed_by(self) -> dict[str, list[tuple[str, str | None]]]:
        """For `rules check`: per path (`*` for any other path), each rule's id and the
        discriminator it is indexed by (None: tried on every request of that path)."""
        indexes = {**self._by_path, "*": self._wildcard}
        return {
            path: [
                (rule.id, d.describe() if d is not None else None)
                for rule, d in zip(index.rules, index.discriminators, strict=True)
            ]
            for path, index in sorted(indexes.items())
        }

    async def evaluate(
        self, rule: CompiledRule, request: InboundRequest, *, verified: Verifier | None = None
    ) -> Outcome:
        """Run a selected rule: verify, extract, render, transform. Raises `Refusal`.
        `verified` is a block the door already checked (not checked again)."""
        door = self._doors.get(request.path.strip("/"))
        sender = None  # who signed it, when checked here (the door's own check: the caller's)
        if door is not None and door.checks_every_request and door.verifier is not verified:
            sender = self._verify(rule, request, door.verifier, door.rule_id)
            verified = door.verifier
        if rule.verifier is not None and rule.verifier is not verified:
            sender = self._verify(rule, request, rule.verifier, rule.id)
        delivery_id = rule.dedupe.delivery_id(request, rule.verifier or verified)
        payload = request.payload
        extracted = {
            name: (expr.all(payload) if every else expr.first(payload))
            for name, expr, every in rule.extract
        }
        view = RequestView(request)
        variables = TemplateVariables(payload, extracted, view)
        slots: list[tuple[Any, int | None, Any]]
        if rule.for_each is None:
            slots = [(None, None, payload)]
        elif rule.for_each_list is None:
            items = items_of(rule, rule.for_each, payload)
            slots = [(item, i, payload) for i, item in enumerate(items)]
        else:
            items = listed(rule, payload)
            steps = rule.for_each_list
            slots = [(item, i, with_list(payload, steps, [item])) for i, item in enumerate(items)]
        actions = []
        for item, index, seen in slots:
            scope: Mapping[str, Any] = variables
            if index is not None:
                scope = TemplateVariables(seen, extracted, view, {"item": item, "index": index})
            action = self._render(rule, scope)
            if rule.transform is not None:
                ctx = TransformContext(
                    payload=seen,
                    headers=view.headers,
                    query=view.query,
                    path=request.path,
                    extracted=extracted,
                    now=view.now,
                    action={"kind": action.kind, **action.fields},
                    raw_body=request.raw_body,
                    item=item,
                    index=index,
                )
                transformed = await self._transform(rule, ctx, action)
                if transformed is None:
                    continue
                action = transformed
            actions.append(action)
        respond = None
        if rule.config.respond is not None:
            body = None
            render_body = rule.respond_body
            if render_body is not None:
                body = self._guard(rule, "respond.body", lambda: render_body(variables))
            respond = attrs.evolve(rule.config.respond, body=body)
        callback_url = _callback_url(rule, payload) if actions else None
        coalesce_key = None
        key_template = rule.templates.get("coalesce.key")
        if key_template is not None and actions:
            coalesce_key = self._guard(
                rule, "coalesce.key", partial(key_template.render, variables)
            )
        return Outcome(
            rule.id,
            tuple(actions),
            not actions,
            respond,
            extracted,
            delivery_id,
            callback_url,
            coalesce_key,
            sender,
        )

    def _render(self, rule: CompiledRule, scope: Mapping[str, Any]) -> ActionSpec:
        fields = dict(rule.static)
        for field, (key, optional) in _TEMPLATED[rule.kind].items():
            template = rule.templates.get(key)
            if template is None:
                continue
            text = self._guard(rule, key, partial(template.render, scope))
            if optional:
                text = text.strip()
                if not text:
                    continue
            fields[field] = text
        return ActionSpec(rule.kind, fields)

    @staticmethod
    def _verify(
        rule: CompiledRule, request: InboundRequest, verifier: Verifier, owner: str | None
    ) -> str:
        """Who signed it (`Verifier.verify`), or 401 `invalid_signature` naming the block's
        rule (or its `hooks.verify` path)."""
        try:
            return verifier.verify(request)
        except SignatureError as exc:
            where = f"rule {owner!r}" if owner else verifier.where
            raise Refusal("invalid_signature", f"{where}: {exc}", None, owner or rule.id) from None

    @staticmethod
    def _guard(rule: CompiledRule, key: str, render: Callable[[], Any]) -> Any:
        try:
            return render()
        except MissingValueError as exc:
            raise Refusal(
                "missing_value", f"rule {rule.id!r}: {key}: {exc.reason}", key, rule.id
            ) from None
        except TemplateRenderError as exc:
            raise Refusal(
                "template_error", f"rule {rule.id!r}: {key}: {exc.reason}", key, rule.id
            ) from None

    #: wraps each transform call (the server times them for its metrics); the engine reads no
    #: clock itself
    observe_transform: Callable[[Transform], AbstractContextManager[Any]] = staticmethod(
        lambda _transform: contextlib.nullcontext()
    )

    async def _transform(
        self, rule: CompiledRule, ctx: TransformContext, action: ActionSpec
    ) -> ActionSpec | None:
        assert rule.transform is not None
        try:
            with self.observe_transform(rule.transform):
                result = await rule.transform(ctx)
            if result is None:
                return None
            if result is KEEP:
                return action
            return _merge(action.kind, action.fields, result)
        except TransformTimedOut as exc:
            code = "transform_timeout"
            error: TransformError | _BadResult = exc
        except TransformBusy as exc:
            code, error = "transform_busy", exc
        except TransformError as exc:
            code, error = "transform_failed", exc
        except _BadResult as exc:
            code, error = "transform_failed", exc
        reason = error.reason if isinstance(error, TransformError) else str(error)
        raise Refusal(code, f"rule {rule.id!r}: {reason}", None, rule.id) from error

    def close(self) -> None:
        """Free the transforms' V8 contexts and worker threads."""
        self._host.close()


def _callback_url(rule: CompiledRule, payload: Any) -> str | None:
    """The rule's callback URL for this payload; a URL from the payload that may not be called
    back is a 400 `callback_url_refused` (before anything is stored)."""
    callback = rule.config.callback
    if callback is None:
        return None
    if rule.callback_from is None:
        return callback.url
    url = rule.callback_from.first(payload)
    problem = refuse_url(url, callback.allow, callback.allow_hosts)
    if problem is not None:
        raise Refusal("callback_url_refused", f"rule {rule.id!r}: {problem}", "callback", rule.id)
    assert isinstance(url, str)
    return url.strip()
