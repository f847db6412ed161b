"""Budgets that hold, not fail: a run whose mapping or agent has spent its budget in the current
window is not started; its lane is held (`reason: budget`) until the window allows.

What a budget covers is counted from the store's `model_calls` records (`Store.spend`), so
every process sees the same sum, and a restart forgets nothing. The check runs on each claimed
run before it executes (`admit`): a run over budget goes back to the queue at its place, without
using up an attempt, and a pause by `budget` (a row of `pauses`, see `hookwise.server.store.lanes`)
holds it and every later run of the mapping or agent, in order, in every process. `release_due`
(called every few seconds by each process) lifts a budget pause once the window has room again,
or once the budget is raised or removed (a reload). An operator's release (`hookwise resume`
of the mapping or agent, the admin API, the console) lifts it at once and waives the budget
until the end of the window (a row of `budget_waivers`, seen by every process).

An operator may also raise a budget for a while (`raise_budget`: new limits until a time, a row
of `budget_raises`, seen by every process): while it lasts the raised limits are the budget's,
so a held lane whose spend is under them is lifted by `release_due`, and runs start again.
The raise is read only when the configured limits are reached, so it costs a check nothing
otherwise.

A breach is logged once per window and counted (`hookwise_budget_breaches`) by the process that
holds the lane: the pause row is written once, whoever sees the breach first.

A budget `by: sender` is checked per sender (`hookwise.server.store.senders`): the run's scope is
its mapping or agent and its sender, the spend is that sender's, and a sender past it is held
by a pause of kind `mapping-sender` or `agent-sender` that holds that sender's runs only (the
other senders' runs of the mapping go on). Release, waivers and the lifting by `release_due` work
per sender the same way; a raise is of the budget, so it raises every sender's allowance.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import attrs

from ...engine.config.budgets import BudgetConfig
from ...engine.config.prices import PerTokens
from .. import metrics
from ..store.base import RunRecord, Store
from ..store.lanes import BY_BUDGET, BudgetRaise, Pause
from ..store.modelcalls import SPEND_COLUMN
from ..store.senders import BASE_KIND, NO_SENDER, SENDER_KIND, scope_name, split_name
from .providers.base import Usage

log = logging.getLogger("hookwise.budgets")

#: how often each process looks whether a held budget's window has room again
RELEASE_EVERY = 2.0


#: how many senders of a budget by sender `GET /api/budgets` lists (the most spent)
TOP_SENDERS = 20


@attrs.frozen
class Scope:
    """One budget and what it covers: a mapping (`rule_id`) or an agent, by name; and for a
    budget by sender, the one sender whose runs it covers."""

    kind: str
    name: str
    budget: BudgetConfig
    sender: str | None = None

    @property
    def held_kind(self) -> str:
        """The kind of its pause, waiver and running totals (`mapping-sender` for a sender)."""
        return self.kind if self.sender is None else SENDER_KIND[self.kind]

    @property
    def held_name(self) -> str:
        """The name of its pause, waiver and running totals (`<mapping>/<sender>`)."""
        return self.name if self.sender is None else scope_name(self.name, self.sender)

    def describe(self) -> str:
        """`mapping github` or `mapping github sender github#1`, for log lines and replies."""
        found = f"{self.kind} {self.name}"
        return found if self.sender is None else f"{found} sender {self.sender}"


@attrs.frozen
class Spend:
    """What a scope spent in its current window, and where that window starts."""

    tokens: int
    cost: float
    since: float


class Budgets:
    """The budget check of one process, over the store."""

    def __init__(
        self,
        store: Store,
        *,
        mapping_budgets: Callable[[], dict[str, BudgetConfig]],
        agent_budgets: Callable[[], dict[str, BudgetConfig]],
        on_released: Callable[[], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._mapping_budgets = mapping_budgets
        self._agent_budgets = agent_budgets
        self._on_released = on_released
        self._clock = clock

    def now(self) -> float:
        return self._clock()

    def scopes_of(self, run: RunRecord) -> list[Scope]:
        """The budgets a run counts against: its mapping's, then its agent's."""
        scopes = []
        sender = run.sender or NO_SENDER
        if run.rule_id is not None:
            budget = self._mapping_budgets().get(run.rule_id)
            if budget is not None:
                scopes.append(
                    Scope("mapping", run.rule_id, budget, sender if budget.by_sender else None)
                )
        budget = self._agent_budgets().get(run.agent_id)
        if budget is not None:
            scopes.append(
                Scope("agent", run.agent_id, budget, sender if budget.by_sender else None)
            )
        return scopes

    async def spend(self, scope: Scope) -> Spend:
        since = scope.budget.window_start(self._clock())
        tokens, cost = await self._store.spend(
            SPEND_COLUMN[scope.held_kind], scope.held_name, since=since
        )
        return Spend(tokens, cost, since)

    def scope_of_pause(self, p: Pause) -> Scope | None:
        """The budget a pause by `budget` stands for (None: that budget is no longer set)."""
        kind: str = p.kind
        name, sender = p.name, None
        if kind in BASE_KIND:
            kind = BASE_KIND[kind]
            name, sender = split_name(p.name)
        budget = self.budget_of(kind, name)
        if budget is None or budget.by_sender != (sender is not None):
            return None
        return Scope(kind, name, budget, sender)

    async def senders(self, scope: Scope) -> list[tuple[str, int, float]]:
        """The senders of a budget by sender that spent most in its window: (sender, tokens,
        cost), at most `TOP_SENDERS` (from the running totals' whole minutes)."""
        since = scope.budget.window_start(self._clock())
        return await self._store.top_senders(scope.kind, scope.name, since=since, limit=TOP_SENDERS)

    async def raised(self, kind: str, name: str) -> BudgetRaise | None:
        """The operator's raise of a budget in force now, if any."""
        now = self._clock()
        for r in await self._store.budget_raises():
            if (r.kind, r.name) == (kind, name) and r.until > now:
                return r
        return None

    async def exceeded(self, scope: Scope, tokens: int, cost: float) -> bool:
        """Whether spending `tokens` and `cost` reaches the budget of `scope`, as raised by an
        operator if it is (read only when the configured limits are reached)."""
        budget = scope.budget
        if not budget.exceeded(tokens, cost):
            return False
        r = await self.raised(scope.kind, scope.name)
        return r is None or raised_limits(budget, r).exceeded(tokens, cost)

    async def over(self, run: RunRecord) -> tuple[Scope, Spend] | None:
        """The first budget of `run` that is spent, with what was spent; None: it may start."""
        for scope in self.scopes_of(run):
            waived = await self._store.budget_waiver(scope.held_kind, scope.held_name)
            if waived is not None and waived > self._clock():
                continue
            spent = await self.spend(scope)
            if await self.exceeded(scope, spent.tokens, spent.cost):
                return scope, spent
        return None

    def budget_of(self, kind: str, name: str) -> BudgetConfig | None:
        """The configured budget of a mapping or an agent (None: it has none)."""
        budgets = {"mapping": self._mapping_budgets(), "agent": self._agent_budgets()}
        return budgets.get(kind, {}).get(name)

    def configured(self) -> list[Scope]:
        """Every configured budget, mappings' first, by name."""
        return [
            Scope(kind, name, budget)
            for kind, budgets in (
                ("mapping", self._mapping_budgets()),
                ("agent", self._agent_budgets()),
            )
            for name, budget in sorted(budgets.items())
        ]

    async def raise_budget(
        self, kind: str, name: str, *, tokens: int | None, cost: float | None, until: float, by: str
    ) -> BudgetRaise | None:
        """An operator raises a budget until `until` (None: no such budget). Held runs start
        once `release_due` finds the spend under the raised limits (within `RELEASE_EVERY`)."""
        if self.budget_of(kind, name) is None:
            return None
        raised = BudgetRaise(kind, name, tokens, cost, until, by, self._clock())
        await self._store.raise_budget(raised)
        log.warning(
            "budget of %s %s raised by %s until %.0f: tokens %s, cost %s",
            kind,
            name,
            by,
            until,
            tokens,
            cost,
        )
        return raised

    async def admit(self, runs: list[RunRecord]) -> list[RunRecord]:
        """`runs` (just claimed) without those over budget: those go back to the queue and
        their lane is held. A failed check lets the run start (logged): a budget never loses
        a run."""
        keep: list[RunRecord] = []
        for run in runs:
            try:
                found = await self.over(run)
            except Exception as e:
                log.error("budget check of run %s failed, run starts: %s", run.run_id, e)
                keep.append(run)
                continue
            if found is None:
                keep.append(run)
                continue
            scope, spent = found
            try:
                await self._store.requeue_runs([run.run_id])
                await self._hold(scope, spent, run)
            except Exception as e:  # the run's lease brings it back; it is checked again then
                log.error("holding run %s over budget failed: %s", run.run_id, e)
        return keep

    async def _hold(self, scope: Scope, spent: Spend, run: RunRecord) -> None:
        b = scope.budget
        reason = (
            f"budget: {spent.tokens} tokens, cost {spent.cost:g} since {spent.since:.0f}"
            f" (budget tokens {b.tokens}, cost {b.cost}, per {b.per:g}s {b.window})"
        )
        kind, name = scope.held_kind, scope.held_name
        found = [p for p in await self._store.pauses() if (p.kind, p.name) == (kind, name)]
        if found:
            # held meanwhile (by another process's budget check, an operator, the configuration):
            # that pause is applied again as it is, so that it holds this run too; one the
            # budget would lift on its own never replaces an operator's
            await self._store.pause(found[0])
            log.info("run %s held by the pause of %s", run.run_id, scope.describe())
            return
        held = await self._store.pause(
            Pause(kind, name, BY_BUDGET, self._clock(), reason)  # type: ignore[arg-type]
        )
        log.warning(
            "budget of %s spent: run %s and %d queued run(s) held (%s)",
            scope.describe(),
            run.run_id,
            held,
            reason,
        )
        # by the budget's kind and name: a sender is never a label (bounded by the configuration)
        metrics.budget_breach(kind, scope.name)

    async def gauges(self) -> list[tuple[str, str, str, float, float]]:
        """Each configured budget's spend in its current window against its limit, per limit:
        (scope, name, `tokens` or `cost`, spent, limit). Bounded by the configuration: a budget
        by sender is one series (scope `mapping-sender` or `agent-sender`), whose spend is the
        most any one sender spent and whose limit is each sender's."""
        found: list[tuple[str, str, str, float, float]] = []
        for kind, budgets in (
            ("mapping", self._mapping_budgets()),
            ("agent", self._agent_budgets()),
        ):
            for name, budget in sorted(budgets.items()):
                scope = Scope(kind, name, budget)
                if budget.by_sender:
                    top = await self.senders(scope)
                    tokens = max((t for _, t, _ in top), default=0)
                    spent = Spend(tokens, max((c for _, _, c in top), default=0.0), 0.0)
                    label = SENDER_KIND[kind]
                else:
                    spent, label = await self.spend(scope), kind
                r = await self.raised(kind, name)
                budget = budget if r is None else raised_limits(budget, r)
                if budget.tokens is not None:
                    found.append((label, name, "tokens", float(spent.tokens), float(budget.tokens)))
                if budget.cost is not None:
                    found.append((label, name, "cost", spent.cost, float(budget.cost)))
        return found

    async def crossed(self, run: RunRecord, usage: Usage | None) -> str | None:
        """Why a run in progress must stop calling tools: a budget of it is reached by what was
        spent without it plus what it spent so far (`usage`, its own calls not yet recorded
        counted once); None: it may go on."""
        own = 0 if usage is None else (usage.input_tokens or 0) + (usage.output_tokens or 0)
        for scope in self.scopes_of(run):
            now = self._clock()
            waived = await self._store.budget_waiver(scope.held_kind, scope.held_name)
            if waived is not None and waived > now:
                continue
            since = scope.budget.window_start(now)
            tokens, cost = await self._store.spend(
                SPEND_COLUMN[scope.held_kind], scope.held_name, since=since, exclude=run.run_id
            )
            if await self.exceeded(scope, tokens + own, cost):
                log.warning(
                    "run %s crossed the budget of %s (%d tokens): no more tool calls",
                    run.run_id,
                    scope.describe(),
                    tokens + own,
                )
                return f"the budget of {scope.describe()} is spent ({tokens + own} tokens)"
        return None

    async def waive(
        self, kind: str, name: str, *, by: str, sender: str | None = None
    ) -> float | None:
        """An operator released a lane its budget held (or one sender of a budget by sender):
        the budget is not checked again until the spend that filled it has left the window.
        Until when (None: no such budget)."""
        budget = self.budget_of(kind, name)
        if budget is None:
            return None
        scope = Scope(kind, name, budget, sender)
        until = budget.window_end(self._clock())
        await self._store.waive_budget(scope.held_kind, scope.held_name, until=until, by=by)
        log.warning("budget of %s released by %s until %.0f", scope.describe(), by, until)
        return until

    async def held_senders(self, kind: str, name: str) -> list[str]:
        """The senders a budget by sender of the mapping or agent `name` holds, oldest first."""
        held_kind = SENDER_KIND[kind]
        return [
            split_name(p.name)[1]
            for p in await self._store.pauses()
            if p.kind == held_kind and p.paused_by == BY_BUDGET and split_name(p.name)[0] == name
        ]

    async def release_senders(
        self, kind: str, name: str, senders: list[str], *, by: str
    ) -> tuple[list[str], int]:
        """An operator releases senders a budget by sender holds: each is waived until the end
        of its window and its held runs go back to the queue, in order. The senders released
        (those still held) and how many runs went back."""
        released: list[str] = []
        count = 0
        budget = self.budget_of(kind, name)
        if budget is None:
            return released, count
        for sender in senders:
            scope = Scope(kind, name, budget, sender)
            await self.waive(kind, name, by=by, sender=sender)
            n = await self._store.resume(scope.held_kind, scope.held_name)
            if n is None:
                continue  # lifted meanwhile
            released.append(sender)
            count += n
            log.warning("resumed %s by %s: %d run(s) back in the queue", scope.describe(), by, n)
        if released:
            self._on_released()
        return released, count

    async def release_due(self) -> list[str]:
        """Lift the budget pauses whose window has room again, or whose budget went; the
        names lifted."""
        lifted = []
        for p in await self._store.pauses():
            if p.paused_by != BY_BUDGET:
                continue
            scope = self.scope_of_pause(p)
            if scope is not None:
                spent = await self.spend(scope)
                if await self.exceeded(scope, spent.tokens, spent.cost):
                    continue
            released = await self._store.resume(p.kind, p.name)
            if released is None:
                continue  # another process lifted it first
            lifted.append(p.name)
            log.warning(
                "budget of %s %s has room again: %d run(s) back in the queue",
                p.kind,
                p.name,
                released,
            )
        if lifted:
            self._on_released()
        return lifted

    async def run_forever(self) -> None:
        while True:
            try:
                await self.release_due()
            except Exception as e:
                log.error("releasing held budgets failed: %s: %s", type(e).__name__, e)
            await asyncio.sleep(RELEASE_EVERY)


def raised_limits(budget: BudgetConfig, raised: BudgetRaise) -> BudgetConfig:
    """`budget` with an operator's raised limits in place of the configured ones it names."""
    return attrs.evolve(
        budget,
        tokens=budget.tokens if raised.tokens is None else PerTokens(raised.tokens),
        cost=budget.cost if raised.cost is None else raised.cost,
    )
