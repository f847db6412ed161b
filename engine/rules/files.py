"""Where rules come from: `hooks.mappings`, the rule files of `hooks.rules` (files or globs,
`${NAME}` resolved from the environment given) and the presets of `hooks.presets`
(`rules/presets/<name>.yaml`), gathered in the order they are tried, each with where it was
written (for error messages) and the folder a relative `verify.secretFile` is found in.
"""

from __future__ import annotations

import glob
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from ..config.convert import structure
from ..config.mapping import MappingConfig
from ..config.model_policy import model_list
from ..envrefs import resolve_env
from ..errors import ConfigError, ConfigIssue
from ..yamlfile import YamlSyntaxError, load_yaml


def _presets_dir() -> Path:
    # `rules/` sits beside `engine/` both in the repository and installed (`hookwise/rules`).
    return Path(__file__).resolve().parents[2] / "rules" / "presets"


def available_presets() -> list[str]:
    """Names usable in `hooks.presets`."""
    return sorted(p.stem for p in _presets_dir().glob("*.yaml"))


@attrs.frozen
class RuleEntry:
    """A mapping and where it was written."""

    config: MappingConfig
    where: str
    file: str | None
    folder: Path  # where a relative `verify.secretFile` is found


def _resolved(
    item: object, env: Mapping[str, str] | None, where: str, issues: list[ConfigIssue]
) -> object:
    """`item` with `${NAME}` references resolved from `env` (left alone when env is None)."""
    return item if env is None else resolve_env(item, env, where, issues)


def _read_rule_file(
    path: Path, shown: str, issues: list[ConfigIssue], env: Mapping[str, str] | None = None
) -> list[RuleEntry]:
    try:
        data = load_yaml(path.read_text(encoding="utf-8"), shown)
    except OSError as exc:
        issues.append(ConfigIssue("", f"cannot read rule file: {exc.strerror or exc}", file=shown))
        return []
    except YamlSyntaxError as exc:
        issues.append(ConfigIssue("", f"invalid YAML: {exc.where}", file=shown))
        return []
    if data is None:
        return []
    if not isinstance(data, list):
        issues.append(ConfigIssue("", "a rule file must hold a list of mappings", file=shown))
        return []
    entries = []
    for i, item in enumerate(data):
        rule_id = item.get("id") if isinstance(item, dict) else None
        found: list[ConfigIssue] = []
        try:
            resolved = model_list(_resolved(item, env, f"[{i}]", found), f"[{i}]", found)
            config = structure(resolved, MappingConfig, f"[{i}]")
            if not found:
                entries.append(RuleEntry(config, f"[{i}]", shown, path.parent))
        except ConfigError as exc:
            found.extend(exc.issues)
        issues.extend(
            attrs.evolve(x, file=shown, rule_id=rule_id if isinstance(rule_id, str) else None)
            for x in found
        )
    return entries


def _rule_file_paths(pattern: str, base: Path) -> list[Path]:
    full = Path(pattern).expanduser()
    if not full.is_absolute():
        full = base / full
    if glob.has_magic(pattern):
        return [Path(p) for p in sorted(glob.glob(str(full), recursive=True)) if Path(p).is_file()]
    return [full]


def gather(
    mappings: Sequence[MappingConfig],
    presets: Sequence[str],
    rule_files: Sequence[str],
    base: Path,
    env: Mapping[str, str] | None,
    issues: list[ConfigIssue],
) -> list[RuleEntry]:
    """Every mapping in the order rules are tried; problems go to `issues` (a file that cannot
    be read or parsed contributes none of its rules)."""
    entries = [RuleEntry(m, f"hooks.mappings[{i}]", None, base) for i, m in enumerate(mappings)]
    for i, pattern in enumerate(rule_files):
        paths = _rule_file_paths(pattern, base)
        if not glob.has_magic(pattern) and not paths[0].is_file():
            issues.append(ConfigIssue(f"hooks.rules[{i}]", f"rule file not found: {pattern}"))
            continue
        for path in paths:
            entries.extend(_read_rule_file(path, _shown(path, base), issues, env or {}))
    presets_dir = _presets_dir()
    for i, name in enumerate(presets):
        path = presets_dir / f"{name}.yaml"
        if not name.replace("-", "_").isidentifier() or not path.is_file():
            known = ", ".join(available_presets()) or "none"
            issues.append(
                ConfigIssue(f"hooks.presets[{i}]", f"unknown preset {name!r} (known: {known})")
            )
            continue
        entries.extend(_read_rule_file(path, f"preset {name}", issues))
    return entries


def _shown(path: Path, base: Path) -> str:
    try:
        return str(path.resolve().relative_to(base))
    except ValueError:
        return str(path)
