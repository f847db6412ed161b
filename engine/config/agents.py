"""Agents: who runs a hook's turn, and where each agent's own state lives.

An agent has an id, its main session (`agent:<id>:main`; the default agent's is `main`, as it
was before there were several agents), a model and its allowlist, a system prompt, a heartbeat,
a run timeout and a run lane (`maxConcurrentRuns`). `agents.list` declares them; each entry's
values left out come from `agents.defaults`. Without `agents.list` there is one agent, `main`.
The default agent is the entry marked `default: true`, else the first one.

`Roster` is the one place that knows them; code that needs "the main session" asks the agent
(`roster.default.main_session`, `roster.get(id).main_session`) instead of a constant. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import attrs

from ..errors import ConfigError, ConfigIssue
from ..names import DEFAULT_AGENT_ID, DEFAULT_MAIN_SESSION
from .budgets import BudgetConfig
from .grants import Entry, with_approvals
from .model_policy import ModelPolicy
from .models import AgentDefaults, Config, HeartbeatConfig

AGENT_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def scoped_main_session(agent_id: str) -> str:
    """`agent:<id>:main`: the agent-scoped name of an agent's main session."""
    return f"agent:{agent_id}:main"


@attrs.frozen
class Agent:
    """One agent, with `agents.defaults` already applied."""

    id: str
    default: bool
    name: str | None
    main_session: str
    models: ModelPolicy
    system_prompt: str | None
    heartbeat: HeartbeatConfig
    timeout_seconds: float
    max_concurrent_runs: int
    #: the tools of its `/agent` runs and heartbeats (`server.tool`, `server.*`)
    tools: tuple[Entry, ...] = ()
    #: what its runs may spend per window (`hookwise.engine.config.budgets`); None: no ceiling
    budget: BudgetConfig | None = None

    @property
    def default_model(self) -> str:
        return self.models.default_model

    @property
    def default_chain(self) -> tuple[str, ...]:
        """Its model and the fallbacks tried in turn after it."""
        return self.models.default_chain


def normalize_agent_id(value: str) -> str:
    """Agent ids compare case-insensitively, surrounding blanks ignored (as the peer does)."""
    return value.strip().lower()


class Roster:
    """The configured agents, by id, and the default one."""

    def __init__(self, agents: tuple[Agent, ...]) -> None:
        self.agents = agents
        self.by_id = {a.id: a for a in agents}
        self.default = next(a for a in agents if a.default)
        self.by_main_session = {a.main_session: a for a in agents}

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(a.id for a in self.agents)

    def get(self, agent_id: str | None) -> Agent | None:
        """The agent `agent_id` names (None: the default agent); None when there is none."""
        if agent_id is None:
            return self.default
        return self.by_id.get(normalize_agent_id(agent_id))

    def main_sessions(self) -> tuple[str, ...]:
        """Every agent's main session key."""
        return tuple(a.main_session for a in self.agents)

    @classmethod
    def single(
        cls, defaults: AgentDefaults | None = None, providers: Iterable[str] | None = None
    ) -> Roster:
        """One agent, `main`, with `agents.defaults` (or the built-in defaults)."""
        defaults = defaults or AgentDefaults()
        models = ModelPolicy.from_config(defaults, providers)
        return cls((_agent(DEFAULT_AGENT_ID, True, None, defaults, models),))

    @classmethod
    def from_config(cls, config: Config, providers: Iterable[str] | None = None) -> Roster:
        """The agents of `agents.list` (or the single `main`); `ConfigError` naming the key.
        With `providers` (the configured ids), each agent's models are checked against them."""
        defaults = config.agents.defaults
        entries = config.agents.list
        if not entries:
            return cls.single(defaults, providers)
        issues: list[ConfigIssue] = []
        explicit = [i for i, e in enumerate(entries) if e.default]
        for i in explicit[1:]:
            issues.append(
                ConfigIssue(
                    f"agents.list[{i}].default",
                    f"only one agent may be the default (agents.list[{explicit[0]}] is)",
                )
            )
        default_index = explicit[0] if explicit else 0
        agents: list[Agent] = []
        seen: dict[str, int] = {}
        for i, entry in enumerate(entries):
            where = f"agents.list[{i}]"
            agent_id = normalize_agent_id(entry.id)
            if not AGENT_ID.fullmatch(agent_id):
                issues.append(
                    ConfigIssue(
                        f"{where}.id",
                        "must be 1 to 64 letters, digits, '-' or '_', starting with a letter or"
                        " digit",
                    )
                )
                continue
            if agent_id in seen:
                issues.append(
                    ConfigIssue(f"{where}.id", f"duplicates agents.list[{seen[agent_id]}].id")
                )
                continue
            seen[agent_id] = i
            merged = attrs.evolve(
                defaults,
                model=entry.model if entry.model is not None else defaults.model,
                models=entry.models if entry.models is not None else defaults.models,
                # an agent with a model of its own does not inherit the defaults' fallbacks
                fallbacks=entry.fallbacks
                if entry.fallbacks is not None
                else (defaults.fallbacks if entry.model is None else ()),
            )
            try:
                models = ModelPolicy.from_config(merged, providers)
            except ConfigError as e:
                issues.extend(
                    attrs.evolve(x, path=x.path.replace("agents.defaults", where, 1))
                    if entry.model is not None
                    or entry.models is not None
                    or entry.fallbacks is not None
                    else x
                    for x in e.issues
                )
                continue
            if entry.timeout_seconds is not None and not (
                0 < entry.timeout_seconds <= defaults.max_timeout_seconds
            ):
                issues.append(
                    ConfigIssue(
                        f"{where}.timeoutSeconds",
                        "must be positive and at most agents.defaults.maxTimeoutSeconds",
                    )
                )
            if entry.max_concurrent_runs is not None and entry.max_concurrent_runs < 1:
                issues.append(ConfigIssue(f"{where}.maxConcurrentRuns", "must be at least 1"))
            agent = _agent(agent_id, i == default_index, entry.name, defaults, models)
            agents.append(
                attrs.evolve(
                    agent,
                    system_prompt=entry.system_prompt,
                    heartbeat=(
                        entry.heartbeat.over(agent.heartbeat)
                        if entry.heartbeat is not None
                        else agent.heartbeat
                    ),
                    timeout_seconds=entry.timeout_seconds or agent.timeout_seconds,
                    max_concurrent_runs=entry.max_concurrent_runs or agent.max_concurrent_runs,
                    tools=with_approvals(
                        entry.tools if entry.tools is not None else defaults.tools,
                        entry.approve if entry.approve is not None else defaults.approve,
                    ),
                    budget=entry.budget if entry.budget is not None else agent.budget,
                )
            )
        if issues:
            raise ConfigError(issues)
        return cls(tuple(agents))


def _agent(
    agent_id: str, default: bool, name: str | None, defaults: AgentDefaults, models: ModelPolicy
) -> Agent:
    return Agent(
        id=agent_id,
        default=default,
        name=name,
        main_session=DEFAULT_MAIN_SESSION if default else scoped_main_session(agent_id),
        models=models,
        system_prompt=None,
        heartbeat=defaults.heartbeat,
        timeout_seconds=defaults.timeout_seconds,
        max_concurrent_runs=defaults.max_concurrent_runs,
        tools=with_approvals(defaults.tools, defaults.approve),
        budget=defaults.budget,
    )
