"""The session-key policy: which agent runs a hook, and under which session key. One place.

A hook's agent turn runs in the session its key names; earlier turns of that session are its
history. The key is therefore the only isolation between hook content and an agent's own
context, and every key a hook can cause is resolved and policed here, before anything is stored:

- Main sessions are never addressable by a hook: `main` and `agent:<id>:main` (any id, any case)
  are `400 session_key_reserved`, whether the key came from the request, a mapping (rendered or
  static), a transform or `hooks.defaultSessionKey` (the last two are also refused at load).
- `hooks.allowRequestSessionKey` (default true: the spec makes `sessionKey` a request field):
  when false, a request's `sessionKey` is refused, and a mapping whose key is a template (it
  depends on the payload) does not load.
- `hooks.allowedSessionKeyPrefixes`: every effective key (request, mapping, default, generated)
  must start with one of them (compared case-insensitively; for an agent-scoped key, its part
  after `agent:<id>:`). At load, `defaultSessionKey` must match them, and they must allow the
  generated `hook:<uuid>` keys unless a `defaultSessionKey` stands in for them.
- `hooks.defaultSessionKey`: the key when neither the request nor the mapping gives one
  (otherwise a fresh `hook:<uuid>`). A mapping's `sessionMode: per-request` always gets a fresh
  key; `persistent` needs a static `sessionKey`.
- Agents: an explicit `agentId` (request, mapping, transform) picks the agent; a request's
  unknown id is `400 unknown_agent`, a mapping's falls back to the default agent (warned at
  load). `hooks.allowedAgentIds` is checked against the *effective* agent of every wake and
  agent action (no `agentId`: the default agent), live or replayed, so it fails closed: with
  `[hooks]` a request that leaves `agentId` out is refused (`400 agent_not_allowed` naming the
  key) unless the default agent is listed; `*` allows any; `[]` refuses every request.
- Agent-scoped keys `agent:<id>:<rest>` scoped to another agent are rebound to the target agent
  (`agent:main:x` for agent `hooks` runs as `agent:hooks:x`); an unscoped key for an agent other
  than the default is stored scoped (`agent:<id>:<key>`), so agents never share a transcript.

The validation of an action (`hookwise.engine.actions`) asks the policy once per action: the
agent of a wake (`SessionPolicy.agent`), or the agent and the session key of an agent turn
together (`SessionPolicy.seat`, a `Seat`); a mapping's key source is fixed when its rule is
compiled (`mapping_source`). Pure: the fresh key comes from the `new_key` given by the server.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal, NamedTuple

import attrs

from ..errors import ConfigError, ConfigIssue, Refusal
from .agents import Agent, Roster
from .mapping import MappingConfig
from .model_policy import ModelPolicy
from .models import Config

#: where a session key came from: a request's payload, a mapping (or its transform), or a
#: mapping whose `sessionMode` is `per-request`
KeySource = Literal["request", "mapping", "per-request"]
GENERATED_PREFIX = "hook:"
_SCOPE = "agent:"
#: the longest text field of an action, and the longest session key a hook may name
MAX_TEXT_CHARS = 100_000
MAX_SESSION_KEY_CHARS = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Seat(NamedTuple):
    """Where an agent turn runs, as the policy resolved it in one call (`SessionPolicy.seat`):
    the agent, the policed session key (None: the caller makes a fresh `hook:<uuid>`), and the
    default agent's models (an agent whose models differ has its own allowlist and aliases)."""

    agent: Agent
    session_key: str | None
    default_models: ModelPolicy


def mapping_source(m: MappingConfig) -> KeySource:
    """Where the session key of a mapping's actions comes from, for `SessionPolicy`."""
    return "per-request" if m.session_mode == "per-request" else "mapping"


def is_template(text: str) -> bool:
    """Whether a mapping value depends on the request (holds template markup)."""
    return "{{" in text or "{%" in text


def split_scoped(key: str) -> tuple[str, str] | None:
    """`agent:<id>:<rest>` -> (id, rest), lower-cased id; None for a key that is not scoped."""
    if key[: len(_SCOPE)].lower() != _SCOPE:
        return None
    agent_id, sep, rest = key[len(_SCOPE) :].partition(":")
    if not sep:
        return None
    return agent_id.strip().lower(), rest


def is_reserved(key: str) -> bool:
    """Whether `key` names a main session: `main`, or `agent:<any id>:main` (any case)."""
    if key.strip().lower() == "main":
        return True
    scoped = split_scoped(key.strip())
    return scoped is not None and scoped[1].strip().lower() == "main"


def _reserved(key: str) -> Refusal:
    return Refusal(
        "session_key_reserved",
        f"sessionKey {_show(key)} names an agent's main session, which hooks cannot address",
        field="sessionKey",
    )


def _show(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:79] + "…")


@attrs.frozen
class SessionPolicy:
    """The resolved policy of `hooks.*` session and agent keys, over the agents of a roster."""

    roster: Roster = attrs.field(factory=Roster.single)
    allow_request_key: bool = True
    #: lower-cased; empty: any key
    prefixes: tuple[str, ...] = ()
    default_key: str | None = None
    #: lower-cased; None: any explicit agentId; empty: none
    allowed_agents: frozenset[str] | None = None
    new_key: Callable[[], str] | None = attrs.field(default=None, eq=False)

    @classmethod
    def from_config(
        cls,
        config: Config,
        *,
        roster: Roster | None = None,
        new_key: Callable[[], str] | None = None,
    ) -> SessionPolicy:
        hooks = config.hooks
        allowed = None
        if hooks.allowed_agent_ids is not None:
            ids = {a.strip().lower() for a in hooks.allowed_agent_ids if a.strip()}
            allowed = None if "*" in ids else frozenset(ids)
        return cls(
            roster=roster or Roster.from_config(config),
            allow_request_key=hooks.allow_request_session_key,
            prefixes=_prefixes(hooks.allowed_session_key_prefixes),
            default_key=(hooks.default_session_key or "").strip() or None,
            allowed_agents=allowed,
            new_key=new_key,
        )

    def allows_prefix(self, key: str) -> bool:
        """Whether `key` (or, scoped, its part after `agent:<id>:`) starts with an allowed
        prefix; always true without `hooks.allowedSessionKeyPrefixes`."""
        if not self.prefixes:
            return True
        scoped = split_scoped(key)
        candidates = (key.lower(),) if scoped is None else (key.lower(), scoped[1].lower())
        return any(c.startswith(p) for c in candidates for p in self.prefixes)

    def seat(self, agent_id: object, session_key: object, *, source: KeySource) -> Seat:
        """The agent an `agentId` names and the session key its turn runs under (`sessionKey` as
        given: None when absent), both policed; raises a `Refusal` naming the field."""
        agent = self.agent(agent_id, source=source)
        key = self.session_key(agent, _key_text(session_key), source=source)
        return Seat(agent, key, self.roster.default.models)

    def agent(self, requested: object, *, source: KeySource) -> Agent:
        """The agent an `agentId` (None: not given) names; raises a `Refusal`."""
        if requested is None:
            return self._allowed(self.roster.default, explicit=False)
        if not isinstance(requested, str) or not requested.strip():
            raise Refusal("invalid_field", "agentId must be a non-blank string", field="agentId")
        agent = self.roster.get(requested)
        if agent is None:
            if source == "request":
                raise Refusal(
                    "unknown_agent",
                    f"unknown agentId {_show(requested.strip())}; known agents: "
                    f"{', '.join(self.roster.ids)}",
                    field="agentId",
                )
            agent = self.roster.default  # as the peer does for a mapping's unknown agent
        return self._allowed(agent, explicit=True)

    def _allowed(self, agent: Agent, *, explicit: bool) -> Agent:
        """`agent`, when `hooks.allowedAgentIds` lets hooks reach it (fails closed: the list is
        checked against the effective agent, the default one when no `agentId` was given)."""
        if self.allowed_agents is None or agent.id in self.allowed_agents:
            return agent
        allowed = ", ".join(sorted(self.allowed_agents)) or "none"
        which = (
            f"agentId {agent.id!r}" if explicit else f"the default agent {agent.id!r} (no agentId)"
        )
        raise Refusal(
            "agent_not_allowed",
            f"{which} is not allowed by hooks.allowedAgentIds (allowed: {allowed})",
            field="agentId",
        )

    def session_key(self, agent: Agent, requested: str | None, *, source: KeySource) -> str | None:
        """The key `agent`'s turn runs under; raises a `Refusal`. None only when a
        fresh key is needed and no `new_key` was given (the caller then makes `hook:<uuid>`)."""
        key: str | None = None
        if source != "per-request" and requested is not None:
            if is_reserved(requested):
                raise _reserved(requested)
            if source == "request" and not self.allow_request_key:
                raise Refusal(
                    "session_key_not_allowed",
                    "sessionKey is not accepted in hook requests (hooks.allowRequestSessionKey is"
                    " false)",
                    field="sessionKey",
                )
            key = requested
        elif source != "per-request":
            key = self.default_key
        if key is None:
            if self.new_key is None:
                return None
            key = self.new_key()
        key = self._bind(agent, key)
        if is_reserved(key):
            raise _reserved(key)
        if not self.allows_prefix(key):
            raise Refusal(
                "session_key_not_allowed",
                f"sessionKey {_show(key)} does not start with one of hooks.allowedSessionKeyPrefixes"
                f" ({', '.join(self.prefixes)})",
                field="sessionKey",
            )
        return key

    def _bind(self, agent: Agent, key: str) -> str:
        scoped = split_scoped(key)
        if scoped is not None:
            return key if scoped[0] == agent.id else f"{_SCOPE}{agent.id}:{scoped[1]}"
        return key if agent.default else f"{_SCOPE}{agent.id}:{key}"

    # -- load-time checks ----------------------------------------------------------------------

    def check_mapping(self, m: MappingConfig, where: str) -> tuple[list[ConfigIssue], list[str]]:
        """Problems (and warnings) of one mapping's `agentId`, `sessionKey` and `sessionMode`."""
        prefix = f"{where}." if where else ""
        issues: list[ConfigIssue] = []
        warnings: list[str] = []
        agent = self.roster.get(m.agent_id) if m.agent_id is not None else None
        if m.agent_id is not None and agent is None:
            warnings.append(
                f"{prefix}agentId: unknown agent {m.agent_id!r}; its hooks run as the default"
                f" agent {self.roster.default.id!r}"
            )
        agent = agent or self.roster.default
        if self.allowed_agents is not None and agent.id not in self.allowed_agents:
            warnings.append(
                f"{prefix}agentId: {agent.id!r} is not in hooks.allowedAgentIds; its hooks"
                " will be refused (400 agent_not_allowed) unless a transform picks another agent"
            )
        if m.action != "agent":
            return issues, warnings
        key = m.session_key
        templated = key is not None and is_template(key)
        if m.session_mode == "per-request":
            if key is not None:
                issues.append(
                    ConfigIssue(
                        f"{prefix}sessionMode",
                        "per-request gives every request a fresh key; drop sessionKey or use"
                        " sessionMode: persistent",
                    )
                )
            elif not self.allows_prefix(GENERATED_PREFIX):
                issues.append(
                    ConfigIssue(
                        f"{prefix}sessionMode",
                        f"per-request keys are {GENERATED_PREFIX}<uuid>, which"
                        " hooks.allowedSessionKeyPrefixes does not allow",
                    )
                )
        elif m.session_mode == "persistent" and (key is None or templated):
            issues.append(
                ConfigIssue(f"{prefix}sessionKey", "sessionMode: persistent needs a static key")
            )
        if key is None:
            return issues, warnings
        if templated:
            if not self.allow_request_key:
                issues.append(
                    ConfigIssue(
                        f"{prefix}sessionKey",
                        "a templated key depends on the payload, so it needs"
                        " hooks.allowRequestSessionKey: true (or use a static key)",
                    )
                )
        elif is_reserved(key):
            # the peer loads it and refuses each request: so do we, with the same code
            warnings.append(
                f"{prefix}sessionKey: {key!r} names a main session, never a hook's; every"
                " request it matches is refused (400 session_key_reserved)"
            )
        elif not self.allows_prefix(key):
            warnings.append(
                f"{prefix}sessionKey: does not start with one of"
                " hooks.allowedSessionKeyPrefixes; every request it matches is refused"
                " (400 session_key_not_allowed)"
            )
        return issues, warnings


def _key_text(value: object) -> str | None:
    """A `sessionKey` as given -> the stripped key (None: absent), or a `Refusal`: a string, not
    blank, at most `MAX_SESSION_KEY_CHARS` printable characters."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise Refusal("invalid_field", "sessionKey must be a string", field="sessionKey")
    key = value.strip()
    if not key:
        raise Refusal("invalid_field", "sessionKey must not be blank", field="sessionKey")
    if len(key) > MAX_TEXT_CHARS:
        raise Refusal(
            "invalid_field",
            f"sessionKey is longer than {MAX_TEXT_CHARS} characters",
            field="sessionKey",
        )
    if len(key) > MAX_SESSION_KEY_CHARS or _CONTROL.search(key):
        raise Refusal(
            "invalid_field",
            f"sessionKey must be at most {MAX_SESSION_KEY_CHARS} printable characters",
            field="sessionKey",
        )
    return key


def _prefixes(raw: tuple[str, ...] | None) -> tuple[str, ...]:
    return tuple(dict.fromkeys(p.strip().lower() for p in raw or () if p.strip()))


def check_session_config(config: Config) -> tuple[list[ConfigIssue], list[str]]:
    """The load-time rules of the agents and of `hooks.*` session keys: (issues, warnings).
    Mappings, wherever they are written, are checked where they are compiled
    (`SessionPolicy.check_mapping`, from `RuleSet.compile`)."""
    hooks = config.hooks
    issues: list[ConfigIssue] = []
    warnings: list[str] = []
    try:
        policy = SessionPolicy.from_config(config)
    except ConfigError as e:
        issues.extend(e.issues)  # the agents; the keys are still checked, against `main` alone
        try:
            policy = SessionPolicy.from_config(config, roster=Roster.single())
        except ConfigError:
            return issues, warnings
    if hooks.allowed_session_key_prefixes is not None and not policy.prefixes:
        issues.append(
            ConfigIssue(
                "hooks.allowedSessionKeyPrefixes", "must list at least one non-blank prefix"
            )
        )
    default = policy.default_key
    if default is not None:
        if is_reserved(default):
            issues.append(
                ConfigIssue(
                    "hooks.defaultSessionKey", f"{default!r} names a main session, never a hook's"
                )
            )
        elif is_template(default):
            issues.append(ConfigIssue("hooks.defaultSessionKey", "must be a static key"))
        elif not policy.allows_prefix(default):
            issues.append(
                ConfigIssue(
                    "hooks.defaultSessionKey",
                    "does not start with one of hooks.allowedSessionKeyPrefixes",
                )
            )
    elif not policy.allows_prefix(GENERATED_PREFIX):
        issues.append(
            ConfigIssue(
                "hooks.allowedSessionKeyPrefixes",
                f"must allow the generated {GENERATED_PREFIX}<uuid> keys (add"
                f" {GENERATED_PREFIX!r}) unless hooks.defaultSessionKey is set",
            )
        )
    for agent_id in hooks.allowed_agent_ids or ():
        value = agent_id.strip().lower()
        if value != "*" and policy.roster.get(value) is None:
            warnings.append(
                f"hooks.allowedAgentIds: {agent_id!r} is not an agent of agents.list (known:"
                f" {', '.join(policy.roster.ids)})"
            )
    return issues, warnings
