"""The configuration's models: one frozen attrs class per block of the file, with its defaults.

Structured from the file's data by `hookwise.engine.config.convert` (camelCase keys, unknown keys
refused); loading, `${NAME}` references and the checks that span several keys are in
`hookwise.engine.config.load`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import attrs

from ..errors import ConfigIssue
from .alerts import AlertsConfig
from .approvals import ApprovalsConfig
from .budgets import BudgetConfig
from .convert import converter, structure
from .durations import Duration
from .gmail import GmailConfig
from .grants import Entry
from .limits import HookLimitsConfig
from .mapping import MappingConfig, VerifyConfig
from .prices import BreakerConfig, PriceConfig
from .sources import SourceConfig
from .tokens import ScopedToken

MIN_TOKEN_LENGTH = 24


@attrs.frozen
class AuthThrottleConfig:
    """Lock-out of a client address after repeated authentication failures."""

    max_failures: int = 20
    window_seconds: Duration = Duration(60)
    lockout_seconds: Duration = Duration(60)


@attrs.frozen
class TransformLimitsConfig:
    """Per-call limits for sandboxed transforms, and the sandbox worker processes that run them
    (`workers` processes, each with an OS memory ceiling of `workerMemoryMb` beyond V8's start-up
    reservations, each replaced after `workerRecycleCalls` calls or once its resident memory has
    grown `workerRecycleMb` past what it was when it started)."""

    timeout_ms: int = 1000
    memory_mb: int = 64
    pool_size: int = 2
    workers: int = 2
    worker_memory_mb: int = 512
    worker_recycle_calls: int = 10_000
    worker_recycle_mb: int = 64


@attrs.frozen
class RetainPayloadsConfig:
    """`hooks.retainPayloads`: keep each authenticated request's raw body and headers (auth
    headers and the `token` query parameter removed) for `for` (default 7 days), so it can be
    replayed after a rule is fixed; a body larger than `maxBytes` is not kept. On by default
    for mapped hooks (where a rule can be fixed); `builtIn` keeps `/wake` and `/agent` requests
    too (the default when the block is written, so a config that asked for them keeps them);
    `enabled: false` keeps none."""

    keep_for: Duration = attrs.field(default=Duration(7 * 24 * 3600), metadata={"key": "for"})
    max_bytes: int = attrs.field(default=262144, validator=attrs.validators.ge(0))
    enabled: bool = True
    built_in: bool | None = None

    @property
    def keeps_built_in(self) -> bool:
        """Whether `/wake` and `/agent` requests, and the results of tool calls, are kept too
        (unsaid in a written block: yes, as before payloads were kept by default; the default
        block keeps mapped hooks' requests only)."""
        return self.built_in is not False


#: the limit of `hooks.maxWait`: a held request is a held connection (and proxies give up)
MAX_WAIT = 300.0


def _at_most_max_wait(_: object, __: attrs.Attribute, value: float) -> None:
    if value > MAX_WAIT:
        raise ValueError(f"must be at most {MAX_WAIT:g} seconds")


@attrs.frozen
class HooksConfig:
    """`hooks.*`: the inbound webhook interface."""

    enabled: bool = False
    token: str | None = None
    token_file: str | None = None
    path: str = "/hooks"
    presets: tuple[str, ...] = ()
    mappings: tuple[MappingConfig, ...] = ()
    rules: tuple[str, ...] = ()
    # Path-level signature checks: every rule on the path requires the block.
    verify: dict[str, VerifyConfig] = attrs.field(factory=dict)
    transforms_dir: str | None = None
    max_body_bytes: int = 262144
    body_timeout_seconds: Duration = Duration(30)
    idempotency_window: Duration = Duration(24 * 3600)
    auth_throttle: AuthThrottleConfig = attrs.field(factory=AuthThrottleConfig)
    transform_limits: TransformLimitsConfig = attrs.field(factory=TransformLimitsConfig)
    gmail: GmailConfig | None = None
    # the session-key policy (see hookwise.engine.config.sessions)
    allow_request_session_key: bool = True
    allowed_session_key_prefixes: tuple[str, ...] | None = None
    default_session_key: str | None = None
    # which agents an explicit `agentId` may name (None: any; `*`: any; empty: none)
    allowed_agent_ids: tuple[str, ...] | None = None
    #: kept payloads, for replay: on by default for mapped hooks (7 days, 256 KiB each); null or
    #: `enabled: false` keeps none
    retain_payloads: RetainPayloadsConfig | None = attrs.field(
        factory=lambda: RetainPayloadsConfig(built_in=False)
    )
    # rate and concurrency limits of the built-in paths (mappings carry their own)
    limits: HookLimitsConfig = attrs.field(factory=HookLimitsConfig)
    #: the longest a request may be held open for its run's outcome (`wait`); at most MAX_WAIT
    max_wait: Duration = attrs.field(default=Duration(30), validator=_at_most_max_wait)

    @property
    def payload_retention(self) -> RetainPayloadsConfig | None:
        """How long and how large payloads are kept, or None when none are."""
        retain = self.retain_payloads
        return retain if retain is not None and retain.enabled else None


@attrs.frozen
class ModelEntry:
    """One allowed model in `agents.defaults.models` when given as a map."""

    alias: str | None = None


@attrs.frozen
class HeartbeatConfig:
    """`agents.defaults.heartbeat`: the main session's periodic check."""

    every: Duration = Duration(30 * 60)
    ack_max_chars: int = 300
    coalesce_ms: int = 250


@attrs.frozen
class HeartbeatOverride:
    """`agents.list[i].heartbeat`: the keys it sets replace the defaults' (`HeartbeatConfig`);
    the others are taken from `agents.defaults.heartbeat`."""

    every: Duration | None = None
    ack_max_chars: int | None = None
    coalesce_ms: int | None = None

    def over(self, base: HeartbeatConfig) -> HeartbeatConfig:
        """`base` with the keys this block sets."""
        return attrs.evolve(
            base, **{k: v for k, v in attrs.asdict(self, recurse=False).items() if v is not None}
        )


@attrs.frozen
class AgentDefaults:
    """`agents.defaults`: the model, its allowlist, and how runs are bounded."""

    model: str = "echo/echo"
    #: the models tried in turn when `model` is unavailable (see docs/accounting.md)
    fallbacks: tuple[str, ...] = ()
    models: tuple[str, ...] | dict[str, ModelEntry] = ()
    timeout_seconds: float = 600
    max_timeout_seconds: float = 3600
    max_concurrent_runs: int = 4
    max_attempts: int = 3
    #: a claimed run's lease is its timeout plus this; a run whose process died is taken over
    #: by another process once the lease has expired
    lease_grace_seconds: float = 60
    heartbeat: HeartbeatConfig = attrs.field(factory=HeartbeatConfig)
    fallback_channel: str | None = None
    #: the tools (`server.tool`, `server.*`) of an `/agent` run and of heartbeats; none if unset
    tools: tuple[Entry, ...] = ()
    #: globs (`server.tool` patterns) of granted tools whose calls wait for approval
    approve: tuple[str, ...] = ()
    #: each agent's own budget unless it sets one (see `hookwise.engine.config.budgets`)
    budget: BudgetConfig | None = None


@attrs.frozen
class AgentEntry:
    """`agents.list[i]`: one agent; every value left out is taken from `agents.defaults`."""

    id: str
    default: bool = False
    name: str | None = None
    model: str | None = None
    fallbacks: tuple[str, ...] | None = None
    models: tuple[str, ...] | dict[str, ModelEntry] | None = None
    system_prompt: str | None = None
    heartbeat: HeartbeatOverride | None = None
    timeout_seconds: float | None = None
    max_concurrent_runs: int | None = None
    tools: tuple[Entry, ...] | None = None
    approve: tuple[str, ...] | None = None
    budget: BudgetConfig | None = None


@attrs.frozen
class AgentsConfig:
    """`agents.*`: the defaults, and the agents (none listed: one agent, `main`)."""

    defaults: AgentDefaults = attrs.field(factory=AgentDefaults)
    list: tuple[AgentEntry, ...] = ()


@attrs.frozen
class ProviderConfig:
    """`models.providers.<id>`: how to reach one model provider.

    `api` is the wire protocol: `openai` (Chat Completions), `anthropic` (Messages), `command`
    (a local program: prompt on stdin, reply on stdout) or `echo` (built in). For `anthropic`,
    `maxTokens` is the reply's `max_tokens` (default 4096) and `thinkingMode` how a thinking
    level is requested: `auto` by the model's family (adaptive thinking with an effort for
    Claude 4.6 and later, a token budget before), or always `adaptive` or `budget`.
    """

    api: Literal["openai", "anthropic", "command", "echo"]
    base_url: str | None = None
    api_key: str | None = None
    api_key_file: str | None = None
    headers: dict[str, str] = attrs.field(factory=dict)
    command: tuple[str, ...] = ()
    timeout_seconds: float = 120
    max_retries: int = 3
    max_tokens: int | None = None
    thinking_mode: Literal["auto", "adaptive", "budget"] = "auto"


@attrs.frozen
class ModelsConfig:
    """`models.*`: the model providers by id, the price table (`prices`, by
    `provider/model`; see `hookwise.engine.config.prices`) and the circuit breakers of model
    fallback chains (`breaker`)."""

    providers: dict[str, ProviderConfig] = attrs.field(factory=dict)
    prices: dict[str, PriceConfig] = attrs.field(factory=dict)
    breaker: BreakerConfig = attrs.field(factory=BreakerConfig)


@attrs.frozen
class GatewayAuthConfig:
    """`gateway.auth`: the gateway's own token (protects the admin API and the console), and
    named tokens with scopes (`tokens`, see `hookwise.engine.config.tokens`); the single `token`
    is the `admin` scope."""

    token: str | None = None
    token_file: str | None = None
    tokens: tuple[ScopedToken, ...] = ()


@attrs.frozen
class MetricsConfig:
    """`gateway.metrics`: `GET /metrics` (Prometheus), behind the gateway token unless public."""

    enabled: bool = True
    public: bool = False


@attrs.frozen
class GatewayConfig:
    """`gateway.*`.

    `trustedProxies`: addresses or CIDRs of reverse proxies whose `X-Forwarded-For`/`Forwarded`
    name the client (see `hookwise.server.ingress.proxies`); `maxHeaderBytes`: the request line and
    headers together (431 beyond it, before authentication); `headerTimeoutSeconds`: how long a
    request's line and headers may take to arrive (408, then the connection is closed).
    """

    auth: GatewayAuthConfig = attrs.field(factory=GatewayAuthConfig)
    metrics: MetricsConfig = attrs.field(factory=MetricsConfig)
    trusted_proxies: tuple[str, ...] = ()
    max_header_bytes: int = 32768
    header_timeout_seconds: Duration = Duration(10)


@attrs.frozen
class RouteConfig:
    """A delivery route: a channel and a recipient on it."""

    channel: str
    to: str


@attrs.frozen
class SessionConfig:
    """`session.*`: the main session's initial state."""

    last_route: RouteConfig | None = None


@attrs.frozen
class StoreConfig:
    """`store.*`: where state lives. Default: SQLite under the state dir."""

    url: str | None = None
    synchronous: Literal["full", "normal"] = "full"
    #: SQLite's writer: a process of its own (no wait for the gateway's GIL), or a thread
    writer: Literal["process", "thread"] = "process"


@attrs.frozen
class DeliveryConfig:
    """`delivery.*`: how the delivery worker retries sends to channels."""

    max_attempts: int = 8
    base_delay_seconds: float = 2.0
    max_delay_seconds: float = 300.0
    concurrency: int = 4


_DAY = 86400


@attrs.frozen
class RetentionConfig:
    """`retention.*`: how long finished records are kept (0 keeps them forever), and how often
    the pruning runs. Queued, running and pending work is never pruned."""

    runs: Duration = Duration(30 * _DAY)
    events: Duration = Duration(30 * _DAY)
    deliveries: Duration = Duration(30 * _DAY)
    heartbeats: Duration = Duration(30 * _DAY)
    transcripts: Duration = Duration(90 * _DAY)
    requests: Duration = Duration(30 * _DAY)
    #: the audit log of operator actions (`GET /api/audit`)
    audit: Duration = Duration(365 * _DAY)
    interval: Duration = Duration(300)
    batch_size: int = 500


@attrs.frozen
class LoggingConfig:
    """`logging.*`: how log lines are written (`--log-format` overrides `format`)."""

    format: Literal["text", "json"] = "text"


def _ratio(_: object, __: attrs.Attribute, value: float | None) -> None:
    if value is not None and not 0 <= value <= 1:
        raise ValueError("must be between 0 and 1")


@attrs.frozen
class TracesConfig:
    """`telemetry.traces`: OpenTelemetry traces over OTLP/HTTP (protobuf), off by default.

    Tracing is on when `enabled` is true, or, with `enabled` unset, when the standard
    `OTEL_TRACES_EXPORTER` is `otlp`; `OTEL_SDK_DISABLED=true` turns it off whatever the file says.
    Each key left unset takes the standard variable: `endpoint` (the collector's base URL, to which
    `/v1/traces` is added) `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`,
    `serviceName` `OTEL_SERVICE_NAME` (else `hookwise`), `sampleRatio` (a parent-based ratio)
    `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`. `maxQueueSize` bounds the spans waiting for
    export: past it spans are dropped and counted (`hookwise_trace_spans_dropped_total`).
    The request's stages (auth, door, rule, transform, commit) are timed on the request's span
    (`hookwise.stages: auth=21us ...`); a stage that fails or takes `slowStageMs` or longer
    is also a child span, and `stages: true` makes every stage one (each span costs the hook
    path microseconds of CPU).
    """

    enabled: bool | None = None
    endpoint: str | None = None
    service_name: str | None = None
    sample_ratio: float | None = attrs.field(default=None, validator=_ratio)
    max_queue_size: int = attrs.field(default=2048, validator=attrs.validators.ge(1))
    stages: bool = False
    slow_stage_ms: float = attrs.field(default=100.0, validator=attrs.validators.ge(0))
    #: one export's timeout, seconds (the exporter's own thread waits, never a request)
    export_timeout_seconds: float = attrs.field(default=10.0, validator=attrs.validators.gt(0))


@attrs.frozen
class TelemetryConfig:
    """`telemetry.*`: what the gateway tells an observability system (see docs/tracing.md)."""

    traces: TracesConfig = attrs.field(factory=TracesConfig)


@attrs.frozen
class McpServerConfig:
    """`tools.mcpServers.<name>`: one MCP server, named as MCP clients name them.

    stdio: `command` (with `args`, `env` added to the gateway's environment, `cwd` relative to
    the config file's folder); Streamable HTTP: `url` (with `headers`). `${NAME}` references are
    resolved at load, like everywhere in the file.
    """

    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = attrs.field(factory=dict, repr=False)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = attrs.field(factory=dict, repr=False)

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "http" if self.url else "stdio"


@attrs.frozen
class ToolsConfig:
    """`tools.*`: the MCP servers whose tools runs may be granted, and the limits of the run
    loop (tool calls per run, one call's timeout, the bytes of a result the model sees)."""

    mcp_servers: dict[str, McpServerConfig] = attrs.field(factory=dict)
    max_calls_per_run: int = 8
    call_timeout_seconds: float = 30
    max_result_bytes: int = 65536


#: the lifecycle events a subscriber may ask for (`events.subscribers[].types`)
EVENT_TYPES = (
    "run.finished",
    "run.succeeded",
    "run.failed",
    "run.timed_out",
    "delivery.failed",
)


def _event_types(_: object, __: attrs.Attribute, value: tuple[str, ...]) -> None:
    unknown = [t for t in value if t not in EVENT_TYPES]
    if unknown or not value:
        raise ValueError(f"must name some of {', '.join(EVENT_TYPES)} (unknown: {unknown})")


def _http_url(_: object, __: attrs.Attribute, value: str) -> None:
    if not value.startswith(("http://", "https://")):
        raise ValueError("must be an absolute http:// or https:// URL")


def _whsec(_: object, __: attrs.Attribute, value: str) -> None:
    if not value.startswith("whsec_"):
        raise ValueError("must be whsec_ followed by base64 (a Standard Webhooks secret)")


@attrs.frozen
class SubscriberConfig:
    """One receiver of the gateway's lifecycle events, signed as Standard Webhooks."""

    url: str = attrs.field(validator=_http_url)
    secret: str = attrs.field(repr=False, validator=_whsec)
    types: tuple[str, ...] = attrs.field(default=("run.finished",), validator=_event_types)


@attrs.frozen
class EventsConfig:
    """`events.*`: who is told what the gateway did (durable, signed deliveries)."""

    subscribers: tuple[SubscriberConfig, ...] = ()


@attrs.frozen
class Config:
    """The whole configuration file."""

    hooks: HooksConfig = attrs.field(factory=HooksConfig)
    agents: AgentsConfig = attrs.field(factory=AgentsConfig)
    models: ModelsConfig = attrs.field(factory=ModelsConfig)
    channels: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    gateway: GatewayConfig = attrs.field(factory=GatewayConfig)
    session: SessionConfig = attrs.field(factory=SessionConfig)
    store: StoreConfig = attrs.field(factory=StoreConfig)
    delivery: DeliveryConfig = attrs.field(factory=DeliveryConfig)
    logging: LoggingConfig = attrs.field(factory=LoggingConfig)
    retention: RetentionConfig = attrs.field(factory=RetentionConfig)
    tools: ToolsConfig = attrs.field(factory=ToolsConfig)
    #: pull sources: message brokers whose messages enter the hook rules (`server.sources`)
    sources: tuple[SourceConfig, ...] = ()
    events: EventsConfig = attrs.field(factory=EventsConfig)
    #: rules that open alerts and tell a person (`hookwise.server.alerts`)
    alerts: AlertsConfig = attrs.field(factory=AlertsConfig)
    telemetry: TelemetryConfig = attrs.field(factory=TelemetryConfig)
    #: who decides the calls that wait for approval, where they are asked, how long they wait
    approvals: ApprovalsConfig = attrs.field(factory=ApprovalsConfig)


@attrs.frozen
class LoadedConfig:
    """A validated configuration with what was learnt while loading it."""

    config: Config
    source: Path | None
    warnings: tuple[str, ...] = ()
    #: `hooks.mappings[i]` whose keys were at fault and set aside (their defaults in their place):
    #: later checks of those rules would report the defaults, not the file
    faulty_mappings: frozenset[int] = frozenset()

    @property
    def base_dir(self) -> Path:
        return self.source.parent if self.source else Path.cwd()

    def beside_faults(self, issues: Iterable[ConfigIssue]) -> list[ConfigIssue]:
        """`issues` without those about a mapping already reported as faulty."""
        return [
            i
            for i in issues
            if not any(i.path.startswith(f"hooks.mappings[{n}]") for n in self.faulty_mappings)
        ]

    def warnings_beside_faults(self, warnings: Iterable[str]) -> list[str]:
        """`warnings` without those about a mapping already reported as faulty."""
        return [
            w
            for w in warnings
            if not any(f"hooks.mappings[{n}]" in w for n in self.faulty_mappings)
        ]


def _structure_models(value: object, _: Any) -> tuple[str, ...] | dict[str, ModelEntry]:
    if isinstance(value, list):
        return structure(value, tuple[str, ...])
    if isinstance(value, dict):
        return {str(k): structure(v if v is not None else {}, ModelEntry) for k, v in value.items()}
    raise ValueError("must be a list of provider/model strings or a map of them")


converter.register_structure_hook(tuple[str, ...] | dict[str, ModelEntry], _structure_models)
converter.register_structure_hook(
    tuple[str, ...] | dict[str, ModelEntry] | None,
    lambda v, t: None if v is None else _structure_models(v, t),
)
