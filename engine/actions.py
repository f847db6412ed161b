"""The two normalized actions, wake and agent, and the validation that produces them.

A direct `/wake` or `/agent` payload and the fields a mapping rule renders go through the same
functions here, so a mapped hook is refused for exactly the reasons a direct call would be. Every
refusal is a `Refusal` with a stable code and the offending field.

Who runs an action and under which session key is the session policy's
(`hookwise.engine.config.sessions`): each action asks it once (a wake its agent, an agent turn
its `Seat`: agent and session key together), and the key source of a mapping's actions comes
with the caller (`CompiledRule.key_source`), so validating a payload enters the policy once.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

from .config.agents import DEFAULT_AGENT_ID, DEFAULT_MAIN_SESSION
from .config.channels import CHANNEL_IDS, LAST, canonical_channel, unknown_channel_hint
from .config.durations import Duration
from .config.sessions import MAX_TEXT_CHARS, KeySource, Seat, SessionPolicy
from .errors import Refusal

WakeMode = Literal["now", "next-heartbeat"]
WAKE_MODES: tuple[str, ...] = ("now", "next-heartbeat")
THINKING_LEVELS: tuple[str, ...] = ("off", "minimal", "low", "medium", "high")


@attrs.frozen
class WakeAction:
    """Enqueue a system event for an agent's main session (`session`); `mode` says when the
    heartbeat sees it."""

    text: str
    mode: WakeMode = "now"
    agent_id: str = DEFAULT_AGENT_ID
    session: str = DEFAULT_MAIN_SESSION


@attrs.frozen
class AgentAction:
    """Run an isolated turn of agent `agent_id` under `session_key` (already policed; None: a
    fresh `hook:<uuid>`), then summarise into that agent's main session."""

    message: str
    session_key: str | None
    agent_id: str = DEFAULT_AGENT_ID
    name: str = "Hook"
    wake_mode: WakeMode = "now"
    deliver: bool = True
    channel: str = LAST
    to: str | None = None
    model: str | None = None
    thinking: str | None = None
    timeout_seconds: float | None = None
    fallback_channel: str | None = None
    allow_unsafe_external_content: bool = False
    #: seconds the caller asks to wait for the run's outcome (None: answer at once); the
    #: server bounds it by `hooks.maxWait`
    wait: float | None = None


@attrs.frozen
class NotifyAction:
    """Deliver `text` as it is, with no run, no session and no model: to `channel` (and `to`, or
    the channel's `defaultTo`), and/or to the mapping's callback (`channel` None)."""

    text: str
    channel: str | None = None
    to: str | None = None


Action = WakeAction | AgentAction | NotifyAction


@attrs.frozen
class ValidationPolicy:
    """What validation needs to know beyond the payload itself.

    `resolve_model` maps a model reference to its canonical `provider/model` or raises a
    `Refusal`; `configured_channels` are the channels that can be delivered to (None: do
    not check); `check_recipient(channel, to)` returns a sentence when `to` is malformed.
    """

    resolve_model: Callable[[str], str] | None = None
    configured_channels: frozenset[str] | None = None
    check_recipient: Callable[[str, str], str | None] | None = None
    max_timeout_seconds: float = 3600
    #: agents and the session-key policy (see `hookwise.engine.config.sessions`)
    sessions: SessionPolicy = attrs.field(factory=SessionPolicy)


#: the fields of a wake payload, and of an agent payload (as a caller may send them)
WAKE_FIELDS = ("text", "mode", "agentId")
AGENT_FIELDS = (
    "message",
    "name",
    "agentId",
    "sessionKey",
    "wakeMode",
    "deliver",
    "channel",
    "to",
    "model",
    "fallbacks",
    "thinking",
    "timeoutSeconds",
    "fallbackChannel",
    "wait",
)
#: the fields of a notification (a mapping's `action: notify`)
NOTIFY_FIELDS = ("text", "channel", "to")
#: agent fields only a mapping may set
INTERNAL_AGENT_FIELDS = ("allowUnsafeExternalContent",)


def _bad(field: str, message: str, code: str = "invalid_field") -> Refusal:
    return Refusal(code, message, field=field)


def _unknown_keys(payload: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    for key in payload:
        if key not in allowed:
            hint = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
            tail = (
                f"; did you mean {hint[0]!r}?" if hint else f"; known fields: {', '.join(allowed)}"
            )
            raise _bad(str(key), f"unknown field {key!r}{tail}", "unknown_field")


def _text(payload: Mapping[str, Any], field: str, *, required: bool) -> str | None:
    value = payload.get(field)
    if value is None:
        if required:
            raise _bad(
                field, f"{field} is required and must be a non-empty string", "missing_field"
            )
        return None
    if not isinstance(value, str):
        raise _bad(field, f"{field} must be a string")
    value = value.strip()
    if not value:
        if required:
            raise _bad(field, f"{field} must be a non-empty string", "missing_field")
        raise _bad(field, f"{field} must not be blank")
    if len(value) > MAX_TEXT_CHARS:
        raise _bad(field, f"{field} is longer than {MAX_TEXT_CHARS} characters")
    return value


def _choice(payload: Mapping[str, Any], field: str, allowed: tuple[str, ...], default: str) -> str:
    value = payload.get(field)
    if value is None:
        return default
    if not isinstance(value, str) or value not in allowed:
        raise _bad(field, f"{field} must be one of {', '.join(allowed)}")
    return value


def validate_wake(
    payload: Mapping[str, Any],
    policy: ValidationPolicy | None = None,
    *,
    source: KeySource = "request",
) -> WakeAction:
    """A wake payload -> `WakeAction` for its agent's main session (`agentId`, default: the
    default agent), or a `Refusal` naming the field."""
    _unknown_keys(payload, WAKE_FIELDS)
    text = _text(payload, "text", required=True)
    mode = _choice(payload, "mode", WAKE_MODES, "now")
    sessions = (policy or _DEFAULT_POLICY).sessions
    agent = sessions.agent(payload.get("agentId"), source=source)
    return WakeAction(text=text, mode=mode, agent_id=agent.id, session=agent.main_session)  # type: ignore[arg-type]


def _channel(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise _bad(field, f"{field} must be a string")
    canonical = canonical_channel(value)
    if canonical is None:
        raise _bad(
            field,
            f"{field} must be {LAST} or one of {', '.join(CHANNEL_IDS)}"
            + (hint if (hint := unknown_channel_hint(value)).startswith(";") else ""),
            "unknown_channel",
        )
    return canonical


def validate_agent(
    payload: Mapping[str, Any],
    policy: ValidationPolicy,
    *,
    internal: bool = False,
    source: KeySource = "request",
) -> AgentAction:
    """An agent payload -> `AgentAction`, or a `Refusal` naming the field.

    `internal` admits the fields only a mapping may set (`allowUnsafeExternalContent`);
    `source` says where `sessionKey` came from, for the session policy.
    """
    _unknown_keys(payload, AGENT_FIELDS + INTERNAL_AGENT_FIELDS if internal else AGENT_FIELDS)
    # the agent and the session key, resolved and policed in one call to the session policy
    seat = policy.sessions.seat(payload.get("agentId"), payload.get("sessionKey"), source=source)
    agent = seat.agent
    message = _text(payload, "message", required=True)
    name = _text(payload, "name", required=False) or "Hook"
    if len(name) > 200:
        raise _bad("name", "name is longer than 200 characters")
    wake_mode = _choice(payload, "wakeMode", WAKE_MODES, "now")

    deliver = payload.get("deliver", True)
    if deliver is None:
        deliver = True
    if not isinstance(deliver, bool):
        raise _bad("deliver", "deliver must be true or false")

    raw_channel = payload.get("channel")
    channel = LAST if raw_channel is None else _channel(raw_channel, "channel")
    fallback = payload.get("fallbackChannel")
    fallback_channel = None if fallback is None else _channel(fallback, "fallbackChannel")
    if fallback_channel == LAST:
        raise _bad("fallbackChannel", "fallbackChannel must name a channel, not last")

    to = _text(payload, "to", required=False)
    if deliver and policy.configured_channels is not None:
        for field, ch in (("channel", channel), ("fallbackChannel", fallback_channel)):
            if ch not in (None, LAST) and ch not in policy.configured_channels:
                raise _bad(
                    field,
                    f"channel {ch} is not configured; add channels.{ch} to the configuration",
                    "channel_not_configured",
                )
    if to is not None and channel != LAST and policy.check_recipient is not None:
        problem = policy.check_recipient(channel, to)
        if problem:
            raise _bad("to", problem)

    model = _model_chain(payload, policy, seat)

    thinking = payload.get("thinking")
    if thinking is not None and (not isinstance(thinking, str) or thinking not in THINKING_LEVELS):
        raise _bad("thinking", f"thinking must be one of {', '.join(THINKING_LEVELS)}")

    timeout = payload.get("timeoutSeconds")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise _bad("timeoutSeconds", "timeoutSeconds must be a positive number of seconds")
        if timeout > policy.max_timeout_seconds:
            raise _bad(
                "timeoutSeconds",
                f"timeoutSeconds must be at most {policy.max_timeout_seconds:g}",
            )
        timeout = float(timeout)

    wait = _wait(payload.get("wait"))

    unsafe = payload.get("allowUnsafeExternalContent", False)
    if not isinstance(unsafe, bool):
        raise _bad("allowUnsafeExternalContent", "allowUnsafeExternalContent must be true or false")

    return AgentAction(
        message=message,  # type: ignore[arg-type]
        session_key=seat.session_key,
        agent_id=agent.id,
        name=name,
        wake_mode=wake_mode,  # type: ignore[arg-type]
        deliver=deliver,
        channel=channel,
        to=to,
        model=model,
        thinking=thinking,
        timeout_seconds=timeout,
        fallback_channel=fallback_channel,
        allow_unsafe_external_content=unsafe,
        wait=wait,
    )


def _model_chain(payload: Mapping[str, Any], policy: ValidationPolicy, seat: Seat) -> str | None:
    """The run's model chain (`model`, a list of models, and/or `fallbacks`), each model
    resolved and checked against the allowlist, as one string: the models in the order they are
    tried, separated by spaces (a model reference never contains whitespace). None: the agent's
    own chain."""
    model, fallbacks = payload.get("model"), payload.get("fallbacks")
    if model is None and fallbacks is None:
        return None
    if fallbacks is not None and not isinstance(fallbacks, list):
        raise _bad("fallbacks", "fallbacks must be a list of models such as provider/model")
    listed = model if isinstance(model, list) else [] if model is None else [model]
    for field, items in (("model", listed), ("fallbacks", fallbacks or [])):
        for item in items:
            if not isinstance(item, str) or not item.strip():
                raise _bad(field, f"{field} must name models such as provider/model")
    if policy.resolve_model is None:
        chain = [m.strip() for m in [*listed, *(fallbacks or [])]]
        return " ".join(dict.fromkeys(chain))
    # an agent with its own `model`/`models` has its own allowlist and aliases
    own = seat.agent.models != seat.default_models
    if not own and isinstance(model, str) and fallbacks is None:
        return policy.resolve_model(model)
    models = seat.agent.models if own else seat.default_models
    resolved = models.resolve_chain(model, fallbacks) or ()
    if model is None:  # only fallbacks: they follow the agent's own model
        resolved = tuple(dict.fromkeys((models.default_model, *resolved)))
    return " ".join(resolved)


def _wait(value: Any) -> float | None:
    """`wait`: seconds (a number) or a duration (`30s`, `2m`); 0 or absent is no wait."""
    if value is None:
        return None
    try:
        seconds = float(Duration.parse(value))
    except ValueError:
        raise _bad("wait", "wait must be a number of seconds or a duration such as 30s") from None
    return seconds or None


def validate_action(
    kind: str,
    fields: Mapping[str, Any],
    policy: ValidationPolicy,
    *,
    internal: bool = False,
    source: KeySource = "request",
) -> Action:
    """Validate payload-shaped fields for `kind` (`wake` or `agent`)."""
    if kind == "wake":
        return validate_wake(fields, policy, source=source)
    if kind == "agent":
        return validate_agent(fields, policy, internal=internal, source=source)
    if kind == "notify":
        return validate_notify(fields, policy)
    raise _bad("kind", "kind must be wake, agent or notify")


def validate_notify(fields: Mapping[str, Any], policy: ValidationPolicy) -> NotifyAction:
    """A notification's fields -> `NotifyAction`: its text, and a configured channel (not
    `last`: a notification is no conversation) with a valid recipient when one is named."""
    _unknown_keys(fields, NOTIFY_FIELDS)
    text = _text(fields, "text", required=True)
    raw = fields.get("channel")
    channel = None if raw is None else _channel(raw, "channel")
    if channel == LAST:
        raise _bad("channel", "a notification names its channel, not last")
    to = _text(fields, "to", required=False)
    if channel is not None:
        if policy.configured_channels is not None and channel not in policy.configured_channels:
            raise _bad(
                "channel",
                f"channel {channel} is not configured; add channels.{channel} to the configuration",
                "channel_not_configured",
            )
        if to is not None and policy.check_recipient is not None:
            problem = policy.check_recipient(channel, to)
            if problem:
                raise _bad("to", problem)
    return NotifyAction(text=text, channel=channel, to=to)  # type: ignore[arg-type]


_DEFAULT_POLICY = ValidationPolicy()
