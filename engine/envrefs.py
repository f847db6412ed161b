"""`${NAME}` references in configuration values, resolved from an environment given by the caller
(the engine reads no environment itself): in the config file and in rule files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .errors import ConfigIssue

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def resolve_env(
    data: object, env: Mapping[str, str], path: str, issues: list[ConfigIssue]
) -> object:
    """`data` with every `${NAME}` in its strings replaced by `env[NAME]`; an unset name is an
    issue at its key path (and resolves to the empty string)."""
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
        return [resolve_env(v, env, f"{path}[{i}]", issues) for i, v in enumerate(data)]
    if isinstance(data, dict):
        return {
            k: resolve_env(v, env, f"{path}.{k}" if path else str(k), issues)
            for k, v in data.items()
        }
    return data
