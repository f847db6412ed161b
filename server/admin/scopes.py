"""Who is asking the admin API or the console, and whether their token's scopes allow the route.

`TokenTable` holds the configured admin tokens (`gateway.auth.tokens`, and the single
`gateway.auth.token` as `admin` with the `admin` scope) and finds the one presented: every entry
is compared, in constant time, whatever matched first, so neither a token's content nor its place
in the list shows in the timing. The match is a `Principal` (the token's name and its scopes,
with what they imply).

Each route declares the scope it needs in its options: `opt=requires("operate", audit="retry")`
(`audit` names the action the audit log records; see `admin.audit`). A route without a declared
scope needs `read` when it only reads (GET, HEAD) and `admin` otherwise, so a new route that
changes something is closed to weaker tokens until it says otherwise. `admin_guard` applies this
to the admin API; the console applies the same rule to its pages and forms (`console.door`).
A token without the scope gets `403 insufficient_scope`, naming the scope it lacked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from typing import Any

import attrs

from ...engine.config.models import GatewayAuthConfig
from ...engine.config.tokens import LEGACY_NAME, SCOPES, implied
from ...engine.errors import RequestError
from ..ingress.auth import TokenCheck

#: where a request's principal is kept in the ASGI scope's state (the audit log reads it)
PRINCIPAL = "hookwise_principal"
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@attrs.frozen
class Principal:
    """An authenticated operator: the name of the token used and the scopes it holds."""

    name: str
    scopes: frozenset[str]

    def can(self, scope: str) -> bool:
        return scope in self.scopes

    @property
    def top(self) -> str:
        """The strongest scope held (`admin`, `operate` or `read`)."""
        return max(self.scopes, key=SCOPES.index) if self.scopes else ""


class TokenTable:
    """The admin tokens of the configuration; `match` finds the presented one."""

    def __init__(self, entries: list[tuple[str, str, frozenset[str]]]) -> None:
        self._entries = [(name, TokenCheck(token), scopes) for name, token, scopes in entries]
        material = hashlib.sha256()
        for name, token, scopes in sorted(entries):
            material.update(f"{name}\0{token}\0{','.join(sorted(scopes))}\0".encode())
        #: changes whenever a token, a name or a scope changes (the console's signing key)
        self.fingerprint = material.digest()

    @classmethod
    def of(cls, auth: GatewayAuthConfig) -> TokenTable | None:
        """The table of a loaded configuration; None when no admin token is configured."""
        entries = [(t.name, t.token, implied(t.scopes)) for t in auth.tokens if t.token]
        if auth.token:
            entries.insert(0, (LEGACY_NAME, auth.token, implied(["admin"])))
        return cls(entries) if entries else None

    def match(self, presented: str) -> Principal | None:
        found: Principal | None = None
        for name, check, scopes in self._entries:  # no early exit: the same work for any token
            if check.matches(presented) and found is None:
                found = Principal(name, scopes)
        return found

    def named(self, name: str) -> Principal | None:
        """The principal of the token called `name` (a console session's), or None."""
        for entry, _, scopes in self._entries:
            if entry == name:
                return Principal(entry, scopes)
        return None


@attrs.frozen
class ScopeRefused(RequestError):
    """`403 insufficient_scope`: the body names the scope lacked (`scope`)."""

    scope: str = "admin"

    def to_body(self) -> dict[str, object]:
        return {**super().to_body(), "scope": self.scope}


def requires(scope: str, *, audit: str | None = None) -> dict[str, Any]:
    """A route's options: the scope it needs and, for an operator action, the audit action."""
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}")
    opt: dict[str, Any] = {"scope": scope}
    if audit is not None:
        opt["audit"] = audit
    return opt


def required_scope(opt: Mapping[str, Any], methods: Collection[Any]) -> str:
    """The scope a route needs: as declared, else `read` for reads and `admin` for the rest."""
    declared = opt.get("scope")
    if isinstance(declared, str):
        return declared
    return (
        "read"
        if methods and {str(getattr(m, "value", m)) for m in methods} <= READ_METHODS
        else "admin"
    )


def check_scope(principal: Principal, needed: str) -> None:
    if not principal.can(needed):
        raise ScopeRefused(
            403,
            "insufficient_scope",
            f"the token {principal.name!r} lacks the {needed!r} scope this needs",
            scope=needed,
        )


def principal_of(scope: Mapping[str, Any]) -> Principal | None:
    found = scope.get("state", {}).get(PRINCIPAL)
    return found if isinstance(found, Principal) else None


def set_principal(scope: dict[str, Any], principal: Principal) -> None:
    scope.setdefault("state", {})[PRINCIPAL] = principal
