"""One mapping, compiled: what `match` compares, the JSONPaths it extracts, its templates, its
transform, its `respond` body and its signature block, each checked once at load time.

`compile_rule` reports every problem of a mapping at once (`ConfigError`, key paths under the
mapping's `where`); `CompiledRule.matches` is the first-match test `hookwise.engine.rules.ruleset` and
`hookwise.engine.rules.index` apply per request. Evaluating a rule is `RuleSet.evaluate`'s.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import attrs

from ..config.grants import check_grant
from ..config.mapping import ExtractConfig, MappingConfig
from ..config.sessions import KeySource, SessionPolicy, mapping_source
from ..errors import ConfigError, ConfigIssue
from ..request import InboundRequest
from ..signatures import Verifier, compile_verifier
from ..signatures.door import Dedupe, compile_dedupe
from ..transforms import Transform, TransformHost, TransformLoadError
from .conditions import Condition, compile_when
from .extract import JsonPath, JsonPathError, compile_jsonpath
from .render import (
    RESERVED_NAMES,
    Template,
    TemplateCompileError,
    compile_template,
)

ActionKind = Literal["wake", "agent", "notify"]


def normalize_path(path: str | None) -> str | None:
    if path is None:
        return None
    trimmed = path.strip().strip("/")
    return trimmed or None


def _compile_body(value: Any, where: str, issues: list[ConfigIssue]) -> Callable[[Any], Any]:
    if isinstance(value, str):
        try:
            template = compile_template(value)
        except TemplateCompileError as exc:
            issues.append(ConfigIssue(where, str(exc)))
            return lambda v: None
        return template.render
    if isinstance(value, dict):
        parts = {k: _compile_body(v, f"{where}.{k}", issues) for k, v in value.items()}
        return lambda v: {k: part(v) for k, part in parts.items()}
    if isinstance(value, list):
        items = [_compile_body(v, f"{where}[{i}]", issues) for i, v in enumerate(value)]
        return lambda v: [item(v) for item in items]
    return lambda v: value


@attrs.frozen(eq=False)
class CompiledRule:
    """One mapping, compiled: matching, extraction, templates, transform, respond."""

    id: str
    origin: str
    config: MappingConfig
    path: str | None
    source: str | None
    when: Condition | None
    extract: tuple[tuple[str, JsonPath, bool], ...]
    for_each: JsonPath | None
    templates: dict[str, Template]
    static: dict[str, Any]
    transform: Transform | None
    respond_body: Callable[[Mapping[str, Any]], Any] | None
    verifier: Verifier | None = None
    #: where the fanned-out list sits, for a plain `forEach` path (`$.a.b`, `$.a.b[*]`)
    for_each_list: tuple[str | int, ...] | None = None
    dedupe: Dedupe = Dedupe()
    #: `callback.urlFrom`, compiled
    callback_from: JsonPath | None = None
    #: where the session key of its actions comes from (`sessionMode`), for the session policy
    key_source: KeySource = "mapping"

    @property
    def kind(self) -> ActionKind:
        return self.config.action

    def matches(self, request: InboundRequest) -> bool:
        """Path, source and conditions all hold."""
        if self.path is not None and self.path != request.path.strip("/"):
            return False
        if self.source is not None:
            source = request.payload.get("source") if isinstance(request.payload, dict) else None
            if not isinstance(source, str) or source.strip() != self.source:
                return False
        return self.when is None or self.when.holds(request)

    def why_not(self, request: InboundRequest) -> str | None:
        """None when the rule matches; otherwise which part of `match` failed (no payload data)."""
        if self.path is not None and self.path != request.path.strip("/"):
            return f"match.path is {self.path!r}, the request's path is {request.path.strip('/')!r}"
        if self.source is not None:
            source = request.payload.get("source") if isinstance(request.payload, dict) else None
            if not isinstance(source, str) or source.strip() != self.source:
                return f"match.source: the payload's source is not {self.source!r}"
        if self.when is not None:
            return self.when.why_not(request)
        return None


def compile_rule(
    config: MappingConfig,
    rule_id: str,
    where: str,
    host: TransformHost,
    base_dir: Path,
    sessions: SessionPolicy | None = None,
    warnings: list[str] | None = None,
    tool_servers: frozenset[str] | None = None,
) -> CompiledRule:
    issues: list[ConfigIssue] = []
    prefix = f"{where}." if where else ""
    more_issues, notes = check_grant(config.tools, prefix + "tools", tool_servers, config.approve)
    issues.extend(more_issues)
    if warnings is not None:
        warnings.extend(f"rule {rule_id!r}: {n}" for n in notes)
    if sessions is not None:
        more, notes = sessions.check_mapping(config, where)
        issues.extend(more)
        if warnings is not None:
            warnings.extend(f"rule {rule_id!r}: {n}" for n in notes)

    def fail(key: str, message: str) -> None:
        issues.append(ConfigIssue(prefix + key, message))

    source = config.match.source.strip() if config.match.source is not None else None
    when = None
    try:
        when = compile_when(config.match.when, prefix + "match.when")
    except ConfigError as exc:
        issues.extend(exc.issues)

    extract = []
    for name, given in config.extract.items():
        spec = ExtractConfig(path=given) if isinstance(given, str) else given
        if not name.isidentifier() or name.startswith("_"):
            fail(f"extract.{name}", "names must be identifiers not starting with '_'")
        elif name in RESERVED_NAMES:
            fail(
                f"extract.{name}",
                f"{name!r} is reserved (payload, headers, query, path, now, item, index)",
            )
        try:
            extract.append((name, compile_jsonpath(spec.path), spec.all))
        except JsonPathError as exc:
            fail(f"extract.{name}", str(exc))

    for_each = None
    for_each_list = None
    if config.for_each is not None:
        try:
            for_each = compile_jsonpath(config.for_each)
            for_each_list = for_each.steps
            head = config.for_each.strip()
            if for_each_list is None and head.endswith("[*]"):
                for_each_list = compile_jsonpath(head[:-3]).steps
            for_each_list = for_each_list or None  # `$` itself: the payload stays whole
        except JsonPathError as exc:
            fail("forEach", str(exc))
    if config.for_each_max < 1:
        fail("forEachMax", "must be at least 1")
    callback_from = _compile_callback(config, fail)

    templates: dict[str, Template] = {}
    sources = {
        "textTemplate": config.text_template,
        "messageTemplate": config.message_template,
        "name": config.name,
        "sessionKey": config.session_key,
        "to": config.to,
        "model": config.model,
        "thinking": config.thinking,
        "coalesce.key": config.coalesce.key if config.coalesce is not None else None,
    }
    for key, text in sources.items():
        if text is None:
            continue
        try:
            templates[key] = compile_template(text)
        except TemplateCompileError as exc:
            fail(key, str(exc))

    if config.coalesce is not None and warnings is not None:
        if config.action != "agent":
            warnings.append(
                f"rule {rule_id!r}: {prefix}coalesce: a wake mapping's events are not coalesced"
                " (only an agent mapping's runs are)"
            )
        if config.for_each is not None:
            warnings.append(
                f"rule {rule_id!r}: {prefix}coalesce: a forEach batch of several items is not"
                " coalesced (only a request that makes one run is)"
            )
    needed = "messageTemplate" if config.action == "agent" else "textTemplate"
    if sources[needed] is None and config.transform is None and warnings is not None:
        # the peer loads it and refuses each request it matches: so do we (400 missing_field)
        field = "message" if config.action == "agent" else "text"
        article = "an" if config.action == "agent" else "a"
        warnings.append(
            f"rule {rule_id!r}: {prefix}{needed}: {article} {config.action} mapping without {needed}"
            f" (or a transform that sets {field}) refuses every request it matches"
            f" (400 missing_field: {field})"
        )

    static: dict[str, Any]
    if config.action == "notify":
        static = {"channel": config.channel} if config.channel is not None else {}
        if config.channel is None and config.callback is None:
            fail("channel", "a notify mapping delivers to a channel, a callback, or both")
    elif config.action == "wake":
        static = {"mode": config.wake_mode}
    else:
        static = {"wakeMode": config.wake_mode, "channel": config.channel or "last"}
        if config.deliver is not None:
            static["deliver"] = config.deliver
        if config.timeout_seconds is not None:
            static["timeoutSeconds"] = config.timeout_seconds
        if config.allow_unsafe_external_content:
            static["allowUnsafeExternalContent"] = True
        if config.fallback_channel is not None:
            static["fallbackChannel"] = config.fallback_channel
        if config.fallbacks:
            static["fallbacks"] = list(config.fallbacks)
    if config.agent_id is not None and config.action != "notify":
        static["agentId"] = config.agent_id

    respond_body = None
    if config.respond is not None:
        if not 200 <= config.respond.status <= 299:
            fail("respond.status", "must be a success status (200-299)")
        if config.respond.wait is not None and config.respond.body is not None:
            fail(
                "respond.wait", "a waited answer is the run's outcome: give wait or body, not both"
            )
        if config.respond.wait is not None and config.action != "agent":
            fail("respond.wait", "only an agent mapping has a run to wait for")
        respond_body = _compile_body(config.respond.body, prefix + "respond.body", issues)

    verifier = None
    if config.verify is not None:
        try:
            verifier = compile_verifier(config.verify, base_dir, prefix + "verify")
        except ConfigError as exc:
            issues.extend(exc.issues)
        if config.verify.auth == "signature" and normalize_path(config.match.path) is None:
            fail("verify.auth", "auth: signature needs match.path (or a hooks.verify block)")
    dedupe = Dedupe()
    try:
        dedupe = compile_dedupe(config, prefix)
    except ConfigError as exc:
        issues.extend(exc.issues)

    transform = None
    if config.transform is not None:
        try:
            transform = host.load(config.transform)
        except TransformLoadError as exc:
            fail("transform.module", str(exc))

    if issues:
        raise ConfigError(issues)
    return CompiledRule(
        id=rule_id,
        origin=where,
        config=config,
        path=normalize_path(config.match.path),
        source=source or None,
        when=when,
        extract=tuple(extract),
        for_each=for_each,
        templates=templates,
        static=static,
        transform=transform,
        respond_body=respond_body,
        verifier=verifier,
        for_each_list=for_each_list,
        dedupe=dedupe,
        callback_from=callback_from,
        key_source=mapping_source(config),
    )


def _compile_callback(config: MappingConfig, fail: Callable[[str, str], None]) -> JsonPath | None:
    """Check `callback` (see `hookwise.engine.callbacks`); its compiled `urlFrom`, if any."""
    callback = config.callback
    if callback is None:
        return None
    if config.action == "wake":
        fail("callback", "a wake mapping has nothing to call back: use agent or notify")
    if (callback.url is None) == (callback.url_from is None):
        fail("callback", "give exactly one of url and urlFrom")
    if callback.url is not None and urlsplit(callback.url).scheme not in ("http", "https"):
        fail("callback.url", "must be an absolute http:// or https:// URL")
    for i, prefix in enumerate(callback.allow):
        parts = urlsplit(prefix)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            fail(f"callback.allow[{i}]", "must be an absolute http:// or https:// URL prefix")
    if not callback.secret.startswith("whsec_") or not _base64(callback.secret[6:]):
        fail("callback.secret", "must be whsec_ followed by base64 (a Standard Webhooks secret)")
    if callback.url_from is None:
        return None
    if not callback.allow:
        fail("callback.allow", "a URL from the payload needs the prefixes it may start with")
    try:
        return compile_jsonpath(callback.url_from)
    except JsonPathError as exc:
        fail("callback.urlFrom", str(exc))
        return None


def _base64(text: str) -> bool:
    try:
        return bool(base64.b64decode(text, validate=True))
    except ValueError:
        return False
