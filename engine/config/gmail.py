"""`hooks.gmail`: the mail watcher's configuration (the IMAP account it watches and how).

The block names one IMAP account (Gmail by default, any IMAP server works), the credential to log
in with, the folder ("label") to watch, and the knobs of the watch loop. Credentials come in one
of three forms for each kind: inline (usually a `${ENV}` reference the config loader resolved),
a file, or a command whose standard output is the secret. Files and commands are resolved by the
watcher (`hookwise.server.gmail.secrets`), never here: the engine only holds data.

Cross-key rules are checked in `__attrs_post_init__`, so the loader reports them at
`hooks.gmail` like any other problem.
"""

from __future__ import annotations

from typing import Literal

import attrs

from .durations import Duration

GMAIL_IMAP_HOST = "imap.gmail.com"
MAX_IDLE_SECONDS = 29 * 60
"""RFC 2177: servers may log a client out after 30 minutes of inactivity, IDLE included."""

DEFAULT_SKIP_FOLDERS: tuple[str, ...] = (
    "Spam",
    "Junk",
    "Trash",
    "Bin",
    "Drafts",
    "Sent",
    "Sent Mail",
    "Sent Items",
    "[Gmail]/Spam",
    "[Gmail]/Trash",
    "[Gmail]/Bin",
    "[Gmail]/Drafts",
    "[Gmail]/Sent Mail",
)
"""Folder names never watched (matched case-insensitively). Folders with the RFC 6154 special-use
flags \\Junk, \\Trash, \\Drafts and \\Sent are skipped whatever their name."""

_IDLE = Duration(MAX_IDLE_SECONDS)
_MINUTE = Duration(60)
_FIVE_MINUTES = Duration(300)
_SECOND = Duration(1)
_HALF_SECOND = Duration(0.5)
_PASSWORD_KEYS = ("password", "password_file", "password_command")
_OAUTH_KEYS = ("oauth2_token", "oauth2_token_file", "oauth2_token_command")


@attrs.frozen
class GmailConfig:
    """The mail watcher's settings (`hooks.gmail`).

    Exactly one credential is required: `password` / `passwordFile` / `passwordCommand` for
    LOGIN (a Gmail app password), or `oauth2Token` / `oauth2TokenFile` / `oauth2TokenCommand`
    for AUTHENTICATE XOAUTH2 (a command is run again at each reconnect, so it may print a fresh
    access token).
    """

    account: str
    enabled: bool = True
    imap_host: str = GMAIL_IMAP_HOST
    imap_port: int | None = None
    tls: Literal["implicit", "starttls", "none"] = "implicit"
    password: str | None = attrs.field(default=None, repr=False)
    password_file: str | None = None
    password_command: str | None = None
    oauth2_token: str | None = attrs.field(default=None, repr=False)
    oauth2_token_file: str | None = None
    oauth2_token_command: str | None = None
    label: str = "INBOX"
    skip_folders: tuple[str, ...] = DEFAULT_SKIP_FOLDERS
    max_bytes: int = 20000
    snippet_chars: int = 200
    hook_url: str | None = None
    idle_seconds: Duration = _IDLE
    poll_seconds: Duration = _MINUTE
    timeout_seconds: Duration = _MINUTE
    reconnect_min_seconds: Duration = _SECOND
    reconnect_max_seconds: Duration = _FIVE_MINUTES
    retry_min_seconds: Duration = _HALF_SECOND
    retry_max_seconds: Duration = _MINUTE

    def __attrs_post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def port(self) -> int:
        """The IMAP port: `imapPort`, else 993 for implicit TLS and 143 otherwise."""
        if self.imap_port is not None:
            return self.imap_port
        return 993 if self.tls == "implicit" else 143

    @property
    def uses_oauth2(self) -> bool:
        return any(getattr(self, k) is not None for k in _OAUTH_KEYS)

    def resolve_hook_url(self, port: int, hook_path: str = "/hooks") -> str:
        """`hookUrl`, else the local gateway's `{hook_path}/gmail` on 127.0.0.1:`port`."""
        if self.hook_url:
            return self.hook_url
        return f"http://127.0.0.1:{port}/{hook_path.strip('/')}/gmail"


def _problems(c: GmailConfig) -> list[str]:
    out: list[str] = []
    if not c.account.strip():
        out.append("account must not be empty")
    given = [k for k in (*_PASSWORD_KEYS, *_OAUTH_KEYS) if getattr(c, k) is not None]
    names = ", ".join(_camel(k) for k in (*_PASSWORD_KEYS, *_OAUTH_KEYS))
    if not given:
        out.append(f"a credential is required: set one of {names}")
    elif len(given) > 1:
        out.append("set only one credential, found " + ", ".join(_camel(k) for k in given))
    if c.imap_port is not None and not 0 < c.imap_port < 65536:
        out.append("imapPort must be between 1 and 65535")
    if not c.label.strip():
        out.append("label must not be empty")
    if c.max_bytes <= 0:
        out.append("maxBytes must be a positive number of bytes")
    if c.snippet_chars <= 0:
        out.append("snippetChars must be positive")
    if not 0 < c.idle_seconds <= MAX_IDLE_SECONDS:
        out.append(f"idleSeconds must be above 0 and at most {MAX_IDLE_SECONDS} (29 minutes)")
    for name in ("poll_seconds", "timeout_seconds", "reconnect_min_seconds", "retry_min_seconds"):
        if getattr(c, name) <= 0:
            out.append(f"{_camel(name)} must be positive")
    if c.reconnect_max_seconds < c.reconnect_min_seconds:
        out.append("reconnectMaxSeconds must be at least reconnectMinSeconds")
    if c.retry_max_seconds < c.retry_min_seconds:
        out.append("retryMaxSeconds must be at least retryMinSeconds")
    if c.hook_url is not None and not c.hook_url.startswith(("http://", "https://")):
        out.append("hookUrl must be an http:// or https:// URL")
    return out


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)
