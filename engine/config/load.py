"""The configuration file: its loading, and the rules that span several keys (its models are in
`hookwise.engine.config.models`, `${NAME}` references in `hookwise.engine.envrefs`).

One file, YAML, JSON or JSON5 (chosen by extension), is read once, `${ENV_NAME}` references in
string values are resolved, and the data is structured into frozen attrs models (see
`hookwise.engine.config.convert` for the key conventions). Every problem is reported with its key path; rules
that involve several keys (an enabled hook interface needs a token, the hook token must differ
from the gateway token, ...) are checked here too. Nothing here touches the network.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ..envrefs import resolve_env
from ..errors import ConfigError, ConfigIssue
from ..yamlfile import YamlSyntaxError, load_yaml
from .convert import structure
from .grants import SERVER_NAME, Entry, check_grant
from .model_policy import model_list
from .models import (
    MIN_TOKEN_LENGTH,
    Config,
    LoadedConfig,
)
from .store_url import store_url_problem
from .tokens import check_tokens

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

    if config.store.url is not None:
        problem = store_url_problem(config.store.url)
        if problem is not None:
            issues.append(ConfigIssue("store.url", problem))

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
        signed_paths = {p.strip().strip("/") for p in hooks.verify}
        path_signed = (m.match.path or "").strip().strip("/") in signed_paths
        if m.budget is not None and m.budget.by_sender and m.verify is None and not path_signed:
            warnings.append(
                f"hooks.mappings[{i}].budget.by is sender, but no verify block checks this"
                " mapping's requests: its runs are all of the sender `token` (one allowance)"
            )

    check_tokens(
        config.gateway.auth.tokens,
        gateway_token=gateway_token,
        hook_token=token if hooks.enabled else None,
        min_length=MIN_TOKEN_LENGTH,
        issues=issues,
        warnings=warnings,
    )
    _check_tools(config, issues, warnings)
    _check_sources(config, issues)
    warnings.extend(unpriced_models(config))

    config = attrs.evolve(
        config,
        hooks=attrs.evolve(hooks, token=token, token_file=None, path=path),
        gateway=attrs.evolve(
            config.gateway,
            auth=attrs.evolve(config.gateway.auth, token=gateway_token, token_file=None),
        ),
    )
    return config, issues, warnings


def _check_sources(config: Config, issues: list[ConfigIssue]) -> None:
    """`sources`: unique names, and hooks enabled (a pulled message goes through the hook rules)."""
    seen: dict[str, int] = {}
    for i, source in enumerate(config.sources):
        if source.name in seen:
            issues.append(
                ConfigIssue(f"sources[{i}].name", f"duplicates sources[{seen[source.name]}].name")
            )
        seen.setdefault(source.name, i)
        if not config.hooks.enabled and source.enabled:
            issues.append(
                ConfigIssue(
                    f"sources[{i}]",
                    "needs hooks.enabled: true (its messages go through the hook rules)",
                )
            )


def model_lists(data: dict[str, Any], issues: list[ConfigIssue]) -> dict[str, Any]:
    """The data with every model chain given as a list (`agents.defaults.model`,
    `agents.list[i].model`, `hooks.mappings[i].model`) split into `model` and `fallbacks`."""
    agents = data.get("agents")
    if isinstance(agents, dict):
        agents = dict(agents)
        agents["defaults"] = model_list(agents.get("defaults"), "agents.defaults", issues)
        if agents["defaults"] is None:
            del agents["defaults"]
        if isinstance(agents.get("list"), list):
            agents["list"] = [
                model_list(a, f"agents.list[{i}]", issues) for i, a in enumerate(agents["list"])
            ]
        data = {**data, "agents": agents}
    hooks = data.get("hooks")
    if isinstance(hooks, dict) and isinstance(hooks.get("mappings"), list):
        mappings = [
            model_list(m, f"hooks.mappings[{i}]", issues) for i, m in enumerate(hooks["mappings"])
        ]
        data = {**data, "hooks": {**hooks, "mappings": mappings}}
    return data


def unpriced_models(config: Config) -> list[str]:
    """A warning for each model the configuration names (defaults, fallbacks, allowlists,
    agents, mappings' fixed models) of an HTTP provider without an entry in `models.prices`:
    its calls are recorded with cost null."""
    defaults = config.agents.defaults
    named: list[str] = [defaults.model, *defaults.fallbacks, *defaults.models]
    for a in config.agents.list:
        named += [a.model or "", *(a.fallbacks or ()), *(a.models or ())]
    for m in config.hooks.mappings:
        if m.model and "{" not in m.model:
            named.append(m.model)
        named += m.fallbacks
    paid = {pid for pid, pc in config.models.providers.items() if pc.api in ("openai", "anthropic")}
    missing = sorted(
        {
            ref.strip()
            for ref in named
            if ref.strip().partition("/")[0] in paid and ref.strip() not in config.models.prices
        }
    )
    return [
        f"models.prices has no price for {ref}: its calls are recorded with cost null"
        for ref in missing
    ]


def _check_tools(config: Config, issues: list[ConfigIssue], warnings: list[str]) -> None:
    """`tools.*` and the agents' grants (the mappings' are checked with the rules)."""
    tools = config.tools
    for name, server in tools.mcp_servers.items():
        where = f"tools.mcpServers.{name}"
        if not SERVER_NAME.fullmatch(name):
            issues.append(
                ConfigIssue(where, "a server name is 1 to 32 letters, digits, '-' or '_'")
            )
        if (server.command is None) == (server.url is None):
            issues.append(ConfigIssue(where, "give command (stdio) or url (Streamable HTTP)"))
        elif server.url is not None:
            if not server.url.startswith(("http://", "https://")):
                issues.append(ConfigIssue(f"{where}.url", "must be an http:// or https:// URL"))
            for key in ("args", "env", "cwd"):
                if getattr(server, key):
                    issues.append(ConfigIssue(f"{where}.{key}", "applies to a stdio server only"))
        elif server.headers:
            issues.append(ConfigIssue(f"{where}.headers", "applies to an HTTP server only"))
    for key in ("max_calls_per_run", "call_timeout_seconds", "max_result_bytes"):
        if getattr(tools, key) <= 0:
            camel = key.split("_")[0] + "".join(w.title() for w in key.split("_")[1:])
            issues.append(ConfigIssue(f"tools.{camel}", "must be positive"))
    servers = tools.mcp_servers.keys()
    defaults = config.agents.defaults
    grants: list[tuple[str, tuple[Entry, ...] | None, tuple[str, ...] | None]] = [
        ("agents.defaults.tools", defaults.tools, defaults.approve)
    ]
    grants += [
        (f"agents.list[{i}].tools", a.tools, a.approve) for i, a in enumerate(config.agents.list)
    ]
    issues.extend(config.approvals.check())
    for where, entries, approve in grants:
        more, notes = check_grant(entries, where, servers, approve)
        issues.extend(more)
        warnings.extend(notes)


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
    resolved = resolve_env(data, os.environ if env is None else env, "", issues)
    resolved = _channel_secret_files(resolved, base_dir, issues)  # type: ignore[arg-type]
    resolved = model_lists(resolved, issues)
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
    from .sessions import check_session_config  # it needs the models policy

    more, notes = check_session_config(config)
    issues.extend(more)
    warnings.extend(notes)
    faulty = frozenset(
        int(keys[2]) for keys in pruned if keys[:2] == ["hooks", "mappings"] and len(keys) > 2
    )
    loaded = LoadedConfig(
        config=config, source=source, warnings=tuple(warnings), faulty_mappings=faulty
    )
    return loaded, issues


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
