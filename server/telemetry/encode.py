"""OTLP's protobuf for a batch of spans, written directly: the same bytes' meaning as the
official encoder's (`opentelemetry.exporter.otlp.proto.common`), at a fraction of its CPU.

The official encoder builds a protobuf message object per span, per attribute and per value
(about 12 µs per span and 2 µs per attribute where measured), and it runs in the gateway's
process, so a traced hook paid more for its span's encoding than for all the rest of tracing.
This writes the wire format itself: a span is a few byte strings joined, attribute keys are
encoded once and kept, the resource and the instrumentation scope are encoded once per batch by
the official encoder. A span with events or links (hookwise makes none) sends its batch to the
official encoder whole. `install` puts it in place of the official one inside the official
OTLP/HTTP exporter, which still does the rest (size check, compression, retries, its metrics).
tests/unit/test_telemetry_encode.py decodes both encoders' bytes and compares them.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

_DOUBLE = struct.Struct("<d")
_FIXED64 = struct.Struct("<Q")
_FIXED32 = struct.Struct("<I")
#: `Span.flags` (field 16, fixed32): the parent's remoteness is known / it is remote
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200
_FLAGS_TAG = b"\x85\x01"
#: `SpanKind` -> OTLP's `Span.SpanKind` (unspecified 0, internal 1, server 2, client 3, ...)
_KINDS: dict[Any, int] = {}
INTERNAL, SERVER = 1, 2
#: `Span.kind` (field 6) encoded, by OTLP's number
_KIND_BYTES = [b"\x30" + bytes((n,)) for n in range(6)]
#: an attribute's key, encoded (`KeyValue.key`), by the key
_KEYS: dict[str, bytes] = {}
#: whole attributes and span names, encoded, by (key, value) and name: most repeat (a route, a
#: method, a model, a rule); cleared when it holds `_MEMO_MAX` (ids never repeat)
_MEMO: dict[Any, bytes] = {}
_MEMO_MAX = 4096
#: attribute keys whose values do not repeat: not kept in `_MEMO` (they would only crowd out
#: those that do)
UNIQUE = frozenset(
    {"hookwise.stages", "hookwise.run.id", "hookwise.run.queue_wait_ms", "gen_ai.tool.call.id"}
)
_UNSET_STATUS = b"\x7a\x00"
_LOCAL_PARENT = _FLAGS_TAG + _FIXED32.pack(_HAS_IS_REMOTE)
_REMOTE_PARENT = _FLAGS_TAG + _FIXED32.pack(_HAS_IS_REMOTE | _IS_REMOTE)


#: a varint below 128: one byte (most lengths here)
_SHORT = [bytes((n,)) for n in range(0x80)]
#: a span's start (field 7) and end (field 8), fixed64 each
_TIMES = struct.Struct("<BQBQ")


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _SHORT[n]
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    return tag + _varint(len(payload)) + payload


def _any(value: Any) -> bytes:
    """`AnyValue`: string 1, bool 2, int 3, double 4, array 5 (as the official encoder)."""
    if isinstance(value, str):
        return _field(b"\x0a", value.encode("utf-8"))
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, int):
        return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)
    if isinstance(value, float):
        return b"\x21" + _DOUBLE.pack(value)
    if isinstance(value, bytes):
        return _field(b"\x3a", value)
    if isinstance(value, Sequence):
        return _field(b"\x2a", b"".join(_field(b"\x0a", _any(v)) for v in value))
    raise TypeError(f"an attribute value of type {type(value).__name__}")


def _attribute(key: str, value: Any) -> bytes:
    """One `KeyValue`, as a repeated field 9 of a span (`attributes`): a text or an integer
    kept encoded (a route, a method, a status, a rule), unless its key is one whose values do
    not repeat (`UNIQUE`)."""
    kind = type(value)
    if (kind is str or kind is int) and key not in UNIQUE:
        memo = (key, value)
        done = _MEMO.get(memo)
        if done is None:
            if len(_MEMO) >= _MEMO_MAX:
                _MEMO.clear()
            done = _MEMO[memo] = _key_value(key, value)
        return done
    return _key_value(key, value)


def _key_value(key: str, value: Any) -> bytes:
    name = _KEYS.get(key)
    if name is None:
        name = _KEYS[key] = _field(b"\x0a", key.encode("utf-8"))
    if type(value) is str:  # most values: AnyValue.string_value inlined
        text = value.encode("utf-8")
        any_value = b"\x0a" + _varint(len(text)) + text
    else:
        any_value = _any(value)
    pair = name + b"\x12" + _varint(len(any_value)) + any_value
    return b"\x4a" + _varint(len(pair)) + pair


def _span(span: Any) -> bytes:
    if isinstance(span, Written):
        return span.otlp()
    c = span.context
    parent = span.parent
    status = span.status
    return span_bytes(
        c.trace_id,
        c.span_id,
        c.trace_state.to_header() if c.trace_state else None,
        None if parent is None else parent.span_id,
        parent is not None and parent.is_remote,
        head(span.name, _KINDS[span.kind]),
        span.start_time,
        span.end_time,
        span.attributes,
        status.status_code.value,
        status.description,
        span.dropped_attributes,
    )


def head(name: str, kind: int) -> bytes:
    """A span's name and kind (fields 5 and 6), encoded (kept: names repeat)."""
    memo = (name, kind)
    done = _MEMO.get(memo)
    if done is None:
        if len(_MEMO) >= _MEMO_MAX:
            _MEMO.clear()
        done = _MEMO[memo] = _field(b"\x2a", name.encode("utf-8")) + _KIND_BYTES[kind]
    return done


def attributes_bytes(attributes: Mapping[str, Any]) -> bytes:
    """Attributes encoded once, to be passed to `span_bytes` as its `fixed` ones."""
    return b"".join(_key_value(k, v) for k, v in attributes.items() if v is not None)


def span_bytes(
    trace_id: int,
    span_id: int,
    trace_state: str | None,
    parent_id: int | None,
    remote_parent: bool,
    name_kind: bytes,
    start: int,
    end: int,
    attributes: Mapping[str, Any],
    code: int = 0,
    message: str | None = None,
    dropped: int = 0,
    fixed: bytes = b"",
) -> bytes:
    """One span, as an entry of `ScopeSpans.spans`: `name_kind` its name and kind (`head`),
    `fixed` attributes encoded already (`attributes_bytes`), written before `attributes`; `code`
    the status code's number (0 unset, 1 ok, 2 error), `trace_state` its W3C header."""
    parts = [
        b"\x0a\x10" + trace_id.to_bytes(16, "big"),
        b"\x12\x08" + span_id.to_bytes(8, "big"),
    ]
    if trace_state:
        parts.append(_field(b"\x1a", trace_state.encode("utf-8")))
    if parent_id is not None:
        parts.append(b"\x22\x08" + parent_id.to_bytes(8, "big"))
    parts += (name_kind, _TIMES.pack(0x39, start, 0x41, end), fixed)
    for key, value in attributes.items():
        if value is None:  # left out (a stage's attribute it did not learn)
            continue
        try:
            parts.append(_attribute(key, value))
        except TypeError:  # not an attribute value (the SDK refuses those): left out, as the
            continue  # official encoder does
    if dropped:
        parts.append(b"\x50" + _varint(dropped))
    if code or message:
        parts.append(
            _field(
                b"\x7a",
                (_field(b"\x12", message.encode("utf-8")) if message else b"")
                + (b"\x18" + _varint(code) if code else b""),
            )
        )
    else:
        parts.append(_UNSET_STATUS)
    parts.append(_REMOTE_PARENT if remote_parent else _LOCAL_PARENT)
    body = b"".join(parts)
    return b"\x12" + _varint(len(body)) + body  # ScopeSpans.spans (2)


class Written:
    """A finished span that writes itself as OTLP (`otlp`: one or more entries of
    `ScopeSpans.spans`), handed to the SDK's batch processor in place of the SDK's span objects:
    hookwise's hook request spans (`request.RequestSpan`, written in the export thread, off the
    hook path). The processor asks it only whether it is sampled (`context`: a sampled context
    shared by all, not its ids); the exporter's encoder (`encode_spans`) takes
    its bytes. `resource` and `instrumentation_scope` are the provider's and hookwise's."""

    __slots__ = ()

    #: `context.trace_flags.sampled` is all the batch processor reads (set by `prepare`)
    context: Any = None
    events: tuple[()] = ()
    links: tuple[()] = ()
    resource: Any = None
    instrumentation_scope: Any = None

    def otlp(self) -> bytes:
        raise NotImplementedError


class Encoded:
    """What the exporter serialises: the bytes, already."""

    __slots__ = ("_data",)

    def __init__(self, data: bytes) -> None:
        self._data = data

    def SerializePartialToString(self) -> bytes:
        return self._data

    SerializeToString = SerializePartialToString


def encode_spans(spans: Sequence[Any]) -> Any:
    """An `ExportTraceServiceRequest` for `spans`. A batch holding a span with events or links
    has those of its spans that are not `Written` encoded by the official encoder; the
    two messages' bytes are joined (protobuf appends a repeated field's entries)."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as official

    if not _KINDS:
        prepare()
    if any(s.events or s.links for s in spans):
        ready = [s for s in spans if isinstance(s, Written)]
        if not ready:
            return official(spans)
        rest = [s for s in spans if not isinstance(s, Written)]
        return Encoded(official(rest).SerializePartialToString() + _grouped(ready))
    return Encoded(_grouped(spans))


def _grouped(spans: Sequence[Any]) -> bytes:
    """`ResourceSpans` for `spans`, grouped by resource and instrumentation scope."""
    from opentelemetry.exporter.otlp.proto.common._internal import (
        _encode_instrumentation_scope,
        _encode_resource,
    )

    grouped: dict[int, tuple[Any, dict[int, tuple[Any, list[bytes]]]]] = {}
    first = spans[0] if spans else None
    if first is not None and all(
        isinstance(s, Written)
        and s.resource is first.resource
        and s.instrumentation_scope is first.instrumentation_scope
        for s in spans
    ):  # hook request spans only (most batches): one group, their bytes as they are
        data = [s.otlp() for s in spans]
        grouped[id(first.resource)] = (
            first.resource,
            {id(first.instrumentation_scope): (first.instrumentation_scope, data)},
        )
        spans = ()
    for span in spans:
        resource = span.resource
        scope = span.instrumentation_scope
        _, scopes = grouped.setdefault(id(resource), (resource, {}))
        scopes.setdefault(id(scope), (scope, []))[1].append(_span(span))
    out = []
    for resource, scopes in grouped.values():
        body = [_field(b"\x0a", _encode_resource(resource).SerializeToString())]
        for scope, encoded in scopes.values():
            inner = [_field(b"\x0a", _encode_instrumentation_scope(scope).SerializeToString())]
            inner.extend(encoded)
            if scope is not None and scope.schema_url:
                inner.append(_field(b"\x1a", scope.schema_url.encode("utf-8")))
            body.append(_field(b"\x12", b"".join(inner)))
        if resource.schema_url:
            body.append(_field(b"\x1a", resource.schema_url.encode("utf-8")))
        out.append(_field(b"\x0a", b"".join(body)))
    return b"".join(out)


def prepare() -> None:
    """Look up what encoding needs of the SDK (its span kinds, a sampled context for
    `Written`), once: the SDK is imported only when tracing is on."""
    from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

    for kind, number in (
        (SpanKind.INTERNAL, 1),
        (SpanKind.SERVER, 2),
        (SpanKind.CLIENT, 3),
        (SpanKind.PRODUCER, 4),
        (SpanKind.CONSUMER, 5),
    ):
        _KINDS[kind] = number
    Written.context = SpanContext(1, 1, False, TraceFlags(TraceFlags.SAMPLED))


def install() -> bool:
    """Use this encoder in the official OTLP/HTTP span exporter; whether it could (an exporter
    version without the module-level `encode_spans` keeps its own)."""
    from opentelemetry.exporter.otlp.proto.http import trace_exporter

    if not callable(getattr(trace_exporter, "encode_spans", None)):
        return False
    trace_exporter.encode_spans = encode_spans  # type: ignore[assignment]
    return True
