"""The mail account's credential: resolved from the config value, a file, or a command.

The config loader has already replaced `${ENV}` references in inline values; a value that is
still exactly `${NAME}` (data that did not pass through the loader) is looked up here. Files are
read relative to the config file's folder. Commands run through the shell (like git credential
helpers; the config file is trusted) and are run again at each reconnect, so a command may print
a fresh OAuth2 access token each time. Secrets never appear in errors, logs or reprs.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import attrs

from ...engine.config.gmail import GmailConfig

_ENV_ONLY = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
COMMAND_TIMEOUT_SECONDS = 30


class SecretError(Exception):
    """The credential could not be obtained; the message says from where, never the value."""


@attrs.frozen
class Credential:
    """A password for LOGIN or an access token for AUTHENTICATE XOAUTH2."""

    kind: Literal["password", "oauth2"]
    secret: str = attrs.field(repr=False)


def resolve_credential(
    config: GmailConfig, *, base_dir: Path | None = None, env: Mapping[str, str] | None = None
) -> Credential:
    """The credential `config` names, read now. Raises `SecretError`."""
    env = os.environ if env is None else env
    base = base_dir or Path.cwd()
    kinds: tuple[tuple[Literal["password", "oauth2"], str], ...] = (
        ("password", "password"),
        ("oauth2", "oauth2Token"),
    )
    for kind, prefix in kinds:
        attr = "password" if kind == "password" else "oauth2_token"
        inline = getattr(config, attr)
        path = getattr(config, f"{attr}_file")
        command = getattr(config, f"{attr}_command")
        if inline is not None:
            return Credential(
                kind, _non_empty(_from_env(inline, env, f"hooks.gmail.{prefix}"), prefix)
            )
        if path is not None:
            return Credential(kind, _from_file(path, base, f"hooks.gmail.{prefix}File"))
        if command is not None:
            return Credential(kind, _from_command(command, base, f"hooks.gmail.{prefix}Command"))
    raise SecretError("hooks.gmail has no credential")


def _from_env(value: str, env: Mapping[str, str], where: str) -> str:
    m = _ENV_ONLY.match(value)
    if not m:
        return value
    if m.group(1) not in env:
        raise SecretError(f"{where}: environment variable {m.group(1)} is not set")
    return env[m.group(1)]


def _non_empty(value: str, where: str) -> str:
    if not value.strip():
        raise SecretError(f"hooks.gmail.{where} is empty")
    return value


def _from_file(name: str, base: Path, where: str) -> str:
    p = Path(name).expanduser()
    if not p.is_absolute():
        p = base / p
    try:
        value = p.read_text(encoding="utf-8").strip()
    except OSError as e:
        raise SecretError(f"{where}: cannot read {p}: {e.strerror}") from None
    if not value:
        raise SecretError(f"{where}: {p} is empty")
    return value


def _from_command(command: str, base: Path, where: str) -> str:
    try:
        done = subprocess.run(
            command,
            shell=True,
            cwd=base,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise SecretError(
            f"{where}: the command did not finish in {COMMAND_TIMEOUT_SECONDS} s"
        ) from None
    except OSError as e:
        raise SecretError(f"{where}: the command could not be run: {e.strerror}") from None
    if done.returncode != 0:
        raise SecretError(f"{where}: the command exited with status {done.returncode}")
    value = done.stdout.strip()
    if not value:
        raise SecretError(f"{where}: the command printed nothing")
    return value


__all__ = ["Credential", "SecretError", "resolve_credential"]
