"""The configuration file: its models, its loading, and the rules that span several keys.

One file, YAML, JSON or JSON5 (chosen by extension), is read once, `${ENV_NAME}` references in
string values are resolved, and the data is structured into frozen attrs models (see
`hookwise.engine.convert` for the key conventions). Every problem is reported with its key path; rules
that involve several keys (an enabled hook interface needs a token, the hook token must differ
from the gateway token, ...) are checked here too. Nothing here touches the network.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from hookwise.engine.convert import converter, structure
from hookwise.engine.durations import Duration
from hookwise.engine.errors import ConfigError, ConfigIssue
from hookwise.engine.gmail_config import GmailConfig
from hookwise.engine.mapping import MappingConfig, VerifyConfig
from hookwise.engine.yamlfile import YamlSyntaxError, load_yaml

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
    reservations)."""

    timeout_ms: int = 1000
    memory_mb: int = 64
    pool_size: int = 2
    workers: int = 2
    worker_memory_mb: int = 512


@attrs.frozen
class RetainPayloadsConfig:
    """`hooks.retainPayloads`: keep each request's raw body and headers (auth headers and the
    `token` query parameter removed) for this long, so it can be replayed; off when absent."""

    keep_for: Duration = attrs.field(metadata={"key": "for"})


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
    # the session-key policy (see hookwise.engine.sessions)
    allow_request_session_key: bool = True
    allowed_session_key_prefixes: tuple[str, ...] | None = None
    default_session_key: str | None = None
    # which agents an explicit `agentId` may name (None: any; `*`: any; empty: none)
    allowed_agent_ids: tuple[str, ...] | None = None
    retain_payloads: RetainPayloadsConfig | None = None


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


@attrs.frozen
class AgentEntry:
    """`agents.list[i]`: one agent; every value left out is taken from `agents.defaults`."""

    id: str
    default: bool = False
    name: str | None = None
    model: str | None = None
    models: tuple[str, ...] | dict[str, ModelEntry] | None = None
    system_prompt: str | None = None
    heartbeat: HeartbeatOverride | None = None
    timeout_seconds: float | None = None
    max_concurrent_runs: int | None = None


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
    """`models.*`: the model providers by id."""

    providers: dict[str, ProviderConfig] = attrs.field(factory=dict)


@attrs.frozen
class GatewayAuthConfig:
    """`gateway.auth`: the gateway's own token (protects the admin API)."""

    token: str | None = None
    token_file: str | None = None


@attrs.frozen
class MetricsConfig:
    """`gateway.metrics`: `GET /metrics` (Prometheus), behind the gateway token unless public."""

    enabled: bool = True
    public: bool = False


@attrs.frozen
class GatewayConfig:
    """`gateway.*`.

    `trustedProxies`: addresses or CIDRs of reverse proxies whose `X-Forwarded-For`/`Forwarded`
    name the client (see `hookwise.server.proxies`); `maxHeaderBytes`: the request line and
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
    interval: Duration = Duration(300)
    batch_size: int = 500


@attrs.frozen
class LoggingConfig:
    """`logging.*`: how log lines are written (`--log-format` overrides `format`)."""

    format: Literal["text", "json"] = "text"


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


@attrs.frozen
class LoadedConfig:
    """A validated configuration with what was learnt while loading it."""

    config: Config
    source: Path | None
    warnings: tuple[str, ...] = ()

    @property
    def base_dir(self) -> Path:
        return self.source.parent if self.source else Path.cwd()


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


# ---------------------------------------------------------------------------------------------
# reading


def _parse(text: str, suffix: str, name: str) -> object:
    if suffix in (".yaml", ".yml"):
        return load_yaml(text, name)
    if suffix == ".json5":
        import json5

        return json5.loads(text)
    return json.loads(text)


def read_file(path: Path) -> object:
    """Read a config file by extension: .yaml/.yml, .json, .json5."""
    suffix = path.suffix.lower()
    if suffix not in (".yaml", ".yml", ".json", ".json5"):
        raise ConfigError(
            [ConfigIssue("", f"{path}: unknown extension; use .yaml, .json or .json5")]
        )
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError([ConfigIssue("", f"cannot read {path}: {e.strerror}")]) from None
    try:
        data = _parse(text, suffix, str(path))
    except YamlSyntaxError as e:
        raise ConfigError([ConfigIssue("", f"{path} is not valid YAML: {e.where}")]) from None
    except Exception as e:
        raise ConfigError(
            [ConfigIssue("", f"{path} is not valid {suffix[1:].upper()}: {e}")]
        ) from None
    return {} if data is None else data


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _resolve_env(
    data: object, env: Mapping[str, str], path: str, issues: list[ConfigIssue]
) -> object:
    if isinstance(data, str):
        if "${" not in data:
            return data

        def sub(m: re.Match[str]) -> str:
            name = m.group(1)
            if name not in env:
                issues.append(ConfigIssue(path, f"environment variable {name} is not set"))
                return ""
            return env[name]

        return _ENV_REF.sub(sub, data)
    if isinstance(data, list):
        return [_resolve_env(v, env, f"{path}[{i}]", issues) for i, v in enumerate(data)]
    if isinstance(data, dict):
        return {
            k: _resolve_env(v, env, f"{path}.{k}" if path else str(k), issues)
            for k, v in data.items()
        }
    return data


def normalize_hook_path(raw: str) -> str | None:
    """`hooks///` -> `/hooks`, `x` -> `/x`; `/` (or empty) -> None, which is an error."""
    trimmed = raw.strip().strip("/")
    trimmed = re.sub(r"/+", "/", trimmed)
    return f"/{trimmed}" if trimmed else None


def _read_secret_file(
    name: str, base_dir: Path, path: str, issues: list[ConfigIssue]
) -> str | None:
    p = Path(name)
    if not p.is_absolute():
        p = base_dir / p
    try:
        value = p.read_text(encoding="utf-8").strip()
    except OSError as e:
        issues.append(ConfigIssue(path, f"cannot read {p}: {e.strerror}"))
        return None
    if not value:
        issues.append(ConfigIssue(path, f"{p} is empty"))
        return None
    return value


def _check(config: Config, base_dir: Path) -> tuple[Config, list[ConfigIssue], list[str]]:
    issues: list[ConfigIssue] = []
    warnings: list[str] = []
    hooks = config.hooks

    token = hooks.token
    if hooks.token_file:
        if token:
            issues.append(
                ConfigIssue("hooks.tokenFile", "give hooks.token or hooks.tokenFile, not both")
            )
        else:
            token = _read_secret_file(hooks.token_file, base_dir, "hooks.tokenFile", issues)
    gateway_token = config.gateway.auth.token
    if config.gateway.auth.token_file:
        if gateway_token:
            issues.append(
                ConfigIssue(
                    "gateway.auth.tokenFile", "give gateway.auth.token or tokenFile, not both"
                )
            )
        else:
            gateway_token = _read_secret_file(
                config.gateway.auth.token_file, base_dir, "gateway.auth.tokenFile", issues
            )

    path = normalize_hook_path(hooks.path)
    if path is None:
        issues.append(ConfigIssue("hooks.path", "must not be '/'; use a sub-path such as /hooks"))
        path = "/hooks"

    if hooks.enabled:
        if not token:
            issues.append(
                ConfigIssue(
                    "hooks.token", "is required when hooks.enabled is true (or use hooks.tokenFile)"
                )
            )
        elif gateway_token and token == gateway_token:
            issues.append(
                ConfigIssue(
                    "hooks.token", "must differ from gateway.auth.token; use a dedicated hook token"
                )
            )
        elif len(token) < MIN_TOKEN_LENGTH:
            warnings.append(
                f"hooks.token is shorter than {MIN_TOKEN_LENGTH} characters; use a long random token"
            )
    if hooks.max_body_bytes <= 0:
        issues.append(ConfigIssue("hooks.maxBodyBytes", "must be a positive number of bytes"))

    defaults = config.agents.defaults
    if defaults.timeout_seconds <= 0:
        issues.append(ConfigIssue("agents.defaults.timeoutSeconds", "must be positive"))
    if defaults.max_timeout_seconds < defaults.timeout_seconds:
        issues.append(
            ConfigIssue(
                "agents.defaults.maxTimeoutSeconds",
                "must be at least agents.defaults.timeoutSeconds",
            )
        )
    if config.retention.interval <= 0:
        issues.append(ConfigIssue("retention.interval", "must be a positive duration"))
    if config.retention.batch_size < 1:
        issues.append(ConfigIssue("retention.batchSize", "must be at least 1"))
    if defaults.max_concurrent_runs < 1:
        issues.append(ConfigIssue("agents.defaults.maxConcurrentRuns", "must be at least 1"))

    seen_ids: dict[str, int] = {}
    for i, m in enumerate(hooks.mappings):
        if m.id is not None:
            if m.id in seen_ids:
                issues.append(
                    ConfigIssue(
                        f"hooks.mappings[{i}].id", f"duplicates hooks.mappings[{seen_ids[m.id]}].id"
                    )
                )
            seen_ids[m.id] = i

    if config.session.last_route is None:
        pass

    config = attrs.evolve(
        config,
        hooks=attrs.evolve(hooks, token=token, token_file=None, path=path),
        gateway=attrs.evolve(
            config.gateway,
            auth=attrs.evolve(config.gateway.auth, token=gateway_token, token_file=None),
        ),
    )
    return config, issues, warnings


def _channel_secret_files(
    data: dict[str, Any], base_dir: Path, issues: list[ConfigIssue]
) -> dict[str, Any]:
    """`channels.<id>.<key>File: path` -> `<key>: <the file's content>`, for any credential."""
    channels = data.get("channels")
    if not isinstance(channels, dict):
        return data
    out: dict[str, Any] = {}
    for cid, block in channels.items():
        if not isinstance(block, dict):
            out[cid] = block
            continue
        fixed = dict(block)
        for key, value in block.items():
            if not (isinstance(key, str) and key.endswith("File") and len(key) > 4):
                continue
            target, path = key[:-4], f"channels.{cid}.{key}"
            del fixed[key]
            if target in block:
                issues.append(ConfigIssue(path, f"give {target} or {key}, not both"))
            elif not isinstance(value, str):
                issues.append(ConfigIssue(path, "must be a file path"))
            else:
                secret = _read_secret_file(value, base_dir, path, issues)
                if secret is not None:
                    fixed[target] = secret
        out[cid] = fixed
    return {**data, "channels": out}


def load_data(
    data: object, *, source: Path | None = None, env: Mapping[str, str] | None = None
) -> LoadedConfig:
    """Validate already-parsed config data. Raises `ConfigError` with every problem."""
    loaded, issues = check_data(data, source=source, env=env)
    if issues or loaded is None:
        raise ConfigError(issues)
    return loaded


def check_data(
    data: object, *, source: Path | None = None, env: Mapping[str, str] | None = None
) -> tuple[LoadedConfig | None, list[ConfigIssue]]:
    """Every problem of the config data in one pass, and the configuration without the keys at
    fault (their defaults in their place), so that later checks (rules, channels, providers) can
    go on and report theirs too. None when nothing usable is left (not a mapping)."""
    if not isinstance(data, dict):
        return None, [ConfigIssue("", "the configuration must be a mapping at the top level")]
    issues: list[ConfigIssue] = []
    base_dir = source.parent if source else Path.cwd()
    resolved = _resolve_env(data, os.environ if env is None else env, "", issues)
    resolved = _channel_secret_files(resolved, base_dir, issues)  # type: ignore[arg-type]
    pruned: list[list[str | int]] = []
    config = None
    while config is None:
        try:
            config = structure(resolved, Config)
        except ConfigError as e:
            before = resolved
            for issue in e.issues:
                keys = _key_path(issue.path)
                if any(keys[: len(p)] == p for p in pruned):
                    # a consequence of a key taken away ("required key is missing"): the same
                    # problem, said once; take the enclosing value away instead
                    keys = keys[:-1]
                elif issue not in issues:
                    issues.append(issue)
                resolved = _without(resolved, keys)
                pruned.append(keys)
            if resolved == before:  # nothing left to take away: give up on the rest
                return None, issues
    config, more, warnings = _check(config, base_dir)
    issues.extend(m for m in more if not any(_key_path(m.path)[: len(p)] == p for p in pruned))
    from hookwise.engine.sessions import check_session_config  # it needs the models policy

    more, notes = check_session_config(config)
    issues.extend(more)
    warnings.extend(notes)
    return LoadedConfig(config=config, source=source, warnings=tuple(warnings)), issues


_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _key_path(path: str) -> list[str | int]:
    """`hooks.mappings[1].action` -> `["hooks", "mappings", 1, "action"]`."""
    return [int(i) if i else k for k, i in _PATH_PART.findall(path)]


def _without(data: Any, keys: list[str | int]) -> Any:
    """A copy of `data` without the value at `keys` (unchanged when there is none)."""
    if not keys:
        return data
    head, rest = keys[0], keys[1:]
    if isinstance(data, dict) and isinstance(head, str) and head in data:
        if not rest:
            return {k: v for k, v in data.items() if k != head}
        return {**data, head: _without(data[head], rest)}
    if isinstance(data, list) and isinstance(head, int) and 0 <= head < len(data):
        if not rest:
            return data[:head] + data[head + 1 :]
        return [*data[:head], _without(data[head], rest), *data[head + 1 :]]
    return data


def check_config(
    path: str | Path, *, env: Mapping[str, str] | None = None
) -> tuple[LoadedConfig | None, list[ConfigIssue]]:
    """`check_data` for a file. A file that cannot be read or parsed is one problem and None."""
    p = Path(path).resolve()
    try:
        data = read_file(p)
    except ConfigError as e:
        return None, e.issues
    return check_data(data, source=p, env=env)


def load_config(path: str | Path, *, env: Mapping[str, str] | None = None) -> LoadedConfig:
    """Read and validate a config file. Raises `ConfigError` with every problem and its key path."""
    p = Path(path).resolve()
    return load_data(read_file(p), source=p, env=env)
