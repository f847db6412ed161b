"""Turning a request body into the payload object rules and validation see.

JSON is the default whatever the content type says (as the peer does), except that
`application/x-www-form-urlencoded` bodies are parsed as forms (unless the body is plainly JSON,
as `curl -d '{...}'` sends it, or holds no `key=value` pair at all, as `curl -d 'hello world'`
does: then it is read as JSON, and refused as not JSON): repeated keys become lists, and a
form whose only field is `payload` holding a JSON object (how GitHub sends form-encoded hooks) is
that object. An empty body is `{}`. A mapped hook also takes a JSON array (SendGrid's event
webhook posts one; `arrays=True`): rules see it as the payload, and `forEach: $` fans out over its
items. Anything else is refused with 400 `invalid_body`.

JSON is read strictly: invalid UTF-8, and nesting deeper than `MAX_DEPTH` (64) arrays and objects,
are `400 invalid_json` (the depth limit keeps every later step, templates, JSONPath, transforms,
far from any recursion limit), and so is an integer longer than `MAX_INTEGER_DIGITS` (4,300)
digits (any float and any shorter integer is taken). The same limits apply to the JSON in a
form's `payload` field.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

import msgspec

from ...engine.errors import RequestError
from ...engine.request import BUILT_IN_HOOKS

_decode = msgspec.json.Decoder().decode

MAX_DEPTH = 64
"""The deepest nesting of arrays and objects a JSON body may have."""
_INVALID_JSON = "the body is not valid JSON"
_TOO_DEEP = f"the JSON nests deeper than {MAX_DEPTH} levels"
MAX_INTEGER_DIGITS = 4300
"""The longest integer a JSON body may hold (Python's own limit on converting text to an int: a
longer one costs time quadratic in its length)."""
_HUGE_INTEGER = (
    f"the JSON holds an integer longer than {MAX_INTEGER_DIGITS} digits: send it as a string"
)


def _too_deep(body: bytes, value: Any) -> bool:
    """True when `value` nests deeper than `MAX_DEPTH`; free for the usual small bodies."""
    if body.count(b"[") + body.count(b"{") <= MAX_DEPTH:
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def decode_json(body: bytes | str) -> Any:
    """Strict JSON (see the module docstring), or a 400 `invalid_json` `RequestError`."""
    try:
        value = _decode(body)
    except msgspec.ValidationError as e:  # the only one msgspec raises untyped: a huge integer
        if "Integer value out of range" in str(e):
            raise RequestError(400, "invalid_json", _HUGE_INTEGER) from None
        raise RequestError(400, "invalid_json", _INVALID_JSON) from None
    except RecursionError:  # msgspec's own depth limit (far past ours)
        raise RequestError(400, "invalid_json", _TOO_DEEP) from None
    except (msgspec.DecodeError, UnicodeDecodeError, ValueError):
        raise RequestError(400, "invalid_json", _INVALID_JSON) from None
    if isinstance(value, (dict, list)) and _too_deep(
        body if isinstance(body, bytes) else body.encode(), value
    ):
        raise RequestError(400, "invalid_json", _TOO_DEEP)
    return value


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
            inner = decode_json(out["payload"])
        except RequestError as e:
            if e.message != _INVALID_JSON:  # too deep, too large a number: refused as in JSON
                raise
            return out
        if isinstance(inner, dict):
            return inner
    return out


def _looks_like_a_form(body: bytes) -> bool:
    """A form body: `key=value` pairs. `curl -d` sends its text with the form content type
    whatever it is: JSON (`{...}`), or plain words, which are neither a form nor JSON."""
    return body.lstrip()[:1] not in (b"{", b"[") and b"=" in body


def parse_payload(body: bytes, ctype: bytes, *, arrays: bool = False) -> Any:
    """The payload of a request body (an object; with `arrays`, an array too), or a 400
    `RequestError`."""
    if not body.strip():
        return {}
    if ctype == b"application/x-www-form-urlencoded" and _looks_like_a_form(body):
        return _form(body)
    value = decode_json(body)
    if isinstance(value, dict) or (arrays and isinstance(value, list)):
        return value
    what = "a JSON object or array" if arrays else "a JSON object"
    raise RequestError(400, "invalid_body", f"the body must be {what}")


def takes_arrays(sub: str) -> bool:
    """Whether the hook `sub` (a path after the hook path) takes a JSON array: every mapped hook
    does; `wake` and `agent` take the object their schema describes."""
    return sub not in BUILT_IN_HOOKS
