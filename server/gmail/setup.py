"""`hookwise webhooks gmail setup`: write the configuration for the mail-provider preset.

It enables hooks, generates a strong hook token when there is none (`hooks.token` and
`hooks.tokenFile` absent), adds `gmail` to `hooks.presets`, and writes the `hooks.gmail` block.
Before writing anything it logs in to the IMAP server with the given credential and opens the
folder, and it says what failed if that does not work. Nothing is written then.

Idempotent: a value already as wanted is left alone and an unchanged file is not rewritten, so a
second run with the same arguments changes nothing. YAML files are edited with ruamel.yaml's
round-trip mode, which keeps the other keys, their order and the comments. JSON and JSON5 files
are rewritten as JSON (JSON5 comments are lost; the report says so).

Secrets are not copied into the file: `--password-file` is written as `passwordFile`,
`--password-env VAR` as `password: ${VAR}` (resolved by the config loader at start).
"""

from __future__ import annotations

import io
import json
import os
import secrets
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from ...engine.config.convert import structure
from ...engine.config.gmail import GMAIL_IMAP_HOST, GmailConfig
from ...engine.errors import ConfigError
from .imap import ImapError, Mailbox
from .secrets import SecretError, resolve_credential

_CREDENTIAL_KEYS = (
    "password",
    "passwordFile",
    "passwordCommand",
    "oauth2Token",
    "oauth2TokenFile",
    "oauth2TokenCommand",
)
_YAML_SUFFIXES = (".yaml", ".yml")
_NEW_YAML_HEADER = "# hookwise configuration\n"


class SetupError(Exception):
    """Setup could not be completed; nothing was written. The message says what failed."""


@attrs.frozen
class SetupReport:
    """What `run_setup` did, and what to run next."""

    config_path: Path
    created: bool
    changed: bool
    actions: tuple[str, ...]
    login_checked: bool
    next_command: str
    notes: tuple[str, ...] = ()

    def render(self) -> str:
        lines: list[str] = []
        if self.login_checked:
            lines.append("IMAP login checked: OK")
        if not self.changed:
            lines.append(f"{self.config_path}: already set up; nothing changed.")
        else:
            verb = "created" if self.created else "updated"
            lines.append(f"{self.config_path}: {verb}.")
            lines.extend(f"  - {a}" for a in self.actions)
        lines.extend(f"Note: {n}" for n in self.notes)
        lines.append(f"Next: {self.next_command}")
        lines.append("  (or `hookwise serve` with this config, which starts the watcher itself)")
        return "\n".join(lines)


def run_setup(
    config_path: str | Path,
    *,
    account: str,
    imap_host: str | None = None,
    imap_port: int | None = None,
    tls: str | None = None,
    password_file: str | None = None,
    password_env: str | None = None,
    password_command: str | None = None,
    oauth2_token_file: str | None = None,
    oauth2_token_env: str | None = None,
    oauth2_token_command: str | None = None,
    label: str = "INBOX",
    hook_url: str | None = None,
    check_login: bool = True,
    env: Mapping[str, str] | None = None,
    token_factory: Callable[[], str] = lambda: secrets.token_urlsafe(32),
) -> SetupReport:
    """Write the `gmail` preset's configuration into `config_path` (created when missing).

    Exactly one credential option may be given; with none, the credential already in
    `hooks.gmail` is kept. Raises `SetupError` (and writes nothing) when the arguments, the
    existing file or the IMAP login check fail.
    """
    path = Path(config_path)
    env = os.environ if env is None else env
    doc, original_text, fmt = _read(path)
    if not isinstance(doc, dict):
        raise SetupError(f"{path}: the top level must be a mapping")
    hooks = doc.get("hooks")
    if hooks is None:
        hooks = _new_map(fmt)
        doc["hooks"] = hooks
    if not isinstance(hooks, dict):
        raise SetupError(f"{path}: hooks must be a mapping")
    current = hooks.get("gmail")
    if current is not None and not isinstance(current, dict):
        raise SetupError(f"{path}: hooks.gmail must be a mapping")

    wanted = _wanted_gmail(
        current or {},
        account=account,
        imap_host=imap_host,
        imap_port=imap_port,
        tls=tls,
        label=label,
        hook_url=hook_url,
        credential={
            "passwordFile": password_file,
            "password": f"${{{password_env}}}" if password_env else None,
            "passwordCommand": password_command,
            "oauth2TokenFile": oauth2_token_file,
            "oauth2Token": f"${{{oauth2_token_env}}}" if oauth2_token_env else None,
            "oauth2TokenCommand": oauth2_token_command,
        },
    )
    try:
        config = structure(_plain(wanted), GmailConfig, "hooks.gmail")
    except ConfigError as e:
        raise SetupError(f"the hooks.gmail block would be invalid:\n{e}") from None

    if check_login:
        _check_login(config, path.parent.resolve(), env)

    actions: list[str] = []
    if hooks.get("enabled") is not True:
        hooks["enabled"] = True
        actions.append("enabled hooks (hooks.enabled: true)")
    if not hooks.get("token") and not hooks.get("tokenFile"):
        hooks["token"] = token_factory()
        actions.append("generated a new hook token (hooks.token)")
    presets = hooks.get("presets")
    if presets is None:
        hooks["presets"] = _new_list(fmt, ["gmail"])
        actions.append("enabled the gmail preset (hooks.presets)")
    elif not isinstance(presets, list):
        raise SetupError(f"{path}: hooks.presets must be a list")
    elif "gmail" not in presets:
        presets.append("gmail")
        actions.append("added gmail to hooks.presets")
    if current is None:
        block = _new_map(fmt)
        hooks["gmail"] = block
        actions.append("wrote the hooks.gmail block")
    else:
        block = current
    changed_keys = _merge(block, wanted)
    if current is not None and changed_keys:
        actions.append("updated hooks.gmail: " + ", ".join(changed_keys))

    created = original_text is None
    notes: list[str] = []
    if actions or created:
        text = _dump(doc, fmt)
        if text != original_text:
            _write_atomic(path, text, created)
        if fmt == "json5" and not created:
            notes.append("the JSON5 file was rewritten as plain JSON; its comments are gone")
    if password_env and password_env not in env:
        notes.append(f"set {password_env} in the environment before starting hookwise")
    return SetupReport(
        config_path=path,
        created=created,
        changed=bool(actions) or created,
        actions=tuple(actions),
        login_checked=check_login,
        next_command=f"hookwise webhooks gmail run --config {path}",
        notes=tuple(notes),
    )


def _wanted_gmail(
    current: Mapping[str, Any],
    *,
    account: str,
    imap_host: str | None,
    imap_port: int | None,
    tls: str | None,
    label: str,
    hook_url: str | None,
    credential: Mapping[str, str | None],
) -> dict[str, Any]:
    given = {k: v for k, v in credential.items() if v is not None}
    if len(given) > 1:
        raise SetupError(
            "give only one credential option (password file, env or command, or token)"
        )
    wanted: dict[str, Any] = {k: v for k, v in current.items()}
    wanted["account"] = account
    wanted["imapHost"] = imap_host or current.get("imapHost") or GMAIL_IMAP_HOST
    if imap_port is not None:
        wanted["imapPort"] = imap_port
    if tls is not None:
        wanted["tls"] = tls
    wanted["label"] = label
    if hook_url is not None:
        wanted["hookUrl"] = hook_url
    if given:
        for k in _CREDENTIAL_KEYS:
            wanted.pop(k, None)
        wanted.update(given)
    elif not any(k in current for k in _CREDENTIAL_KEYS):
        raise SetupError(
            "no credential given: use --password-file FILE or --password-env VAR "
            "(or --password-command, --oauth2-token-file/-env/-command)"
        )
    return wanted


def _check_login(config: GmailConfig, base_dir: Path, env: Mapping[str, str]) -> None:
    where = f"{config.imap_host}:{config.port}"
    try:
        credential = resolve_credential(config, base_dir=base_dir, env=env)
    except SecretError as e:
        raise SetupError(f"cannot read the credential: {e}. Nothing was written.") from None
    try:
        box = Mailbox.open(config, credential)
    except ImapError as e:
        raise SetupError(f"IMAP login check failed ({where}): {e}. Nothing was written.") from None
    try:
        box.select(config.label, config.skip_folders)
    except ImapError as e:
        raise SetupError(f"IMAP folder check failed ({where}): {e}. Nothing was written.") from None
    finally:
        box.close()


def _merge(block: dict[str, Any], wanted: Mapping[str, Any]) -> list[str]:
    """Make `block` equal `wanted`, touching only keys that differ. Returns the keys changed."""
    changed = []
    for key in list(block):
        if key not in wanted:
            del block[key]
            changed.append(key)
    for key, value in wanted.items():
        if key not in block or block[key] != value:
            block[key] = value
            changed.append(key)
    return changed


# -- file formats ------------------------------------------------------------------------------


def _fmt(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in _YAML_SUFFIXES:
        return "yaml"
    if suffix in (".json", ".json5"):
        return suffix[1:]
    raise SetupError(f"{path}: unknown extension; use .yaml, .yml, .json or .json5")


def _yaml() -> Any:
    from ruamel.yaml import YAML

    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.indent(mapping=2, sequence=4, offset=2)
    y.width = 4096
    return y


def _read(path: Path) -> tuple[Any, str | None, str]:
    fmt = _fmt(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return _new_map(fmt), None, fmt
    except OSError as e:
        raise SetupError(f"cannot read {path}: {e.strerror}") from None
    try:
        if fmt == "yaml":
            data = _yaml().load(text)
        elif fmt == "json5":
            import json5

            data = json5.loads(text) if text.strip() else {}
        else:
            data = json.loads(text) if text.strip() else {}
    except Exception as e:
        raise SetupError(f"{path} is not valid {fmt.upper()}: {e}") from None
    if data is None:
        data = _new_map(fmt)
    return data, text, fmt


def _new_map(fmt: str) -> dict[str, Any]:
    if fmt == "yaml":
        from ruamel.yaml.comments import CommentedMap

        return CommentedMap()
    return {}


def _new_list(fmt: str, items: list[Any]) -> list[Any]:
    if fmt == "yaml":
        from ruamel.yaml.comments import CommentedSeq

        return CommentedSeq(items)
    return list(items)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value


def _dump(doc: Any, fmt: str) -> str:
    if fmt == "yaml":
        buf = io.StringIO()
        _yaml().dump(doc, buf)
        text = buf.getvalue()
        return text
    return json.dumps(_plain(doc), indent=2, ensure_ascii=False) + "\n"


def _write_atomic(path: Path, text: str, created: bool) -> None:
    if created and path.suffix.lower() in _YAML_SUFFIXES:
        text = _NEW_YAML_HEADER + text
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = 0o600 if created else (path.stat().st_mode & 0o777)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


__all__ = ["SetupError", "SetupReport", "run_setup"]
