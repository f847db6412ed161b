"""hookwise's OTLP span encoder (server/telemetry/encode.py) against the official one: the same
spans encoded by both decode (with `opentelemetry-proto`) to equal `ExportTraceServiceRequest`s:
spans made by the SDK's tracer and the request spans hookwise builds, every attribute type, a
remote and a local parent, a trace state, error statuses with and without a description; a batch
holding a span with an event goes to the official encoder whole."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as official
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from hookwise.server.telemetry import encode
from hookwise.server.telemetry.request import Pipeline, RequestSpan, Stage


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
    # hookwise's request spans: with and without a parent, stages failing and timed
    pipeline = Pipeline(provider, keep, stage_spans=False, slow_stage_ms=0)
    from hookwise.server.telemetry import request

    request.enable(pipeline)
    try:
        for parent_context in (remote, None):
            context = SpanContext(0x1234, 0x5678, False, TraceFlags(TraceFlags.SAMPLED))
            req = RequestSpan("POST /hooks/{name}", context, parent_context)
            req.attributes.update({"http.request.method": "POST", "http.route": "/hooks/{name}"})
            req._reset = request.current.set(req)
            with Stage(req, "hook.auth", {}):
                pass
            try:
                with Stage(req, "hook.rule", {"hookwise.rule": "r1"}):
                    raise ValueError("no")
            except ValueError:
                pass
            req.end(503)
    finally:
        request.enable(None)
    return keep.spans


def test_both_encoders_write_the_same_messages() -> None:
    spans = _spans()
    assert len(spans) >= 10
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
