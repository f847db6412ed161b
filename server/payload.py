"""Turning a request body into the payload object rules and validation see.

JSON is the default whatever the content type says (as the peer does), except that
`application/x-www-form-urlencoded` bodies are parsed as forms (unless the body is plainly JSON,
as `curl -d '{...}'` sends it): repeated keys become lists, and a
form whose only field is `payload` holding a JSON object (how GitHub sends form-encoded hooks) is
that object. An empty body is `{}`. Anything else that is not a JSON object is refused with 400.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

import msgspec

from hookwise.engine.errors import RequestError

_decode = msgspec.json.Decoder().decode


def content_type(headers: list[tuple[bytes, bytes]]) -> bytes:
    for name, value in headers:
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower()
    return b""


def _form(body: bytes) -> dict[str, Any]:
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise RequestError(400, "invalid_body", "the form body is not valid UTF-8") from None
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            prev = out[key]
            out[key] = [*prev, value] if isinstance(prev, list) else [prev, value]
        else:
            out[key] = value
    if list(out) == ["payload"] and isinstance(out["payload"], str):
        try:
            inner = _decode(out["payload"])
        except msgspec.DecodeError:
            return out
        if isinstance(inner, dict):
            return inner
    return out


def parse_payload(body: bytes, ctype: bytes) -> dict[str, Any]:
    """The payload object of a request body, or a 400 `RequestError`."""
    if not body.strip():
        return {}
    if ctype == b"application/x-www-form-urlencoded" and body.lstrip()[:1] not in (b"{", b"["):
        return _form(body)
    try:
        value = _decode(body)
    except msgspec.DecodeError:
        raise RequestError(400, "invalid_json", "the body is not valid JSON") from None
    if not isinstance(value, dict):
        raise RequestError(400, "invalid_body", "the body must be a JSON object")
    return value
