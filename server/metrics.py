"""Prometheus metrics: what the service counts, how a scrape reads it, and the HTTP middleware.

Off until `enable()` (then `gateway.metrics.enabled: false` costs nothing: every recording
function returns at once). With one process the metrics live in its memory; with `--workers N`
the supervisor gives the workers one directory (`PROMETHEUS_MULTIPROC_DIR`, under the state dir,
see `multiprocess_dir`) where prometheus_client's multiprocess mode keeps each worker's values
in a small memory-mapped file, and a scrape answered by any worker sums them all, so one scrape
sees the whole service. The gauges of what waits and what runs are not counted at all: a scrape
reads them from the store (`queue_stats`, `in_flight`), which every worker shares.

Recording is cheap on the hot path: a request costs two clock reads, one dictionary lookup of
the (route, status) children and two increments.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from .version import version_info

ENV = "PROMETHEUS_MULTIPROC_DIR"
#: the text exposition format; the framework adds `; charset=utf-8` to a text/* media type
CONTENT_TYPE = "text/plain; version=0.0.4"
QUEUES = ("runs", "deliveries")
#: the most values the model and mapping labels of the model-call series take (then `other`)
MAX_LABEL_VALUES = 100
#: a model breaker's state as the value of `hookwise_model_breaker_state`
BREAKER_VALUES = {"closed": 0, "half_open": 1, "open": 2}

_DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_RUN_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


class _Metrics:
    """The metric objects of one process."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.multiprocess = ENV in os.environ
        # In multiprocess mode the values live in files; a scrape builds its own registry.
        self.registry = None if self.multiprocess else CollectorRegistry(auto_describe=True)
        reg: Any = self.registry

        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Any:
            return Counter(name, doc, labels, registry=reg)

        def histogram(name: str, doc: str, labels: tuple[str, ...], buckets: Any) -> Any:
            return Histogram(name, doc, labels, registry=reg, buckets=buckets)

        self.http_requests = counter(
            "hookwise_http_requests", "HTTP requests answered", ("route", "status")
        )
        self.http_duration = histogram(
            "hookwise_http_request_duration_seconds",
            "Time to answer an HTTP request",
            ("route",),
            _DURATION_BUCKETS,
        )
        self.auth_failures = counter(
            "hookwise_auth_failures", "Requests refused for a missing or wrong token (401)"
        )
        self.runs = counter("hookwise_runs", "Agent runs ended", ("agent", "state"))
        self.run_duration = histogram(
            "hookwise_run_duration_seconds",
            "Agent run duration, from start to end",
            ("agent", "state"),
            _RUN_BUCKETS,
        )
        self.deliveries = counter(
            "hookwise_deliveries",
            "Delivery outcomes (sent, failed, skipped; retried per retried attempt)",
            ("channel", "state"),
        )
        self.provider_requests = counter(
            "hookwise_provider_requests",
            "Requests to model providers by HTTP status (timeout, error: no answer)",
            ("provider", "status"),
        )
        self.transform_duration = histogram(
            "hookwise_transform_duration_seconds",
            "Transform call duration",
            ("runtime",),
            _DURATION_BUCKETS,
        )
        self.heartbeats = counter(
            "hookwise_heartbeats", "Heartbeats ended, by outcome", ("agent", "outcome")
        )
        self.tool_calls = counter(
            "hookwise_tool_calls",
            "MCP tool calls of runs, by outcome",
            ("server", "tool", "outcome"),
        )
        self.tool_call_duration = histogram(
            "hookwise_tool_call_duration_seconds",
            "MCP tool call duration, from request to result",
            ("server", "tool"),
            _DURATION_BUCKETS,
        )
        self.tool_output_dropped = counter(
            "hookwise_tool_output_dropped",
            "What tool servers sent that was dropped: stderr_bytes (of lines over the cap),"
            " stdout_bytes (of messages over the cap), stdout_noise (non-JSON-RPC lines)",
            ("server", "what"),
        )
        self.limited = counter(
            "hookwise_limited",
            "Hook requests refused by a per-route limit (rate_limited, too_many_in_flight)",
            ("route", "code"),
        )
        self.model_calls = counter(
            "hookwise_model_calls",
            "Model calls of runs and heartbeats by outcome (ok, error, skipped: breaker open)",
            ("agent", "mapping", "model", "outcome"),
        )
        self.model_tokens = counter(
            "hookwise_model_tokens",
            "Tokens the providers reported, by kind (input, output, cache_read, cache_write)",
            ("agent", "mapping", "model", "kind"),
        )
        self.model_cost = counter(
            "hookwise_model_cost",
            "Cost of model calls from models.prices (calls of unpriced models count nothing)",
            ("agent", "mapping", "model"),
        )
        self.budget_breaches = counter(
            "hookwise_budget_breaches",
            "Budgets found spent (their lane held), once per window, by scope and name",
            ("scope", "name"),
        )
        self.alert_transitions = counter(
            "hookwise_alert_transitions",
            "Alerts opened and resolved by this process (the evaluation leader), by rule",
            ("rule", "transition"),
        )
        self.alert_check_failures = counter(
            "hookwise_alert_check_failures",
            "Evaluations of an alert rule that failed (the store did not answer...), by rule",
            ("rule",),
        )
        #: label values seen per label, bounded (`MAX_LABEL_VALUES`, then `other`)
        self._seen: dict[str, set[str]] = {}
        from prometheus_client import Gauge

        self.in_flight = Gauge(
            "hookwise_in_flight",
            "Hook requests being handled now, per route with a maxInFlight limit",
            ("route",),
            registry=reg,
            multiprocess_mode="livesum",
        )
        self.refusals_held = Gauge(
            "hookwise_refusals_held",
            "429 answers being held now: refusals to a client that keeps sending are paced",
            registry=reg,
            multiprocess_mode="livesum",
        )
        self.source_messages = counter(
            "hookwise_source_messages",
            "Messages of pull sources: received, acked, redelivered, duplicate, refused, retried",
            ("source", "outcome"),
        )
        self.source_lag = Gauge(
            "hookwise_source_lag",
            "Messages waiting for a pull source's group, as its broker reports them",
            ("source",),
            registry=reg,
            multiprocess_mode="livemax",
        )
        self.source_connected = Gauge(
            "hookwise_source_connected",
            "Whether a pull source is connected to its broker (1) or retrying (0)",
            ("source",),
            registry=reg,
            multiprocess_mode="livemin",
        )
        self.waiting = Gauge(
            "hookwise_hook_waiting",
            "Hook requests held open now for their run's outcome (`wait`)",
            registry=reg,
            multiprocess_mode="livesum",
        )
        self.waits = counter(
            "hookwise_hook_waits",
            "Waits for a run's outcome ended: finished, timeout (answered 202), full (202 at"
            " once: hooks.limits.maxWaiting), cancelled (the caller went away), gone",
            ("outcome",),
        )
        self.audit = counter(
            "hookwise_audit_entries",
            "Operator actions audited, by action and outcome (ok, refused, failed; lost: the"
            " audit log could not be written)",
            ("action", "outcome"),
        )
        self.trace_spans_dropped = counter(
            "hookwise_trace_spans_dropped",
            "Trace spans never exported (server.telemetry): queue_full (the bounded export queue"
            " was full) or export_failed (the collector refused or could not be reached)",
            ("reason",),
        )
        self.approval_decisions = counter(
            "hookwise_approval_decisions",
            "Decisions of tool calls that waited for approval: approved, denied, timed_out,"
            " refused (forged, replayed, late, second or not an approver: changed nothing)",
            ("outcome",),
        )
        self.approval_asks = counter(
            "hookwise_approval_asks",
            "Tries to ask a person for an approval on approvals.via, by channel and outcome: sent,"
            " retried (failed, tried again), failed (refused, or given up before the approval"
            " expired)",
            ("channel", "outcome"),
        )
        self._http_children: dict[tuple[str, int], tuple[Any, Any]] = {}

    def bounded(self, label: str, value: str) -> str:
        """`value`, or `other` once `label` has `MAX_LABEL_VALUES` values (requests may name
        models and mappings come and go with reloads: the series stay bounded)."""
        seen = self._seen.setdefault(label, set())
        if value in seen:
            return value
        if len(seen) >= MAX_LABEL_VALUES:
            return "other"
        seen.add(value)
        return value

    def http_children(self, route: str, status: int) -> tuple[Any, Any]:
        key = (route, status)
        children = self._http_children.get(key)
        if children is None:
            children = (
                self.http_requests.labels(route, str(status)),
                self.http_duration.labels(route),
            )
            self._http_children[key] = children
        return children


_metrics: _Metrics | None = None


def enable() -> None:
    """Start counting (once per process)."""
    global _metrics
    if _metrics is None:
        from prometheus_client import disable_created_metrics

        disable_created_metrics()  # `*_created` series double a scrape for nothing we use
        _metrics = _Metrics()


def enabled() -> bool:
    return _metrics is not None


# recording -----------------------------------------------------------------------------------


def run_ended(agent: str, state: str, duration: float | None) -> None:
    if _metrics is not None:
        _metrics.runs.labels(agent, state).inc()
        if duration is not None:
            _metrics.run_duration.labels(agent, state).observe(max(0.0, duration))


def delivery(channel: str | None, state: str) -> None:
    if _metrics is not None:
        _metrics.deliveries.labels(channel or "none", state).inc()


def tool_call(server: str, tool: str, outcome: str, seconds: float) -> None:
    if _metrics is not None:
        _metrics.tool_calls.labels(server, tool, outcome).inc()
        _metrics.tool_call_duration.labels(server, tool).observe(max(0.0, seconds))


def tool_output_dropped(server: str, what: str, amount: int) -> None:
    if _metrics is not None:
        _metrics.tool_output_dropped.labels(server, what).inc(amount)


def trace_spans_dropped(reason: str, amount: int = 1) -> None:
    """Spans lost on their way to the collector (called from the exporter's thread too)."""
    if _metrics is not None:
        _metrics.trace_spans_dropped.labels(reason).inc(amount)


def limited(route: str, code: str) -> None:
    if _metrics is not None:
        _metrics.limited.labels(route, code).inc()


def in_flight(route: str, delta: int) -> None:
    if _metrics is not None:
        _metrics.in_flight.labels(route).inc(delta)


def refusals_held(delta: int) -> None:
    if _metrics is not None:
        _metrics.refusals_held.inc(delta)


def source_messages(source: str, outcome: str, count: int) -> None:
    if _metrics is not None:
        _metrics.source_messages.labels(source, outcome).inc(count)


def source_lag(source: str, lag: int | None) -> None:
    if _metrics is not None and lag is not None:
        _metrics.source_lag.labels(source).set(lag)


def source_connected(source: str, connected: bool) -> None:
    if _metrics is not None:
        _metrics.source_connected.labels(source).set(1 if connected else 0)


def waiting(delta: int) -> None:
    if _metrics is not None:
        _metrics.waiting.inc(delta)


def waited(outcome: str) -> None:
    if _metrics is not None:
        _metrics.waits.labels(outcome).inc()


def provider_request(provider: str, status: int | str) -> None:
    if _metrics is not None:
        _metrics.provider_requests.labels(provider, str(status)).inc()


def transform(runtime: str, seconds: float) -> None:
    if _metrics is not None:
        _metrics.transform_duration.labels(runtime).observe(seconds)


class _TransformTimer:
    __slots__ = ("_runtime", "_started")

    def __init__(self, runtime: str) -> None:
        self._runtime = runtime
        self._started = time.perf_counter()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        transform(self._runtime, time.perf_counter() - self._started)


_NOT_TIMED = contextlib.nullcontext()
_RUNTIMES = {"js": "js", "py": "python"}


def time_transform(call: Any) -> contextlib.AbstractContextManager[Any]:
    """`RuleSet.observe_transform`: times one transform call by its runtime (`js`, `python`)."""
    if _metrics is None:
        return _NOT_TIMED
    kind = str(getattr(call, "description", "")).split(":", 1)[0]
    return _TransformTimer(_RUNTIMES.get(kind, kind or "other"))


def model_call(call: Any) -> None:
    """One model call's record (`store.modelcalls.ModelCallRecord`): its outcome, its tokens by
    kind and its cost, by agent, mapping (`none` for `/agent` runs, `heartbeat`) and model."""
    if _metrics is None:
        return
    m = _metrics
    mapping = m.bounded("mapping", call.rule_id or ("heartbeat" if call.attempt == 0 else "none"))
    model = m.bounded("model", call.model)
    m.model_calls.labels(call.agent_id, mapping, model, call.outcome).inc()
    for kind, n in (
        ("input", call.input_tokens),
        ("output", call.output_tokens),
        ("cache_read", call.cache_read_tokens),
        ("cache_write", call.cache_write_tokens),
    ):
        if n:
            m.model_tokens.labels(call.agent_id, mapping, model, kind).inc(n)
    if call.cost:
        m.model_cost.labels(call.agent_id, mapping, model).inc(call.cost)


def audited(action: str, outcome: str) -> None:
    """An operator action recorded in the audit log (`lost`: it could not be written)."""
    if _metrics is not None:
        _metrics.audit.labels(_metrics.bounded("audit_action", action), outcome).inc()


def budget_breach(scope: str, name: str) -> None:
    """A budget was found spent and its lane held (`hookwise.server.runtime.budgets`)."""
    if _metrics is not None:
        _metrics.budget_breaches.labels(scope, _metrics.bounded("budget", name)).inc()


def alert_transition(rule: str, transition: str) -> None:
    """An alert of `rule` was `opened` or `resolved` (`hookwise.server.alerts.evaluator`)."""
    if _metrics is not None:
        _metrics.alert_transitions.labels(_metrics.bounded("alert", rule), transition).inc()


def alert_check_failed(rule: str) -> None:
    if _metrics is not None:
        _metrics.alert_check_failures.labels(_metrics.bounded("alert", rule)).inc()


def approval_decision(outcome: str) -> None:
    """An approval was decided (`approved`, `denied`, `timed_out`) or a decision `refused`."""
    if _metrics is not None:
        _metrics.approval_decisions.labels(outcome).inc()


def approval_ask(channel: str, outcome: str) -> None:
    """One try to ask for an approval on `channel`: `sent`, `retried` or `failed`."""
    if _metrics is not None:
        _metrics.approval_asks.labels(_metrics.bounded("channel", channel), outcome).inc()


def heartbeat(agent: str, outcome: str) -> None:
    if _metrics is not None:
        _metrics.heartbeats.labels(agent, outcome).inc()


# HTTP ----------------------------------------------------------------------------------------


class HttpMetrics:
    """ASGI middleware around the Litestar application: counts every HTTP response by route and
    status, times it, and counts 401s as authentication failures.

    `route` is the matched route's template (`/api/runs`, `/healthz`), and `other` when nothing
    matched, so a scan of random paths cannot grow the label set. The hook endpoint does not
    pass through here: it counts its own answers (`http_answered`) with the routes
    `<hook path>/wake`, `<hook path>/agent` and `<hook path>/{name}` (a mapped hook)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP or _metrics is None:
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._app(scope, receive, sending)
        finally:
            template = scope.get("path_template")
            route = template if isinstance(template, str) else "other"
            http_answered(route, status, time.perf_counter() - started)


def http_answered(route: str, status: int, seconds: float) -> None:
    """Count an HTTP answer (the hook endpoint calls this itself; the rest of the application
    is counted by `HttpMetrics`)."""
    if _metrics is None:
        return
    counter, histogram = _metrics.http_children(route, status)
    counter.inc()
    histogram.observe(seconds)
    if status == 401:
        _metrics.auth_failures.inc()


# exposition ----------------------------------------------------------------------------------


def render(
    queues: Mapping[str, tuple[int, float | None]],
    running: Mapping[str, tuple[int, float | None]] | None = None,
    pending_events: Mapping[str, int] | None = None,
    lanes: Sequence[tuple[str, str, int, float | None]] = (),
    breakers: Mapping[str, str] | None = None,
    budgets: Sequence[tuple[str, str, str, float, float]] = (),
    alerts: Mapping[str, int] | None = None,
    approvals: tuple[int, float | None] | None = None,
) -> bytes:
    """The scrape's body: every process's metrics plus the gauges read from the store: `queues`
    (name -> (depth, age in seconds of the oldest item or None)), `running` (agent -> (running
    runs, seconds since the oldest started)) and `pending_events` (main session -> events
    waiting for a heartbeat). Their labels are bounded by the configuration: agents and their
    main sessions. Then `hookwise_build_info` and the standard `process_*` series of the process
    that answers the scrape (with `--workers N`, one of the workers: CPU, memory, open files and
    start time are per process).

    `lanes` (agent, lane, depth, age of the oldest) adds the same two gauges per lane, labelled
    `{agent, lane}` beside the `{queue}` ones: runs queued or held per agent and mapping (`lane`
    is the mapping id, `direct` for `/hooks/agent`), bounded by the configuration (the caller
    folds lanes of mappings no longer loaded into `other`)."""
    from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.samples import Sample

    assert _metrics is not None
    if _metrics.multiprocess:
        from prometheus_client import multiprocess

        registry = CollectorRegistry(auto_describe=True)
        multiprocess.MultiProcessCollector(registry)
        body = generate_latest(registry)
    else:
        assert _metrics.registry is not None
        body = generate_latest(_metrics.registry)
    depth = GaugeMetricFamily(
        "hookwise_queue_depth", "Work waiting: queued runs, pending deliveries", labels=["queue"]
    )
    oldest = GaugeMetricFamily(
        "hookwise_queue_oldest_seconds",
        "Age of the oldest waiting item (0 when the queue is empty)",
        labels=["queue"],
    )
    for name in QUEUES:
        count, age = queues.get(name, (0, None))
        depth.add_metric([name], count)
        oldest.add_metric([name], age or 0.0)
    for agent, lane, count, age in lanes:
        labels = {"agent": agent, "lane": lane}
        depth.samples.append(Sample("hookwise_queue_depth", labels, count))
        oldest.samples.append(Sample("hookwise_queue_oldest_seconds", labels, age or 0.0))
    families = [depth, oldest]
    if running is not None:
        runs = GaugeMetricFamily(
            "hookwise_runs_running", "Agent runs running now, per agent", labels=["agent"]
        )
        runs_age = GaugeMetricFamily(
            "hookwise_runs_running_oldest_seconds",
            "Seconds since the oldest running run of an agent started (0 when none runs)",
            labels=["agent"],
        )
        for agent, (n, since) in sorted(running.items()):
            runs.add_metric([agent], n)
            runs_age.add_metric([agent], since or 0.0)
        families += [runs, runs_age]
    if pending_events is not None:
        pending = GaugeMetricFamily(
            "hookwise_events_pending",
            "Events waiting for a heartbeat, per main session",
            labels=["session"],
        )
        for session, n in sorted(pending_events.items()):
            pending.add_metric([session], n)
        families.append(pending)
    if breakers is not None:
        gauge = GaugeMetricFamily(
            "hookwise_model_breaker_state",
            "Each model's circuit breaker, from the store: 0 closed, 1 half-open, 2 open"
            " (models without recent failures are not listed)",
            labels=["model"],
        )
        for model, state in sorted(breakers.items()):
            gauge.add_metric([model], BREAKER_VALUES.get(state, 0))
        families.append(gauge)
    if budgets:
        spend = GaugeMetricFamily(
            "hookwise_budget_spend",
            "Spend in each budget's current window, from the store (tokens or cost)",
            labels=["scope", "name", "kind"],
        )
        limit = GaugeMetricFamily(
            "hookwise_budget_limit",
            "Each budget's limit per window (tokens or cost), from the configuration",
            labels=["scope", "name", "kind"],
        )
        for scope, name, kind, spent, ceiling in budgets:
            spend.add_metric([scope, name, kind], spent)
            limit.add_metric([scope, name, kind], ceiling)
        families += [spend, limit]
    if alerts:
        gauge = GaugeMetricFamily(
            "hookwise_alerts_open",
            "Alerts open or acknowledged (not resolved), from the store, per configured rule"
            " (alerts of rules no longer configured under `other`)",
            labels=["rule"],
        )
        for rule, n in sorted(alerts.items()):
            gauge.add_metric([rule], n)
        families.append(gauge)
    if approvals is not None:
        pending_n, pending_age = approvals
        families.append(
            GaugeMetricFamily(
                "hookwise_approvals_pending",
                "Tool calls waiting for a person's approval, from the store",
                value=pending_n,
            )
        )
        families.append(
            GaugeMetricFamily(
                "hookwise_approvals_oldest_seconds",
                "Age of the oldest pending approval (0 when none waits)",
                value=pending_age or 0.0,
            )
        )
    build = GaugeMetricFamily(
        "hookwise_build_info",
        "The running build (always 1): hookwise's version and Python's",
        labels=["version", "python"],
    )
    info = version_info()
    build.add_metric([info["version"], info["python"]], 1)
    families.append(build)
    gauges = CollectorRegistry(auto_describe=False)
    gauges.register(_Fixed(families))
    ProcessCollector(registry=gauges)
    return body + generate_latest(gauges)


class _Fixed:
    def __init__(self, families: list[Any]) -> None:
        self._families = families

    def collect(self) -> list[Any]:
        return self._families


# the multiprocess directory -------------------------------------------------------------------


def multiprocess_dir(state_dir: Path) -> Path:
    """A fresh directory for this service's workers: `<state dir>/metrics/<supervisor pid>`.

    Directories left by services that are gone (their supervisor's pid no longer runs) are
    removed; a service sharing the state dir (several gateways on PostgreSQL) keeps its own."""
    root = state_dir / "metrics"
    root.mkdir(parents=True, exist_ok=True)
    for old in root.iterdir():
        if old.name.isdigit() and not _alive(int(old.name)):
            shutil.rmtree(old, ignore_errors=True)
    mine = root / str(os.getpid())
    shutil.rmtree(mine, ignore_errors=True)
    mine.mkdir()
    return mine


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
