"""The scheme table as users read it: one row per name a verify block may give (`catalogue`),
for `hookwise webhooks schemes` and the manual. Derived from the schemes themselves, so it
cannot drift from what is checked."""

from __future__ import annotations

import re
from typing import Any

from .core import Scheme
from .schemes import ALIASES, GENERIC, NAMES, SCHEMES

_HEADER_IN_TEMPLATE = re.compile(r"\{header:([A-Za-z0-9_-]+)\}")
_IN_BODY = {"mailgun", "msgraph", "adyen", "braintree", "figma"}  # the proof is in the body


def _header_source(source: str | None) -> str | None:
    if source is None or source.startswith("$") or source in ("label", "body"):
        return None
    return source.removeprefix("header:")


def headers_of(scheme: Scheme) -> list[str]:
    """The request headers a scheme reads: the signature's first, then the signed timestamp's,
    the delivery id's and any other header it signs."""
    found: list[str] = [] if scheme.name in _IN_BODY else [scheme.signature.header]
    for source in (
        _header_source(scheme.timestamp),
        *_HEADER_IN_TEMPLATE.findall(scheme.signed),
        _header_source(scheme.delivery_id),
    ):
        if source is not None and source.lower() not in (h.lower() for h in found):
            found.append(source)
    return found


def describe(scheme: Scheme, name: str | None = None) -> dict[str, Any]:
    """One row: name, headers, signed content, algorithm, tolerance (seconds, or None when no
    timestamp is signed), delivery id (a header or a JSONPath), handshake, the doc line."""
    return {
        "name": name or scheme.name,
        "headers": headers_of(scheme),
        "signed": scheme.signed if scheme.parts is None and scheme.check is None else scheme.doc,
        "algorithm": scheme.algorithm,
        "encoding": scheme.encoding,
        "tolerance": scheme.tolerance,
        "timestamped": scheme.timestamped,
        "deliveryId": scheme.delivery_id,
        "handshake": scheme.handshake,
        "key": scheme.key,
        "doc": scheme.doc,
    }


def catalogue() -> list[dict[str, Any]]:
    """Every name a verify block may give, sorted; aliases say what they stand for."""
    rows: list[dict[str, Any]] = []
    for name in NAMES:
        if name in GENERIC:
            rows.append(
                {
                    "name": name,
                    "headers": ["(verify.header)"],
                    "signed": "verify.signed (default {body})",
                    "algorithm": "sha256" if name == "hmac-sha256" else "verify.algorithm",
                    "encoding": "verify.encoding",
                    "tolerance": 300.0,
                    "timestamped": None,
                    "deliveryId": None,
                    "handshake": None,
                    "key": "secret",
                    "doc": "a configurable HMAC: header, algorithm, encoding, prefix, signed,"
                    " timestampHeader (tolerance when a timestamp is signed)",
                }
            )
            continue
        row = describe(SCHEMES[ALIASES.get(name, name)], name)
        if name in ALIASES:
            row["aliasOf"] = ALIASES[name]
        rows.append(row)
    return rows
