"""The hook request's span, made cheap: the one span every traced hook pays for.

A hook request is one span (kind SERVER, continuing the sender's W3C `traceparent`). Its stages
(auth, door, rule selection, transform, store commit) are timed with two clock reads each and
kept on that span in ONE attribute, `hookwise.stages` (`auth=21us rule=4us ...`, whole
microseconds, in the order they ended), plus the stages' own attributes (the rule, the
transform's runtime). A stage that fails, or takes longer than `slowStageMs`, is a child span of its own with its real start
and end; `stages: true` makes every stage a child span (the cost of each span is the reason it
is not the default).

The request span is its own record: the hook path takes its ids (from the provider's id
generator), its sampling decision (from the provider's sampler, `sampleRatio`,
`OTEL_TRACES_SAMPLER`; the default parent-based always-on sampler's decision is taken without
the call: a sender's sampled flag, else sampled) and clock reads, and `end` hands the object
itself to the provider's bounded batch processor (`encode.Written`). The export thread writes it
as OTLP (`otlp`: `encode.span_bytes`, the stages' timings formatted there too) and the official
OTLP exporter sends it. What the hook path skips is the SDK's span objects (a mutable span with
a lock, bounded attribute containers, a `SpanContext`, a `ReadableSpan`), attaching the span to
the OpenTelemetry context, and any encoding: a traced `/wake` pays a few microseconds of the
event loop's time for its span (see docs/performance.md#tracing). Nothing runs under the
request span but its stages, which it times itself, and the runs it creates carry its
`traceparent` through the store.

Nothing of a payload goes into an attribute: the route (not the path), the method, the status,
stage names, durations, the rule's id, the transform's runtime, an exception's class.

Spans measured in another process (a sandbox worker's `transform.execute`, the writer's
`store.commit`: `processes`) are recorded with `RequestSpan.child` and written by `end` under
their stage's span.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from contextvars import ContextVar, Token
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .encode import INTERNAL, SERVER, Written, attributes_bytes, head, prepare, span_bytes

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.trace import SpanContext

#: the hook request being handled here, while it is (read by the store's `traceparent`, the log
#: lines' `traceId` and the stages)
current: ContextVar[RequestSpan | None] = ContextVar("hookwise_request_span", default=None)
#: W3C trace flags: sampled, and the trace id is random (level 2 of the W3C spec)
_SAMPLED, _RANDOM = 0x01, 0x02


class Pipeline:
    """What a request span needs of the SDK, looked up once when tracing starts."""

    __slots__ = (
        "_propagator",
        "empty",
        "enqueue",
        "ids",
        "processor",
        "random_ids",
        "resource",
        "sampler",
        "scope",
        "slow_ns",
        "stage_spans",
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
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        prepare()
        self.processor = processor
        #: how a written span is queued: the processor's `enqueue` where it has one (setup's
        #: counting batch processor), else its `on_end`
        self.enqueue: Callable[[Any], None] = getattr(processor, "enqueue", processor.on_end)
        self.resource = provider.resource
        self.scope = InstrumentationScope("hookwise")
        self.ids = provider.id_generator
        self.random_ids = self.ids.is_trace_id_random()
        #: None: the default sampler (parent-based, always on), decided without calling it
        self.sampler = None if _parent_based_always_on(provider.sampler) else provider.sampler
        self.stage_spans = stage_spans
        self.slow_ns = int(slow_stage_ms * 1e6)
        self.empty = Context()
        self._propagator = TraceContextTextMapPropagator()

    def parent(
        self, traceparent: bytes, tracestate: bytes | None
    ) -> tuple[Any, SpanContext | None]:
        """The context of a W3C `traceparent` (and `tracestate`) and its span context (an
        invalid one: the empty context and None)."""
        from opentelemetry.trace import get_current_span

        carrier = {"traceparent": traceparent.decode("latin-1")}
        if tracestate is not None:
            carrier["tracestate"] = tracestate.decode("latin-1")
        context = self._propagator.extract(carrier)
        parent = get_current_span(context).get_span_context()
        return (context, parent) if parent.is_valid else (self.empty, None)


def _parent_based_always_on(sampler: Any) -> bool:
    """Whether `sampler` decides as the SDK's default (`ParentBased(ALWAYS_ON)`): a parent's
    sampled flag, else sampled; its trace state the parent's."""
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased

    return type(sampler) is ParentBased and all(
        getattr(sampler, name, None) is want
        for name, want in (
            ("_root", ALWAYS_ON),
            ("_remote_parent_sampled", ALWAYS_ON),
            ("_remote_parent_not_sampled", ALWAYS_OFF),
        )
    )


_pipeline: Pipeline | None = None


def enable(pipeline: Pipeline | None) -> None:
    global _pipeline
    _pipeline = pipeline
    if pipeline is not None:  # what the exporter groups the request spans by
        RequestSpan.resource, RequestSpan.instrumentation_scope = pipeline.resource, pipeline.scope


class RequestSpan(Written):
    """One hook request's span while it is handled: its ids (for the runs it creates), its
    start, its attributes and its stages' timings; written and queued for export by `end`.

    It is also the context manager of its stages (`spans.stage` hands it out with the stage's
    name and attributes): the stages of a request follow one another, so one object times them
    all; a stage opened inside another gets a `Stage` of its own."""

    __slots__ = (
        "_ended",
        "_hex",
        "_opened_at",
        "_pipeline",
        "_reset",
        "attributes",
        "children",
        "fixed",
        "flags",
        "head",
        "opened",
        "parent_id",
        "sampled",
        "span_id",
        "stages",
        "start",
        "status",
        "trace_id_int",
        "trace_state",
    )

    def __init__(
        self,
        route: tuple[bytes, bytes],
        trace_id: int,
        span_id: int,
        flags: int,
        parent_id: int | None = None,
        trace_state: str | None = None,
    ) -> None:
        #: the span's name and kind, and its method and route attributes, encoded (`_route`)
        self.head, self.fixed = route
        self.trace_id_int, self.span_id, self.flags = trace_id, span_id, flags
        #: the sender's span (a remote parent), None: the trace starts here
        self.parent_id = parent_id
        #: the W3C `tracestate` header carried on (None: none)
        self.trace_state = trace_state
        self.sampled: bool = bool(flags & _SAMPLED)
        self.start = time.time_ns()
        #: the attributes learnt on the way (the status, the rule...)
        self.attributes: dict[str, Any] = {}
        #: (name, start ns, end ns, attributes, error type or None), in the order they ended
        self.stages: list[tuple[str, int, int, dict[str, Any] | None, str | None]] = []
        #: the stage open now (`enter`): its name and attributes; None: none is
        self.opened: tuple[str, dict[str, Any] | None] | None = None
        self._opened_at = 0
        #: spans measured in another process, under a stage (`child`); None: none
        self.children: list[_Child] | None = None
        self._reset: Token[RequestSpan | None] | None = None
        self._hex: str | None = None
        #: set by `end`: the status sent, when, and the pipeline that will write it
        self.status = 0
        self._ended = 0
        self._pipeline: Pipeline | None = None

    def trace_id(self) -> str:
        """The trace id, 32 hex digits (formatted once: the request log and the runs ask)."""
        if self._hex is None:
            self._hex = f"{self.trace_id_int:032x}"
        return self._hex

    def traceparent(self) -> str:
        """The W3C `traceparent` of this span (stored with each run the request creates)."""
        return f"00-{self.trace_id()}-{self.span_id:016x}-{self.flags:02x}"

    def stage(self, name: str, attributes: dict[str, Any] | None) -> Any:
        """The context manager timing stage `name` of this request: itself, unless a stage is
        open already."""
        if self.opened is not None:
            return Stage(self, name, attributes)
        self.opened = (name, attributes)
        return self

    def ended(
        self, name: str, started: int, attributes: dict[str, Any] | None, exc: object
    ) -> None:
        """Record stage `name`, from `started` (`time.time_ns()`) to now, failed with `exc`
        when it is an exception."""
        error = None if exc is None else error_type(exc)
        self.stages.append((name, started, time.time_ns(), attributes, error))

    def __enter__(self) -> None:
        self._opened_at = time.time_ns()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        opened = self.opened
        assert opened is not None
        self.opened = None
        self.ended(opened[0], self._opened_at, opened[1], exc)

    def end(self, status: int) -> None:
        """End the request with the HTTP status sent and queue it for export: it is written as
        OTLP (`otlp`) in the export thread, off the hook path."""
        if self._reset is None:
            return  # ended already
        current.reset(self._reset)
        self._reset = None
        pipeline = _pipeline
        if pipeline is None or not self.sampled:
            return
        self._ended = time.time_ns()
        self.status = status
        self._pipeline = pipeline
        pipeline.enqueue(self)

    def otlp(self) -> bytes:
        """The request's span and its stages' and children's spans, as OTLP (`Written`): run
        once, by the exporter, after `end`; nothing changes the span meanwhile."""
        pipeline = self._pipeline
        assert pipeline is not None
        ended, status = self._ended, self.status
        attributes = self.attributes
        attributes["http.response.status_code"] = status
        code = 0
        if status >= 500:
            attributes["error.type"] = str(status)
            code = 2  # ERROR
        written = []
        #: the span ids of the stages written as spans, by name, when children need them
        parents: dict[str, int] | None = None if self.children is None else {}
        if self.stages:
            timings = []
            every, slow = pipeline.stage_spans, pipeline.slow_ns
            for name, started, stopped, extra, error in self.stages:
                took = stopped - started
                # whole microseconds: a float's formatting costs three times an int's
                timings.append(f"{name.removeprefix('hook.')}={took // 1000}us")
                if extra:
                    attributes.update(extra)
                if error is None and not every and took < slow:
                    continue
                extra = dict(extra or ())
                if error is not None:
                    extra["error.type"] = error
                stage_id = pipeline.ids.generate_span_id()
                if parents is not None:
                    parents[name] = stage_id
                written.append(
                    span_bytes(
                        self.trace_id_int,
                        stage_id,
                        self.trace_state,
                        self.span_id,
                        False,
                        head(name, INTERNAL),
                        started,
                        stopped,
                        extra,
                        0 if error is None else 2,
                    )
                )
            attributes["hookwise.stages"] = " ".join(timings)
        if parents is not None:
            written += self._children(pipeline, parents)
        written.append(
            span_bytes(
                self.trace_id_int,
                self.span_id,
                self.trace_state,
                self.parent_id,
                self.parent_id is not None,
                self.head,
                self.start,
                ended,
                attributes,
                code,
                fixed=self.fixed,
            )
        )
        return b"".join(written)

    # --- spans measured in another process (a sandbox worker, the store's writer) ---------------

    def child(
        self,
        name: str,
        start_ns: int,
        end_ns: int,
        attributes: dict[str, Any],
        parent: str,
        *,
        alone: bool = True,
        error: str | None = None,
    ) -> None:
        """Record a span measured elsewhere (`transform.execute` in a sandbox worker,
        `store.commit` in the writer), written by `end` under the span of the stage `parent`
        (`hook.transform`) when that stage is a span; when it is not, under the request's span
        (`alone`) or not at all. `error`: its `error.type` (status ERROR)."""
        if self.children is None:
            self.children = []
        self.children.append((name, start_ns, end_ns, attributes, parent, alone, error))

    def last_stage_is_span(self) -> bool:
        """Whether the stage that ended last will be a span of its own (failed, slow, or
        `stages: true`; as `end` decides): a child that is written only under it (`alone`
        False) is not worth recording otherwise."""
        pipeline = _pipeline
        if pipeline is None or not self.stages:
            return False
        _, started, stopped, _, error = self.stages[-1]
        return error is not None or pipeline.stage_spans or stopped - started >= pipeline.slow_ns

    def _children(self, pipeline: Pipeline, parents: dict[str, int]) -> list[bytes]:
        """The children's spans (`child`), each under its stage's span (`parents`: their ids)."""
        out = []
        for name, started, stopped, attributes, parent, alone, error in self.children or ():
            parent_id = parents.get(parent)
            if parent_id is None:
                if not alone:
                    continue
                parent_id = self.span_id
            if error is not None:
                attributes = {**attributes, "error.type": error}
            out.append(
                span_bytes(
                    self.trace_id_int,
                    pipeline.ids.generate_span_id(),
                    self.trace_state,
                    parent_id,
                    False,
                    head(name, INTERNAL),
                    started,
                    stopped,
                    attributes,
                    0 if error is None else 2,
                )
            )
        return out


#: a request span's name and kind, and its method and route attributes, encoded, by method
#: and route (a handful: the routes are low-cardinality)
_ROUTES: dict[tuple[str, str], tuple[bytes, bytes]] = {}


def _route(method: str, route: str) -> tuple[bytes, bytes]:
    found = _ROUTES.get((method, route))
    if found is None:
        if len(_ROUTES) >= 256:  # methods are the client's: bounded all the same
            _ROUTES.clear()
        found = _ROUTES[(method, route)] = (
            head(f"{method} {route}", SERVER),
            attributes_bytes({"http.request.method": method, "http.route": route}),
        )
    return found


#: a child span (`RequestSpan.child`): name, start and end (ns), attributes, its stage's name,
#: whether it is written when that stage is no span, its error type
_Child = tuple[str, int, int, dict[str, Any], str, bool, str | None]


def start(method: str, route: str, headers: Iterable[tuple[bytes, bytes]]) -> RequestSpan | None:
    """Start the span of a hook request (None when tracing is off): a child of the sender's
    `traceparent` when it sends a valid one, sampled as the provider's sampler decides. `route`
    is the low-cardinality route (`/hooks/wake`, `/hooks/{name}`); the caller ends it with the
    status sent."""
    pipeline = _pipeline
    if pipeline is None:
        return None
    parent: SpanContext | None = None
    context = pipeline.empty
    traceparent = tracestate = None
    for header, value in headers:
        if header == b"traceparent":
            traceparent = value
        elif header == b"tracestate":
            tracestate = value
    if traceparent is not None:
        context, parent = pipeline.parent(traceparent, tracestate)
    if parent is None:
        trace_id = pipeline.ids.generate_trace_id()
        random = pipeline.random_ids
    else:
        trace_id = parent.trace_id
        random = parent.trace_flags.random_trace_id
    sampler = pipeline.sampler
    extra = None
    if sampler is None:  # the default, parent-based and always on
        sampled = parent is None or parent.trace_flags.sampled
        state = None if parent is None else parent.trace_state
    else:
        from opentelemetry.trace import SpanKind

        decided = sampler.should_sample(
            context,
            trace_id,
            f"{method} {route}",
            SpanKind.SERVER,
            {"http.request.method": method, "http.route": route},
        )
        sampled = decided.decision.is_sampled()
        state = decided.trace_state
        extra = decided.attributes
    span = RequestSpan(
        _route(method, route),
        trace_id,
        pipeline.ids.generate_span_id(),
        (_SAMPLED if sampled else 0) | (_RANDOM if random else 0),
        None if parent is None else parent.span_id,
        state.to_header() if state else None,
    )
    if sampled and extra:  # the sampler's own (the request's method and route are fixed)
        span.attributes.update(
            (k, v) for k, v in extra.items() if k not in ("http.request.method", "http.route")
        )
    span._reset = current.set(span)
    return span


def error_type(exc: object) -> str | None:
    """What a stage that raised `exc` failed with: a refusal's stable code (`unauthorized`...)
    where it has one, else the class; None: it did not fail."""
    if exc is None or isinstance(exc, GeneratorExit):
        return None
    code = getattr(exc, "code", None)
    return code if isinstance(code, str) else type(exc).__name__


class Stage:
    """Times one stage of the request being handled, opened inside another (`RequestSpan.stage`)."""

    __slots__ = ("_attributes", "_name", "_request", "_start")

    def __init__(self, request: RequestSpan, name: str, attributes: dict[str, Any] | None) -> None:
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
        self._request.ended(self._name, self._start, self._attributes, exc)
