"""The gateway: one configured instance of the service and the parts it is made of.

It owns the wiring (store, dispatcher, compiled rules, hook endpoint, runtime) and their life
cycle, so that the Litestar app, the CLI and tests build the service the same way. Rules are
compiled before anything listens, so a broken rule stops start-up with its file, rule id and key
path; a reload (`reload_async`, on SIGHUP and `serve --watch`) compiles anew on a thread and swaps
atomically on the loop, keeping the old rules when that fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, cast

from ...engine.actions import ValidationPolicy
from ...engine.config.budgets import BudgetConfig
from ...engine.config.load import load_config
from ...engine.config.models import Config, LoadedConfig, RetainPayloadsConfig
from ...engine.config.sessions import SessionPolicy
from ...engine.config.store_url import store_url_problem
from ...engine.errors import ConfigError, ConfigIssue
from ...engine.rules.ruleset import RuleSet
from .. import auditing
from ..ingress.answer import Answers
from ..ingress.auth import TokenCheck, lockout_throttle
from ..ingress.dispatch import Dispatcher
from ..ingress.hooks import HookEndpoint, HookSettings
from ..ingress.limits import RouteLimiter, SharedCounters, route_limits
from ..store.audit import AuditRecord
from ..store.base import RunRecord, Store
from ..store.sqlite import SQLiteStore

log = logging.getLogger("hookwise")

PRUNE_EVERY = 600.0
REQUEST_LOG_RETENTION = 30 * 86400.0
RETIRED_RULES_GRACE = 30.0  # seconds a reloaded-away RuleSet stays open for requests in flight


def compile_rules(loaded: LoadedConfig) -> RuleSet:
    """Compile the mapped-hook rules of a configuration (custom mappings, rule files, presets)."""
    import os

    from ...engine.transforms import TransformLimits
    from ...engine.transforms._paths import transforms_dir_of

    hooks = loaded.config.hooks
    limits = hooks.transform_limits
    transforms_dir = transforms_dir_of(loaded.base_dir, hooks.transforms_dir)
    from ..metrics import time_transform

    ruleset = RuleSet.compile(
        hooks.mappings,
        presets=hooks.presets,
        rule_files=hooks.rules,
        base_dir=loaded.base_dir,
        transforms_dir=transforms_dir,
        limits=TransformLimits(
            timeout_ms=limits.timeout_ms,
            memory_mb=limits.memory_mb,
            pool_size=limits.pool_size,
            workers=limits.workers,
            worker_memory_mb=limits.worker_memory_mb,
            worker_recycle_calls=limits.worker_recycle_calls,
            worker_recycle_mb=limits.worker_recycle_mb,
        ),
        env=dict(os.environ),  # `${NAME}` in rule files; read once, here, not in the engine
        verify=hooks.verify,
        sessions=_session_policy(loaded.config),
        tool_servers=frozenset(loaded.config.tools.mcp_servers),
    )
    ruleset.observe_transform = time_transform
    return ruleset


def provider_ids(config: Config) -> frozenset[str]:
    """The model providers a run can use: `models.providers` and the built-in `echo`."""
    return frozenset(config.models.providers) | {"echo"}


def _session_policy(config: Config) -> SessionPolicy | None:
    """The session policy rules are checked against; None (the built-in one) when the agents
    themselves are broken: the config check reports those."""
    try:
        return SessionPolicy.from_config(config)
    except ConfigError:
        return None


def validation_policy(
    config: Config, channels: Mapping[str, Any] | None = None
) -> ValidationPolicy:
    """What request validation needs: the model allowlist, the configured channels, the agents
    and the session-key policy (fresh keys are `hook:<uuid>`)."""
    from ...engine.config.agents import Roster
    from ...engine.config.model_policy import ModelPolicy
    from ...engine.config.sessions import GENERATED_PREFIX
    from ..channels.registry import load_channels
    from ..ids import new_id

    if channels is None:
        channels = load_channels(config.channels)
    models = ModelPolicy.from_config(config.agents.defaults, providers=provider_ids(config))

    def check_recipient(channel: str, to: str) -> str | None:
        configured = channels.get(channel)
        return configured.validate_recipient(to) if configured is not None else None

    return ValidationPolicy(
        resolve_model=models.resolve,
        configured_channels=frozenset(channels),
        check_recipient=check_recipient,
        max_timeout_seconds=config.agents.defaults.max_timeout_seconds,
        sessions=SessionPolicy.from_config(
            config,
            roster=Roster.from_config(config, provider_ids(config)),
            new_key=lambda: GENERATED_PREFIX + new_id(),
        ),
    )


def open_store(
    url: str | None, *, state_dir: Path, synchronous: str = "full", writer: str = "process"
) -> Store:
    """The store a URL names: `postgresql://...`, `sqlite:///path`, or None for
    `<state dir>/hookwise.db` (`synchronous` and `writer` are SQLite's)."""
    problem = store_url_problem(url) if url else None
    if problem is not None:  # `serve --store` and HOOKWISE_STORE_URL, which the config check missed
        raise ConfigError([ConfigIssue("store.url", problem)])
    if url and url.startswith(("postgres://", "postgresql://")):
        from ..store.postgres import PostgresStore

        return PostgresStore(url)
    path = Path(url.removeprefix("sqlite:///")) if url else state_dir / "hookwise.db"
    return SQLiteStore(path, synchronous=synchronous, writer=writer)


def _shared_counters(store: Store) -> SharedCounters | None:
    """The counters of a store every process shares (PostgreSQL's); a SQLite store has none (its
    processes, one or several workers on one file, keep their limits each)."""
    return None if isinstance(store, SQLiteStore) else cast(SharedCounters, store)


class Gateway:
    """A configured hookwise service."""

    def __init__(
        self,
        loaded: LoadedConfig,
        *,
        state_dir: Path,
        store_url: str | None = None,
        workers: int = 1,
    ) -> None:
        self.loaded = loaded
        self.config = loaded.config
        self.state_dir = Path(state_dir)
        hooks = self.config.hooks
        from ..channels.registry import load_channels

        self.channels = load_channels(self.config.channels)
        url = store_url or self.config.store.url
        self.store = open_store(
            url,
            state_dir=self.state_dir,
            synchronous=self.config.store.synchronous,
            writer=self.config.store.writer,
        )
        #: several processes share the store: PostgreSQL, or several workers on one SQLite file
        self.shared = workers > 1 or not isinstance(self.store, SQLiteStore)
        if isinstance(self.store, SQLiteStore):
            self.store.lock_use(shared=self.shared)  # StoreInUse: refused before serving
        self.dispatcher = Dispatcher(self.store, idempotency_window=float(hooks.idempotency_window))
        self.rules: RuleSet | None = compile_rules(loaded) if hooks.enabled else None
        for warning in getattr(self.rules, "warnings", ()):
            log.warning("%s", warning)
        self.hooks: HookEndpoint | None = None
        from ..runtime.waiting import RunWaiters

        waiters = RunWaiters(self.store, max_waiting=hooks.limits.max_waiting, shared=self.shared)
        if hooks.enabled:
            assert hooks.token is not None
            throttle = hooks.auth_throttle
            self.hooks = HookEndpoint(
                HookSettings(
                    hook_path=hooks.path,
                    max_body_bytes=hooks.max_body_bytes,
                    body_timeout=float(hooks.body_timeout_seconds),
                    policy=validation_policy(self.config, self.channels),
                    retain_payloads=hooks.payload_retention is not None,
                    retain_max_bytes=(hooks.payload_retention or RetainPayloadsConfig()).max_bytes,
                    retain_built_in=(
                        hooks.payload_retention or RetainPayloadsConfig()
                    ).keeps_built_in,
                ),
                token=TokenCheck(hooks.token),
                throttle=lockout_throttle(
                    self.store if self.shared else None,
                    max_failures=throttle.max_failures,
                    window=float(throttle.window_seconds),
                    lockout=float(throttle.lockout_seconds),
                ),
                dispatcher=self.dispatcher,
                rules=lambda: self.rules,
                limiter=RouteLimiter(
                    route_limits(hooks.limits, lambda: self.rules),
                    lambda sub: f"{hooks.path}/{sub}",
                    shared=_shared_counters(self.store),
                ),
                answers=Answers(
                    waiters,
                    hook_path=hooks.path,
                    token=hooks.token,
                    max_wait=float(hooks.max_wait),
                ),
            )
        self._tasks: list[asyncio.Task[None]] = []
        self._reloading = asyncio.Lock()
        self._reloads: set[asyncio.Task[bool]] = set()
        #: the port the service listens on (set by the CLI once bound); the mail watcher posts there
        self.listen_port: int | None = None
        #: why the lifespan's start-up failed (the store unreachable, ...), for one clear line
        self.startup_error: BaseException | None = None
        from ..runtime.core import Runtime

        self.runtime = Runtime(
            self.config,
            self.store,
            channels=self.channels,
            base_dir=loaded.base_dir,
            shared=self.shared,
            waiters=waiters,
        )
        self.dispatcher.subscribe(self.runtime.on_accepted)
        from ..channels.approvals import ChannelAsker
        from ..runtime.approvals import link_secret

        approvals = self.runtime.approvals
        #: approval requests go to `approvals.via` with buttons (Telegram)
        approvals.on_request = ChannelAsker(
            self.channels,
            self.config.approvals,
            lambda: approvals.show_arguments,
            link_secret=link_secret(self.config.gateway.auth),
            pending=self._approval_pending,
        )
        approvals.sender_of = self._sender_of
        from ..runtime.lanes import Lanes

        #: pausing and resuming mappings, hook paths and agents (admin API, CLI, console, config)
        self.lanes = Lanes(
            self.store,
            rules=lambda: self.rules,
            main_sessions={a.id: a.main_session for a in self.runtime.roster.agents},
            on_released=self.runtime.released,
        )
        self._per_rule_of: dict[str, tuple[RuleSet, dict[str, Any]]] = {}
        from ..runtime.budgets import Budgets

        agent_budgets = {a.id: a.budget for a in self.runtime.roster.agents if a.budget is not None}
        #: budgets of mappings and agents: runs over them are held (`reason: budget`)
        self.budgets = Budgets(
            self.store,
            mapping_budgets=self._mapping_budgets,
            agent_budgets=lambda: agent_budgets,
            on_released=self.runtime.released,
        )
        self.runtime.budgets = self.budgets
        from ..alerts.evaluator import AlertEvaluator, check_targets

        check_targets(self.config.alerts, self.channels)
        #: the `alerts:` rules, evaluated by the `alerts` leader (`hookwise.server.alerts`)
        self.alerts = AlertEvaluator(
            self.store,
            self.config.alerts,
            shared=self.shared,
            hook_path=hooks.path,
            on_planned=lambda: self.runtime.deliveries.notify(),
        )
        self.lanes.waive_budget = self.budgets.waive
        self.runtime.mapping_caps = self._mapping_caps
        from ..sources.manager import Sources

        #: the pull sources (`sources:`): consumers started with the service
        self.sources = Sources(self.config.sources, self.hooks, self.dispatcher)
        from ..channels.webhook import CallbackSenders

        self.runtime.deliveries.senders = CallbackSenders(
            lambda: self.rules, self.config.events.subscribers
        )
        self.runtime.deliveries.subscribers = self.config.events.subscribers
        self.dispatcher.on_deliveries = self.runtime.deliveries.notify
        self.runtime.rule_tools = lambda rule_id: (
            self.rules.tools_of(rule_id) if self.rules is not None else ()
        )

    async def _approval_pending(self, approval_id: str) -> bool:
        """Whether the approval still waits for a decision (its request is worth asking again)."""
        record = await self.store.approval(approval_id)
        return record is not None and record.state == "pending"

    async def _sender_of(self, run: RunRecord) -> tuple[str | None, bool]:
        """Who sent the hook that started `run` (its request's client address and path) and
        whether that request's signature was verified (its mapping has `verify`)."""
        entry = await self.store.get_request(run.request_id) if run.request_id else None
        sender = None if entry is None else f"{entry.client or '-'} {entry.path}"
        rules = self.rules
        verified = bool(run.rule_id and rules is not None and rules.verifies(run.rule_id))
        return sender, verified

    def _per_rule(self, field: str) -> dict[str, Any]:
        """Each loaded mapping's `field` of its config by rule id, where set (worked out once
        per set of rules)."""
        rules = self.rules
        if rules is None:
            return {}
        cached = self._per_rule_of.get(field)
        if cached is None or cached[0] is not rules:
            found = {r.id: v for r in rules.rules if (v := getattr(r.config, field)) is not None}
            cached = self._per_rule_of[field] = (rules, found)
        return cached[1]

    def _mapping_caps(self) -> dict[str, int]:
        """Each loaded mapping's `maxConcurrentRuns`."""
        return self._per_rule("max_concurrent_runs")

    def _mapping_budgets(self) -> dict[str, BudgetConfig]:
        """Each loaded mapping's `budget`."""
        return self._per_rule("budget")

    @property
    def admin_token(self) -> str | None:
        return self.config.gateway.auth.token

    async def reload_async(self) -> bool:
        """Compile the rules from the config file again and swap them in; False (logged) if that
        failed, and the current rules stay.

        The compile runs on a thread: loading the configuration, compiling templates
        and JSONPaths, starting the sandbox workers and loading every transform into them takes
        up to a second with one JS transform, and on the event loop it stopped every request for
        that long. Requests go on meanwhile on the current rules; the new ones are swapped in on
        the loop. Reloads run one at a time, in the order asked."""
        async with self._reloading:
            try:
                rules = await asyncio.to_thread(self._compile_fresh)
            except Exception:
                log.exception("reload failed, keeping the current rules")
                return False
            if rules is None:
                return False
            self._swap_rules(rules)
            try:
                await self.lanes.follow_config(rules)
            except Exception:
                log.exception("reload: applying the mappings' `paused` failed")
            return True

    async def reload_audited(self, via: str) -> bool:
        """`reload_async`, recorded in the audit log as a `reload` by `-` from `local` (`via`:
        `signal` for SIGHUP, `watch` for `serve --watch`; the API's reload is recorded by its
        route), `failed` with `reload_failed` when the rules did not compile."""
        reloaded = await self.reload_async()
        entry = AuditRecord(
            at=time.time(),
            actor="-",
            via=via,
            client="local",
            action="reload",
            targets={"pid": str(os.getpid())},
            outcome="ok" if reloaded else "failed",
            status=200 if reloaded else 422,
            code=None if reloaded else "reload_failed",
        )
        await auditing.write(self.store, entry)
        return reloaded

    def reload_in_background(self, via: str = "signal") -> None:
        """Start `reload_audited` and return (a signal handler cannot wait)."""
        task = asyncio.get_running_loop().create_task(
            self.reload_audited(via), name="hookwise-reload"
        )
        self._reloads.add(task)
        task.add_done_callback(self._reloads.discard)

    def _compile_fresh(self) -> RuleSet | None:
        """The rules of the config file as it is now, or None (logged) if they do not compile."""
        if self.loaded.source is None or self.hooks is None:
            return None
        try:
            fresh = load_config(self.loaded.source)
            if fresh.config.hooks.path != self.config.hooks.path:
                log.warning("reload: hooks.path changed; restart to apply it")
            return compile_rules(fresh)
        except ConfigError as e:
            # one line (a line break would be escaped as \x0a by the log filter)
            problems = "; ".join(str(issue) for issue in e.issues)
            log.error("reload failed, keeping the current rules: %s", problems)
            return None

    def _swap_rules(self, rules: RuleSet | None) -> None:
        old, self.rules = self.rules, rules
        if old is not None:
            # Requests already past `select` still run on the old rules: close them later.
            try:
                asyncio.get_running_loop().call_later(RETIRED_RULES_GRACE, old.close)
            except RuntimeError:  # not called from the service's loop: nothing runs on them
                old.close()
        log.info("reload: rules swapped in")

    async def _prune_forever(self) -> None:
        window = float(self.config.hooks.idempotency_window)
        while True:
            try:
                await self.store.prune(
                    now=time.time(), idempotency_window=window, log_retention=REQUEST_LOG_RETENTION
                )
            except Exception:
                log.exception("pruning the store failed")
            await asyncio.sleep(PRUNE_EVERY)

    async def _prune_payloads_forever(self) -> None:
        """Forget kept payloads older than `hooks.retainPayloads.for` (all of them when it is
        off: a payload is never kept longer than the configuration allows)."""
        retain = self.config.hooks.payload_retention
        keep = float(retain.keep_for) if retain is not None else 0.0
        every = max(0.5, min(PRUNE_EVERY, keep / 2))
        while True:
            try:
                await self.store.prune_payloads(before=time.time() - keep)
            except Exception:
                log.exception("pruning kept payloads failed")
            if retain is None:
                return
            await asyncio.sleep(every)

    def _start_mail_watcher(self) -> None:
        """Start the mail watcher when `hooks.gmail` is configured (and hooks are enabled)."""
        gmail = self.config.hooks.gmail
        if gmail is None or not gmail.enabled or self.hooks is None:
            return
        if self.listen_port is None and not gmail.hook_url:
            log.warning("mail watcher not started: the listening port is unknown")
            return
        from ..gmail.leader import run_as_leader
        from ..gmail.watcher import run_watcher

        async def watch() -> None:
            try:
                await run_watcher(
                    gmail,
                    hook_url=gmail.resolve_hook_url(self.listen_port or 0, self.config.hooks.path),
                    hook_token=self.config.hooks.token or "",
                    state_dir=self.state_dir,
                    base_dir=self.loaded.base_dir,
                )
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the gateway keeps serving hooks without the watcher
                log.error("the mail watcher stopped: %s", e)

        # Several processes on one store: only the `gmail` leader runs the watcher.
        job = run_as_leader(self.store, watch) if self.shared else watch()
        self._tasks.append(asyncio.create_task(job, name="hookwise-gmail"))

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Gateway]:
        """Open the store and start background work; undo it all on exit."""
        await self.store.open()
        self._tasks.append(asyncio.create_task(self._prune_forever(), name="hookwise-prune"))
        from .retention import Retention

        retention = Retention(self.store, self.config.retention, shared=self.shared)
        self._tasks.append(asyncio.create_task(retention.run_forever(), name="hookwise-retention"))
        self._tasks.append(
            asyncio.create_task(self._prune_payloads_forever(), name="hookwise-prune-payloads")
        )
        await self.lanes.follow_config(self.rules)
        self._tasks.append(asyncio.create_task(self.budgets.run_forever(), name="hookwise-budgets"))
        self._tasks.append(asyncio.create_task(self.alerts.run_forever(), name="hookwise-alerts"))
        await self.runtime.start()
        self._start_mail_watcher()
        self.sources.start()
        try:
            yield self
        finally:
            await self.sources.stop()
            await self.runtime.stop()
            for task in self._tasks:
                task.cancel()
            for task in self._tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            self._tasks.clear()
            await self.store.close()
            if self.rules is not None:
                self.rules.close()
