"""The shape of one mapping rule as written in configuration or a rule file (data, not compiled).

Field names follow OpenClaw's mappings so that an OpenClaw mapping loads unchanged, plus hookwise's
own `match.when`, `extract`, `respond`, `forEach` and `verify`. Compilation (templates, JSONPaths,
conditions, transforms, signature verifiers) happens in `hookwise.engine.rules`.

Structuring follows `hookwise.engine.convert`: snake_case attrs fields, camelCase keys, strict types,
unknown keys refused. One shorthand: an `extract` entry may be a bare JSONPath string
(`subject: $.messages[0].subject`) or a mapping (`{path: $.labels[*].name, all: true}`).
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from hookwise.engine.convert import converter
from hookwise.engine.durations import Duration


@attrs.frozen
class MatchConfig:
    """Which requests a rule applies to: sub-path, payload `source`, and extra conditions."""

    path: str | None = None
    source: str | None = None
    # Conditions tree (all/any/not, jsonpath/header/query with equals/in/regex/exists); compiled
    # and validated by engine.conditions, which reports errors with their key path.
    when: Any = None


@attrs.frozen
class TransformConfig:
    """A transform module inside `hooks.transformsDir` and the export to call."""

    module: str
    export: str | None = None
    timeout_ms: int | None = None
    memory_mb: int | None = None


@attrs.frozen
class RespondConfig:
    """A fixed answer for the caller, for providers that expect a particular response.

    String values inside `body` are templates, rendered with the request's variables.
    """

    status: int = 200
    body: Any = None
    headers: dict[str, str] = attrs.field(factory=dict)


@attrs.frozen
class ExtractConfig:
    """One named value pulled from the payload: the first match, or every match with `all`."""

    path: str
    all: bool = False


@attrs.frozen
class VerifyConfig:
    """Signature verification of the raw body before anything else runs (see engine.signatures).

    `secret` (or `secretFile`, relative to the folder of the file holding the rule) is resolved at
    load. `header`, `prefix` (default "") and `encoding` (default hex) are for `hmac-sha256` only;
    `tolerance` (default 5m) for the timestamped schemes, `stripe` and `standard-webhooks`.
    """

    scheme: Literal["github", "stripe", "standard-webhooks", "hmac-sha256"]
    secret: str | None = attrs.field(default=None, repr=False)  # never in a repr or log line
    secret_file: str | None = None
    header: str | None = None
    prefix: str | None = None
    encoding: Literal["hex", "base64"] | None = None
    tolerance: Duration | None = None


@attrs.frozen
class MappingConfig:
    """One mapping rule: match, action, templates, optional transform, delivery options."""

    id: str | None = None
    match: MatchConfig = attrs.field(factory=MatchConfig)
    action: Literal["wake", "agent"] = "agent"
    wake_mode: Literal["now", "next-heartbeat"] = "now"
    name: str | None = None
    # the agent that runs it (unknown: the default agent, with a warning at load)
    agent_id: str | None = None
    session_key: str | None = None
    # `persistent`: the static `sessionKey` every time; `per-request`: a fresh key each request
    session_mode: Literal["persistent", "per-request"] | None = None
    message_template: str | None = None
    text_template: str | None = None
    deliver: bool | None = None
    channel: str | None = None
    to: str | None = None
    fallback_channel: str | None = None
    model: str | None = None
    thinking: str | None = None
    timeout_seconds: float | None = None
    transform: TransformConfig | None = None
    allow_unsafe_external_content: bool = False
    extract: dict[str, str | ExtractConfig] = attrs.field(factory=dict)
    respond: RespondConfig | None = None
    # Fan-out: a JSONPath selecting a list; one action is produced per item (capped).
    for_each: str | None = None
    for_each_max: int = 20
    # HMAC signature of the raw body, checked before templates and transforms.
    verify: VerifyConfig | None = None


_structure_extract_mapping = converter.get_structure_hook(ExtractConfig)


def _structure_extract(value: object, _: object) -> str | ExtractConfig:
    if isinstance(value, str):
        return value
    if not isinstance(value, dict):
        raise ValueError("must be a JSONPath string or a mapping with `path` (and `all`)")
    return _structure_extract_mapping(value, ExtractConfig)


converter.register_structure_hook_func(lambda tp: tp == (str | ExtractConfig), _structure_extract)
