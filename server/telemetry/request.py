"""The hook request's span, made cheap: the one span every traced hook pays for.

A hook request is one span (kind SERVER, continuing the sender's W3C `traceparent`). Its stages
(auth, door, rule selection, transform, store commit) are timed with two clock reads each and
kept on that span in ONE attribute, `hookwise.stages` (`auth=0.021ms rule=0.004ms ...`, in the
order they ended; each attribute costs the OTLP encoder about 2 µs, a span about 12 µs), plus
the stages' own attributes (the rule, the transform's runtime). A stage that fails, or takes longer than
`slowStageMs`, is a child span of its own with its real start and end; `stages: true` makes every
stage a child span (the cost of each span is the reason it is not the default).

The span is built at its end, once, as the SDK's `ReadableSpan` and handed to the provider's
span processor (the bounded batch processor, then the official OTLP exporter): ids from the
provider's id generator, the decision from its sampler (`sampleRatio`, `OTEL_TRACES_SAMPLER`),
its resource. What it skips is the SDK's `Tracer.start_span`/`end` machinery (a mutable span with
a lock, bounded attribute containers, a copy at its end) and attaching the span to the
OpenTelemetry context: nothing runs under the request span but its stages, which it times
itself, and the runs it creates carry its `traceparent` through the store. That takes about two
thirds of the request span's CPU away (see docs/performance.md#tracing).

Nothing of a payload goes into an attribute: the route (not the path), the method, the status,
stage names, durations, the rule's id, the transform's runtime, an exception's class.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from contextvars import ContextVar, Token
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.trace import SpanContext

#: the hook request being handled here, while it is (read by the store's `traceparent`, the log
#: lines' `traceId` and the stages)
current: ContextVar[RequestSpan | None] = ContextVar("hookwise_request_span", default=None)


class Pipeline:
    """What a request span needs of the SDK, looked up once when tracing starts."""

    __slots__ = (
        "_propagator",
        "empty",
        "error",
        "make",
        "processor",
        "provider",
        "scope",
        "slow_ns",
        "stage_spans",
        "unset",
    )

    def __init__(
        self,
        provider: TracerProvider,
        processor: SpanProcessor,
        *,
        stage_spans: bool,
        slow_stage_ms: float,
    ) -> None:
        from opentelemetry.context import Context
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import Status, StatusCode
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.provider = provider
        self.processor = processor
        self.scope = InstrumentationScope("hookwise")
        self.stage_spans = stage_spans
        self.slow_ns = int(slow_stage_ms * 1e6)
        self.empty = Context()
        #: the SDK's finished span, what the span processor and the exporter take
        self.make = ReadableSpan
        self.unset, self.error = Status(StatusCode.UNSET), Status(StatusCode.ERROR)
        self._propagator = TraceContextTextMapPropagator()

    def parent(self, traceparent: bytes) -> Any:
        """The context of a W3C `traceparent` (an invalid one: the empty context)."""
        return self._propagator.extract({"traceparent": traceparent.decode("latin-1")})


_pipeline: Pipeline | None = None
#: `SpanKind.SERVER` and `.INTERNAL` (the SDK is imported when tracing starts, not before)
#: the OpenTelemetry API module (`opentelemetry.trace`), imported when tracing starts
_api: Any = None
_SERVER: Any = None
_INTERNAL: Any = None
#: `TraceFlags` sampled and not
_SAMPLED: Any = None
_DEFAULT: Any = None


def enable(pipeline: Pipeline | None) -> None:
    global _pipeline, _api, _SERVER, _INTERNAL, _SAMPLED, _DEFAULT
    if pipeline is not None:
        import opentelemetry.trace as _api
        from opentelemetry.trace import SpanKind, TraceFlags

        _SERVER, _INTERNAL = SpanKind.SERVER, SpanKind.INTERNAL
        _SAMPLED, _DEFAULT = TraceFlags(TraceFlags.SAMPLED), TraceFlags(TraceFlags.DEFAULT)
    _pipeline = pipeline


class RequestSpan:
    """One hook request's span while it is handled: its context (for the runs it creates), its
    start, its attributes and its stages' timings; built and queued for export by `end`."""

    __slots__ = (
        "_hex",
        "_reset",
        "attributes",
        "context",
        "name",
        "parent",
        "sampled",
        "stages",
        "start",
    )

    def __init__(self, name: str, context: SpanContext, parent: SpanContext | None) -> None:
        self.name = name
        self.context = context
        self.parent = parent
        self.sampled: bool = context.trace_flags.sampled
        self.start = time.time_ns()
        self.attributes: dict[str, Any] = {}
        #: (name, start ns, end ns, attributes, error type or None), in the order they ended
        self.stages: list[tuple[str, int, int, dict[str, Any], str | None]] = []
        self._reset: Token[RequestSpan | None] | None = None
        self._hex: str | None = None

    def trace_id(self) -> str:
        """The trace id, 32 hex digits (formatted once: the request log and the runs ask)."""
        if self._hex is None:
            self._hex = f"{self.context.trace_id:032x}"
        return self._hex

    def traceparent(self) -> str:
        """The W3C `traceparent` of this span (stored with each run the request creates)."""
        c = self.context
        return f"00-{self.trace_id()}-{c.span_id:016x}-{int(c.trace_flags):02x}"

    def end(self, status: int) -> None:
        """End the request with the HTTP status sent; queue its span (and its stage spans)."""
        if self._reset is None:
            return  # ended already
        current.reset(self._reset)
        self._reset = None
        pipeline = _pipeline
        if pipeline is None or not self.sampled:
            return
        ended = time.time_ns()
        attributes = self.attributes
        attributes["http.response.status_code"] = status
        status_of = pipeline.unset
        if status >= 500:
            attributes["error.type"] = str(status)
            status_of = pipeline.error
        resource = pipeline.provider.resource
        children = []
        timings = []
        for name, started, stopped, extra, error in self.stages:
            timings.append(f"{name.removeprefix('hook.')}={(stopped - started) / 1e6:.3f}ms")
            attributes.update(extra)
            if error is None and not pipeline.stage_spans and stopped - started < pipeline.slow_ns:
                continue
            if error is not None:
                extra = {**extra, "error.type": error}
            children.append(
                pipeline.make(
                    name,
                    context=_child_context(pipeline, self.context),
                    parent=self.context,
                    resource=resource,
                    attributes=extra,
                    kind=_INTERNAL,
                    instrumentation_scope=pipeline.scope,
                    status=pipeline.unset if error is None else pipeline.error,
                    start_time=started,
                    end_time=stopped,
                )
            )
        if timings:
            attributes["hookwise.stages"] = " ".join(timings)
        for child in children:
            pipeline.processor.on_end(child)
        pipeline.processor.on_end(
            pipeline.make(
                self.name,
                context=self.context,
                parent=self.parent,
                resource=resource,
                attributes=attributes,
                kind=_SERVER,
                instrumentation_scope=pipeline.scope,
                status=status_of,
                start_time=self.start,
                end_time=ended,
            )
        )


def _child_context(pipeline: Pipeline, of: SpanContext) -> SpanContext:
    span_id = pipeline.provider.id_generator.generate_span_id()
    return _api.SpanContext(of.trace_id, span_id, False, of.trace_flags, of.trace_state)


def start(method: str, route: str, headers: Iterable[tuple[bytes, bytes]]) -> RequestSpan | None:
    """Start the span of a hook request (None when tracing is off): a child of the sender's
    `traceparent` when it sends a valid one, sampled as the provider's sampler decides. `route`
    is the low-cardinality route (`/hooks/wake`, `/hooks/{name}`); the caller ends it with the
    status sent."""
    pipeline = _pipeline
    if pipeline is None:
        return None
    name = f"{method} {route}"
    attributes = {"http.request.method": method, "http.route": route}
    context = pipeline.empty
    parent: SpanContext | None = None
    for header, value in headers:
        if header == b"traceparent":
            context = pipeline.parent(value)
            parent = _api.get_current_span(context).get_span_context()
            break
    provider = pipeline.provider
    ids = provider.id_generator
    if parent is not None and parent.is_valid:
        trace_id = parent.trace_id
        random = parent.trace_flags.random_trace_id
    else:
        parent = None
        trace_id = ids.generate_trace_id()
        random = ids.is_trace_id_random()
    decided = provider.sampler.should_sample(context, trace_id, name, _SERVER, attributes)
    flags = _SAMPLED if decided.decision.is_sampled() else _DEFAULT
    if random:
        flags = _api.TraceFlags(flags | _api.TraceFlags.RANDOM_TRACE_ID)
    span_context = _api.SpanContext(
        trace_id,
        ids.generate_span_id(),
        is_remote=False,
        trace_flags=flags,
        trace_state=decided.trace_state,
    )
    span = RequestSpan(name, span_context, parent)
    if span.sampled:
        span.attributes.update(attributes)
        if decided.attributes:
            span.attributes.update(decided.attributes)
    span._reset = current.set(span)
    return span


class Stage:
    """Times one stage of the request being handled (`stage`)."""

    __slots__ = ("_attributes", "_name", "_request", "_start")

    def __init__(self, request: RequestSpan, name: str, attributes: dict[str, Any]) -> None:
        self._request, self._name, self._attributes = request, name, attributes
        self._start = 0

    def __enter__(self) -> None:
        self._start = time.time_ns()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        error = None
        if exc is not None and not isinstance(exc, GeneratorExit):
            # a refusal's stable code (`unauthorized`...) where it has one, else the class
            code = getattr(exc, "code", None)
            error = code if isinstance(code, str) else type(exc).__name__
        self._request.stages.append(
            (self._name, self._start, time.time_ns(), self._attributes, error)
        )
