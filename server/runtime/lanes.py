"""Pausing and resuming lanes: what the admin API, the CLI, the console and the configuration
ask for, done once here.

A pause names a mapping (its rule id), an agent, or a hook path (every mapping on that path,
each paused in its own right). It is a row of the store (`hookwise.server.store.lanes`): the
runs it covers are `held` and the wakes it covers stay pending, in every process and across
restarts, until it is lifted. Resuming sends the held runs back to the queue in their order and
tells the lanes (and, with several processes, the others) and the heartbeats, which then take
them at their own pace: the session lanes and `maxConcurrentRuns` as always.

Mappings whose configuration says `paused: true` are paused at start-up and on reload (by
`config`); when the line goes, the pause it made is lifted. A pause made by an operator is never
lifted by the configuration.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable

import attrs

from ...engine.rules.ruleset import RuleSet
from ..store.base import Store
from ..store.lanes import BY_BUDGET, BY_CONFIG, Pause

log = logging.getLogger("hookwise.lanes")

CONFIG_REASON = "paused: true in the configuration"


class UnknownTarget(LookupError):
    """No mapping, agent or hook path by that name."""


@attrs.frozen
class Target:
    """What a pause or resume asks for: a `mapping`, an `agent` or a `path`, by name."""

    kind: str
    name: str


class Lanes:
    """Pause and resume, over the store, for one gateway process."""

    def __init__(
        self,
        store: Store,
        *,
        rules: Callable[[], RuleSet | None],
        main_sessions: dict[str, str],
        on_released: Callable[[], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._rules = rules
        #: each agent's main session, by agent id
        self._main_sessions = main_sessions
        self._on_released = on_released
        self._clock = clock
        #: waives the budget of a lane its budget held, when an operator resumes it (set by
        #: the gateway: `hookwise.server.runtime.budgets.Budgets.waive`)
        self.waive_budget: Callable[..., Awaitable[float | None]] | None = None

    def _mappings(self, target: Target) -> list[str]:
        """The rule ids a mapping or path target names (UnknownTarget when none)."""
        rules = self._rules()
        known = rules.rules if rules is not None else ()
        if target.kind == "mapping":
            found = [r.id for r in known if r.id == target.name]
        else:
            path = target.name.strip("/")
            found = [r.id for r in known if r.path is not None and r.path.strip("/") == path]
        if not found:
            raise UnknownTarget(f"no {target.kind} {target.name!r} in the loaded rules")
        return found

    def _pauses(self, target: Target, by: str, reason: str | None) -> list[Pause]:
        now = self._clock()
        if target.kind == "agent":
            if target.name not in self._main_sessions:
                raise UnknownTarget(f"no agent {target.name!r}")
            session = self._main_sessions[target.name]
            return [Pause("agent", target.name, by, now, reason, session)]
        if target.kind == "path" and reason is None:
            reason = f"hook path {target.name}"
        return [Pause("mapping", rule_id, by, now, reason) for rule_id in self._mappings(target)]

    async def pause(self, target: Target, *, by: str, reason: str | None) -> tuple[list[str], int]:
        """Pause what `target` names; the names paused and how many queued runs were held."""
        pauses = self._pauses(target, by, reason)
        held = 0
        for p in pauses:
            count = await self._store.pause(p)
            held += count
            log.warning(
                "paused %s %s by %s (%s): %d queued run(s) held",
                p.kind,
                p.name,
                by,
                p.reason or "no reason given",
                count,
            )
        return [p.name for p in pauses], held

    async def resume(self, target: Target, *, by: str) -> tuple[list[str], int]:
        """Lift the pauses `target` names; the names resumed (those that were paused) and how
        many runs went back to the queue."""
        if target.kind == "agent":
            if target.name not in self._main_sessions:
                raise UnknownTarget(f"no agent {target.name!r}")
            names = [("agent", target.name)]
        else:
            paused = {p.name for p in await self._store.pauses() if p.kind == "mapping"}
            try:
                found = self._mappings(target)
            except UnknownTarget:
                if target.kind != "mapping" or target.name not in paused:
                    raise
                found = [target.name]  # a mapping gone from the rules may still be paused
            names = [("mapping", rule_id) for rule_id in found]
        resumed, released = [], 0
        by_budget = {
            (p.kind, p.name) for p in await self._store.pauses() if p.paused_by == BY_BUDGET
        }
        for kind, name in names:
            if (kind, name) in by_budget and self.waive_budget is not None:
                await self.waive_budget(kind, name, by=by)
            count = await self._store.resume(kind, name)
            if count is None:
                continue
            resumed.append(name)
            released += count
            log.warning("resumed %s %s by %s: %d run(s) back in the queue", kind, name, by, count)
        if resumed:
            self._on_released()
        return resumed, released

    async def follow_config(self, rules: RuleSet | None) -> None:
        """Pause the mappings the configuration says `paused: true` (unless paused already);
        lift the pauses it made for mappings that no longer say so."""
        wanted = {r.id for r in (rules.rules if rules is not None else ()) if r.config.paused}
        current = {p.name: p for p in await self._store.pauses() if p.kind == "mapping"}
        for rule_id in sorted(wanted - current.keys()):
            held = await self._store.pause(
                Pause("mapping", rule_id, BY_CONFIG, self._clock(), CONFIG_REASON)
            )
            log.warning("mapping %s is paused by the configuration: %d run(s) held", rule_id, held)
        lifted = 0
        for name in _made_by_config(current.values(), wanted):
            released = await self._store.resume("mapping", name)
            lifted += 1
            log.warning(
                "mapping %s no longer paused by the configuration: %d run(s) back in the queue",
                name,
                released or 0,
            )
        if lifted:
            self._on_released()


def _made_by_config(pauses: Iterable[Pause], wanted: set[str]) -> list[str]:
    return sorted(p.name for p in pauses if p.paused_by == BY_CONFIG and p.name not in wanted)
