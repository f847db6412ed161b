"""`gateway.auth.tokens`: named admin tokens, each with its scopes, and the checks they need.

A scope is what a token may do with the admin API and the console: `read` sees the lists and
records, `operate` also acts on work (retry, replay, pause and resume, release, approve and deny,
acknowledge), `admin` may do everything (reload, configuration, deleting a kept payload).
`admin` implies `operate`, which implies `read`. The single `gateway.auth.token` is a token
named `admin` with the `admin` scope, so a configuration from before scopes works unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

import attrs

from ..errors import ConfigIssue

Scope = Literal["read", "operate", "admin"]

#: the scopes, weakest first: each implies the ones before it
SCOPES: tuple[str, ...] = ("read", "operate", "admin")

#: the name the single `gateway.auth.token` goes by (in the audit log, the console)
LEGACY_NAME = "admin"

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")


@attrs.frozen
class ScopedToken:
    """One entry of `gateway.auth.tokens`: who the token is (`name`, shown in the audit log),
    the secret itself (`${ENV}` like any secret) and what it may do."""

    name: str
    token: str
    scopes: tuple[Scope, ...] = ("read",)


def implied(scopes: Iterable[str]) -> frozenset[str]:
    """The scopes a token holds, with what each implies (`admin` -> all three)."""
    held = [SCOPES.index(s) for s in scopes if s in SCOPES]
    return frozenset(SCOPES[: max(held) + 1]) if held else frozenset()


def check_tokens(
    tokens: tuple[ScopedToken, ...],
    *,
    gateway_token: str | None,
    hook_token: str | None,
    min_length: int,
    issues: list[ConfigIssue],
    warnings: list[str],
) -> None:
    """Names unique and plain, tokens present, distinct from each other, from the gateway token
    and from the hook token, scopes given. Problems name the entry (`gateway.auth.tokens[2]`)."""
    names: dict[str, int] = {}
    secrets: dict[str, int] = {}
    for i, entry in enumerate(tokens):
        where = f"gateway.auth.tokens[{i}]"
        if not _NAME.match(entry.name):
            issues.append(
                ConfigIssue(
                    f"{where}.name",
                    "must be 1 to 64 letters, digits or . _ @ - (it is shown in the audit log)",
                )
            )
        elif entry.name in names:
            issues.append(
                ConfigIssue(f"{where}.name", f"duplicates gateway.auth.tokens[{names[entry.name]}]")
            )
        elif gateway_token and entry.name == LEGACY_NAME:
            issues.append(
                ConfigIssue(
                    f"{where}.name",
                    f"{LEGACY_NAME!r} is the name of gateway.auth.token; choose another name",
                )
            )
        names.setdefault(entry.name, i)
        if not entry.token:
            issues.append(ConfigIssue(f"{where}.token", "is required (a long random secret)"))
            continue
        if entry.token in secrets:
            issues.append(
                ConfigIssue(
                    f"{where}.token", f"is the token of gateway.auth.tokens[{secrets[entry.token]}]"
                )
            )
        elif gateway_token and entry.token == gateway_token:
            issues.append(ConfigIssue(f"{where}.token", "is gateway.auth.token; use another"))
        elif hook_token and entry.token == hook_token:
            issues.append(
                ConfigIssue(f"{where}.token", "must differ from hooks.token (the hook token)")
            )
        elif len(entry.token) < min_length:
            warnings.append(
                f"{where}.token is shorter than {min_length} characters; use a long random token"
            )
        secrets.setdefault(entry.token, i)
        if not entry.scopes:
            issues.append(
                ConfigIssue(f"{where}.scopes", "give at least one of read, operate, admin")
            )
