"""hookwise's OTLP span encoder (server/telemetry/encode.py) against the official one: the same
spans encoded by both decode (with `opentelemetry-proto`) to equal `ExportTraceServiceRequest`s:
spans made by the SDK's tracer, every attribute type, a
remote and a local parent, a trace state, error statuses with and without a description; a batch
holding a span with an event goes to the official encoder. hookwise's request spans, written
as OTLP when they end, decode to what they should hold and to what the official encoder writes
for a span holding the same."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as official
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from hookwise.server.telemetry import encode, request
from hookwise.server.telemetry.request import Pipeline


class Keep(SpanProcessor):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def _decoded(message: Any) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest.FromString(message.SerializePartialToString())


def _spans() -> list[ReadableSpan]:
    keep = Keep()
    resource = Resource.create({"service.name": "encode-test", "process.pid": 42})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(keep)
    tracer = provider.get_tracer("hookwise")
    remote = SpanContext(
        0x0AF7651916CD43DD8448EB211C80319C,
        0xB7AD6B7169203331,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState([("vendor", "opaque-1"), ("other", "x")]),
    )
    parent = trace.set_span_in_context(trace.NonRecordingSpan(remote))
    values: dict[str, Any] = {
        "s": "text é",
        "empty": "",
        "t": True,
        "f": False,
        "i": 7,
        "zero": 0,
        "negative": -5,
        "big": 2**62,
        "d": 1.25,
        "nd": -0.0,
        "strings": ("a", "b"),
        "ints": (1, 2, 3),
        "floats": (0.5,),
        "bools": (True, False),
    }
    with tracer.start_as_current_span("root", context=parent, kind=SpanKind.SERVER) as root:
        root.set_attributes(values)
        with tracer.start_as_current_span("child", kind=SpanKind.CLIENT) as child:
            child.set_status(Status(StatusCode.ERROR, "refused"))
        with tracer.start_as_current_span("plain error", kind=SpanKind.PRODUCER) as span:
            span.set_status(StatusCode.ERROR)
        with tracer.start_as_current_span("ok", kind=SpanKind.CONSUMER) as span:
            span.set_status(StatusCode.OK)
    return keep.spans


REMOTE_TRACE = 0x0AF7651916CD43DD8448EB211C80319C
HEADERS = [
    (b"content-type", b"application/json"),
    (b"traceparent", f"00-{REMOTE_TRACE:032x}-b7ad6b7169203331-01".encode()),
    (b"tracestate", b"vendor=opaque-1"),
]


def _request_spans() -> tuple[list[Any], Resource]:
    """hookwise's request spans (`RequestSpan`s, written by the exporter), with and without a sender's parent, a stage
    failing and one timed."""
    keep = Keep()
    resource = Resource.create({"service.name": "encode-test"})
    provider = TracerProvider(resource=resource)
    pipeline = Pipeline(provider, keep, stage_spans=False, slow_stage_ms=1000)
    request.enable(pipeline)
    try:
        for headers in (HEADERS, HEADERS[:1]):
            req = request.start("POST", "/hooks/{name}", headers)
            assert req is not None
            with req.stage("hook.auth", None):
                pass
            try:
                with req.stage("hook.rule", {"hookwise.rule": "r1"}):
                    raise ValueError("no")
            except ValueError:
                pass
            req.end(503)
    finally:
        request.enable(None)
    return keep.spans, resource


def _readable(span: Any, resource: Resource) -> ReadableSpan:
    """The SDK's span holding what a decoded OTLP span holds (its ids, name, kind, times,
    attributes, status, parent)."""
    parent = None
    if span.parent_span_id:
        remote = bool(span.flags & 0x200)
        parent = SpanContext(
            int.from_bytes(span.trace_id, "big"),
            int.from_bytes(span.parent_span_id, "big"),
            is_remote=remote,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
    attributes: dict[str, Any] = {}
    for kv in span.attributes:
        which = kv.value.WhichOneof("value")
        attributes[kv.key] = getattr(kv.value, which)
    return ReadableSpan(
        span.name,
        context=SpanContext(
            int.from_bytes(span.trace_id, "big"),
            int.from_bytes(span.span_id, "big"),
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
            trace_state=TraceState.from_header([span.trace_state]) if span.trace_state else None,
        ),
        parent=parent,
        resource=resource,
        attributes=attributes,
        kind={1: SpanKind.INTERNAL, 2: SpanKind.SERVER}[span.kind],
        instrumentation_scope=InstrumentationScope("hookwise"),
        status=Status(StatusCode(span.status.code)),
        start_time=span.start_time_unix_nano,
        end_time=span.end_time_unix_nano,
    )


def test_request_spans_hold_what_the_official_encoder_would_write_for_them() -> None:
    ready, resource = _request_spans()
    # two requests, each written with its failed stage as a span of its own
    assert [type(s) for s in ready] == [request.RequestSpan] * 2
    decoded = _decoded(encode.encode_spans(ready))
    [resource_spans] = decoded.resource_spans
    [scope_spans] = resource_spans.scope_spans
    assert scope_spans.scope.name == "hookwise"
    rule, continued, rule_alone, alone = scope_spans.spans
    # the sender's trace continued, its trace state carried, its span the parent (remote)
    assert int.from_bytes(continued.trace_id, "big") == REMOTE_TRACE
    assert continued.parent_span_id.hex() == "b7ad6b7169203331"
    assert continued.trace_state == "vendor=opaque-1"
    assert continued.flags == 0x300
    assert alone.parent_span_id == b"" and alone.flags == 0x100
    assert alone.trace_id != continued.trace_id
    for req, stage in ((continued, rule), (alone, rule_alone)):
        assert req.name == "POST /hooks/{name}" and req.kind == 2  # SERVER
        assert req.status.code == 2  # a 503 is an error
        got = {kv.key: kv.value for kv in req.attributes}
        assert got["http.response.status_code"].int_value == 503
        assert got["http.route"].string_value == "/hooks/{name}"
        assert got["hookwise.rule"].string_value == "r1"
        assert got["hookwise.stages"].string_value.startswith("auth=")
        # the failed stage: a child span with its error class; the timed one is not a span
        assert stage.name == "hook.rule" and stage.kind == 1 and stage.status.code == 2
        assert stage.parent_span_id == req.span_id and stage.trace_id == req.trace_id
        assert {kv.key: kv.value.string_value for kv in stage.attributes}["error.type"] == (
            "ValueError"
        )
        assert req.start_time_unix_nano <= stage.start_time_unix_nano
        assert stage.end_time_unix_nano <= req.end_time_unix_nano
    # byte for byte what the official encoder writes for the same spans
    same = [_readable(s, resource) for s in scope_spans.spans]
    assert decoded == _decoded(official(same))
    # and beside the SDK's spans in one batch, one with an event (the official encoder's)
    keep = Keep()
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(keep)
    with provider.get_tracer("hookwise").start_as_current_span("with an event") as span:
        span.add_event("happened", {"n": 1})
    mixed = _decoded(encode.encode_spans([*ready, *keep.spans]))
    assert sorted(s.name for r in mixed.resource_spans for x in r.scope_spans for s in x.spans) == (
        sorted([*(s.name for s in scope_spans.spans), "with an event"])
    )


def test_both_encoders_write_the_same_messages() -> None:
    spans = _spans()
    assert len(spans) == 4
    mine = _decoded(encode.encode_spans(spans))
    assert mine == _decoded(official(spans))
    assert sum(len(s.spans) for r in mine.resource_spans for s in r.scope_spans) == len(spans)
    # and each span alone (one span per batch)
    for span in spans:
        assert _decoded(encode.encode_spans([span])) == _decoded(official([span]))


def test_a_batch_with_an_event_is_encoded_by_the_official_encoder() -> None:
    keep = Keep()
    provider = TracerProvider()
    provider.add_span_processor(keep)
    with provider.get_tracer("hookwise").start_as_current_span("with an event") as span:
        span.add_event("happened", {"n": 1})
    batch = [*_spans(), *keep.spans]
    assert _decoded(encode.encode_spans(batch)) == _decoded(official(batch))


def test_installed_in_the_official_exporter() -> None:
    from opentelemetry.exporter.otlp.proto.http import trace_exporter

    assert encode.install()
    assert trace_exporter.encode_spans is encode.encode_spans
