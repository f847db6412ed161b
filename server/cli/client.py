"""A small client of the admin API for the command line: the URL, the token, JSON in and out.

The token comes from `HOOKWISE_ADMIN_TOKEN` or the config's `gateway.auth.token` (only that key
of the file is read), never from the command line (where every user of the machine could read it in the process list). Errors come
back as `AdminError` with the API's message and code. Retries are sent as the local user
(`X-Hookwise-Actor`), which the gateway records with them.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

DEFAULT_URL = "http://127.0.0.1:8787"
TOKEN_ENV = "HOOKWISE_ADMIN_TOKEN"
URL_ENV = "HOOKWISE_URL"


class AdminError(Exception):
    """The gateway refused a request, or could not be reached."""

    def __init__(self, message: str, code: str = "error", status: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


def find_token(config_path: str | None, *, explicit: bool = True) -> str:
    """The admin token: `HOOKWISE_ADMIN_TOKEN`, else the config's `gateway.auth.token` (or
    `tokenFile`). Only that key is read (its `${NAME}` resolved), so the other secrets the file
    references need not be set. A default config (`explicit` False) that does not exist is
    passed over; a named one must exist."""
    token = os.environ.get(TOKEN_ENV, "").strip()
    if token:
        return token
    if config_path and (explicit or Path(config_path).exists()):
        found = config_token(Path(config_path))
        if found:
            return found
        where = f"{config_path} has no gateway.auth.token"
    else:
        where = f"no config file {config_path}" if config_path else "no config file"
    raise AdminError(
        f"no admin token: set {TOKEN_ENV}, or name a config with gateway.auth.token "
        f"(-c FILE or $HOOKWISE_CONFIG; {where})",
        "no_token",
    )


def config_token(path: Path) -> str | None:
    """`gateway.auth.token` (or the file `gateway.auth.tokenFile` names, relative to the config's
    folder) of the config at `path`, without loading the rest of it."""
    from ...engine.config.load import read_file
    from ...engine.envrefs import resolve_env
    from ...engine.errors import ConfigError, ConfigIssue

    try:
        data = read_file(path)
    except ConfigError as e:
        raise AdminError(str(e.issues[0].message), "bad_config") from None
    gateway = data.get("gateway") if isinstance(data, dict) else None
    auth = gateway.get("auth") if isinstance(gateway, dict) else None
    if not isinstance(auth, dict):
        return None
    issues: list[ConfigIssue] = []
    token = resolve_env(auth.get("token"), os.environ, "gateway.auth.token", issues)
    name = resolve_env(auth.get("tokenFile"), os.environ, "gateway.auth.tokenFile", issues)
    if issues:
        raise AdminError(f"{path}: {issues[0].path}: {issues[0].message}", "bad_config")
    if isinstance(token, str) and token.strip():
        return token.strip()
    if isinstance(name, str) and name.strip():
        file = Path(name.strip())
        file = file if file.is_absolute() else path.parent / file
        try:
            return file.read_text(encoding="utf-8").strip() or None
        except OSError as e:
            raise AdminError(
                f"{path}: gateway.auth.tokenFile: cannot read {file}: {e.strerror}", "bad_config"
            ) from None
    return None


class AdminClient:
    """Requests to one gateway's admin API."""

    def __init__(self, url: str, token: str, *, timeout: float = 30.0) -> None:
        self._http = httpx.Client(
            base_url=url.rstrip("/"),
            headers={
                "Authorization": f"Bearer {token}",
                "X-Hookwise-Actor": _user(),
            },
            timeout=timeout,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        return self._send("GET", path, params={k: v for k, v in params.items() if v is not None})

    def post(self, path: str, body: Any = None) -> dict[str, Any]:
        return self._send("POST", path, json=body)

    def pages(self, path: str, *, limit: int | None, **params: Any) -> Iterator[dict[str, Any]]:
        """The items of a listing, newest first, following cursors until `limit` (or the end)."""
        cursor = None
        left = limit
        while left is None or left > 0:
            size = 500 if left is None else min(500, left)
            page = self.get(path, limit=size, cursor=cursor, **params)
            yield from page["items"]
            if left is not None:
                left -= len(page["items"])
            cursor = page.get("nextCursor")
            if cursor is None:
                return

    def _send(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            r = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as e:
            raise AdminError(
                f"cannot reach the gateway at {self._http.base_url}: {e}", "unreachable"
            ) from None
        try:
            body = r.json()
        except ValueError:
            raise AdminError(
                f"{method} {path}: HTTP {r.status_code} without a JSON answer", "bad_answer"
            ) from None
        if r.status_code >= 400 or not isinstance(body, dict) or body.get("ok") is False:
            message = body.get("error", f"HTTP {r.status_code}") if isinstance(body, dict) else ""
            code = body.get("code", "error") if isinstance(body, dict) else "error"
            raise AdminError(str(message), str(code), r.status_code)
        return body


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment
        return "cli"
