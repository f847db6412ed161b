"""The spans hookwise makes, as context managers that cost nothing while tracing is off.

One trace per hook request: `request_span` (kind SERVER, continuing the sender's W3C
`traceparent`) and, inside it, a `stage` per step (auth, door, rule selection, transform, store
commit). The request's context is what `traceparent()` returns for the store to keep with each
run it creates; `run_span` reopens it in whichever process claims the run, so the run (its queue
wait, `model_call`s, `tool_call`s) and its `delivery_attempt`s are children of the request in
the same trace.

Attributes are ids, names, counts and outcomes: never a payload, a message, a tool's arguments or
result, a header value or a token. Exceptions are recorded as their class (`error.type`), never
their message, which may quote the request.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Iterable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from ..store.base import RunRecord
    from ..store.records import DeliveryRecord

T = TypeVar("T")

_tracer: Tracer | None = None
#: a child span per stage of the hook request (`telemetry.traces.stages`)
_stages = True
#: the hook request's span while it is handled (the parent the store keeps for its runs)
_request: ContextVar[Span | None] = ContextVar("hookwise_request_span", default=None)
_NULL: contextlib.nullcontext[None] = contextlib.nullcontext()


def enable(tracer: Tracer, *, stages: bool = True) -> None:
    global _tracer, _stages
    _tracer, _stages = tracer, stages


def disable() -> None:
    global _tracer
    _tracer = None


def active() -> bool:
    """Whether tracing is on in this process."""
    return _tracer is not None


def tracing_request() -> bool:
    """Whether the stages of a hook request being handled here are traced now."""
    return _tracer is not None and _stages and _request.get() is not None


def _hex_parent(traceparent: str | None) -> Any:
    """The context whose parent is the W3C `traceparent` (an invalid one starts a new trace)."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    if not traceparent:
        return None
    return TraceContextTextMapPropagator().extract({"traceparent": traceparent})


def _error(span: Span, exc: BaseException | None) -> None:
    if exc is not None and not isinstance(exc, GeneratorExit):
        from opentelemetry.trace import StatusCode

        # a provider's error class (`rate_limited`, `timeout`...) where it has one
        kind = getattr(exc, "error_class", None)
        span.set_attribute("error.type", kind if isinstance(kind, str) else type(exc).__name__)
        span.set_status(StatusCode.ERROR)


class RequestSpan:
    """One hook request's span, current while the request is handled (`request_span`)."""

    __slots__ = ("_reset", "_span", "_token")

    def __init__(self, span: Span, token: Any, reset: Any) -> None:
        self._span, self._token, self._reset = span, token, reset

    def end(self, status: int) -> None:
        from opentelemetry import context
        from opentelemetry.trace import StatusCode

        span = self._span
        span.set_attribute("http.response.status_code", status)
        if status >= 500:
            span.set_attribute("error.type", str(status))
            span.set_status(StatusCode.ERROR)
        _request.reset(self._reset)
        context.detach(self._token)
        span.end()


def request_span(
    method: str, route: str, headers: Iterable[tuple[bytes, bytes]]
) -> RequestSpan | None:
    """Start the span of a hook request and make it current (None when tracing is off): a child
    of the sender's `traceparent` when it sends a valid one. `route` is the low-cardinality
    route (`/hooks/wake`, `/hooks/{name}`); the caller ends it with the status sent."""
    if _tracer is None:
        return None
    from opentelemetry import context, trace

    parent = None
    for name, value in headers:
        if name == b"traceparent":
            parent = _hex_parent(value.decode("latin-1"))
            break
    span = _tracer.start_span(
        f"{method} {route}",
        context=parent,
        kind=trace.SpanKind.SERVER,
        attributes={"http.request.method": method, "http.route": route},
    )
    token = context.attach(trace.set_span_in_context(span, parent))
    return RequestSpan(span, token, _request.set(span))


@contextlib.contextmanager
def _child(name: str, attributes: dict[str, Any], kind: Any = None) -> Iterator[Span]:
    assert _tracer is not None
    from opentelemetry import trace

    with _tracer.start_as_current_span(
        name,
        kind=kind or trace.SpanKind.INTERNAL,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except BaseException as e:
            _error(span, e)
            raise


def stage(name: str, **attributes: Any) -> contextlib.AbstractContextManager[Any]:
    """A step of the hook request being handled (`hook.auth`, `hook.door`, `hook.rule`,
    `hook.transform`, `hook.accept`): a child span of the request, or nothing when tracing is
    off or no request is traced here (a replay)."""
    if _tracer is None or not _stages or _request.get() is None:
        return _NULL
    return _child(name, {k: v for k, v in attributes.items() if v is not None})


def current_trace_id() -> str | None:
    """The trace id of whatever span is current here (a request's, a run's), when sampled: the
    `traceId` field of a JSON log line written inside it."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    c = trace.get_current_span().get_span_context()
    return f"{c.trace_id:032x}" if c.is_valid and c.trace_flags.sampled else None


def traceparent() -> str | None:
    """The W3C `traceparent` of the hook request being handled (None: not traced), stored with
    each run it creates."""
    if _tracer is None:
        return None
    span = _request.get()
    if span is None:
        return None
    c = span.get_span_context()
    return f"00-{c.trace_id:032x}-{c.span_id:016x}-{int(c.trace_flags):02x}"


def trace_id() -> str | None:
    """The trace id (32 hex digits) of the hook request being handled, when it is sampled: what
    its request log line keeps."""
    if _tracer is None:
        return None
    span = _request.get()
    if span is None:
        return None
    c = span.get_span_context()
    return f"{c.trace_id:032x}" if c.trace_flags.sampled else None


@contextlib.contextmanager
def _run(run: RunRecord) -> Iterator[Span]:
    assert _tracer is not None
    from opentelemetry import trace

    parent = _hex_parent(run.trace)
    now = time.time()
    queued = _tracer.start_span(
        "run.queue_wait",
        context=parent,
        start_time=int(run.created_at * 1e9),
        attributes={"hookwise.run.id": run.run_id, "hookwise.run.attempt": run.attempts},
    )
    queued.end(end_time=int(max(now, run.created_at) * 1e9))
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.id": run.agent_id,
        "gen_ai.agent.name": run.agent_id,
        "hookwise.run.id": run.run_id,
        "hookwise.run.attempt": run.attempts,
        "hookwise.run.queue_wait_ms": round(max(0.0, now - run.created_at) * 1000, 3),
    }
    if run.rule_id is not None:
        attributes["hookwise.rule"] = run.rule_id
    with _tracer.start_as_current_span(
        f"invoke_agent {run.agent_id}",
        context=parent,
        kind=trace.SpanKind.INTERNAL,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except BaseException as e:
            _error(span, e)
            raise


def run_span(run: RunRecord) -> contextlib.AbstractContextManager[Any]:
    """The span of one execution of a run, under the trace of the request that created it (its
    stored `traceparent`), after a `run.queue_wait` span from its acceptance to now. A run
    accepted untraced starts a trace of its own."""
    if _tracer is None:
        return _NULL
    return _run(run)


def run_ended(span: Any, state: str, error_class: str | None = None) -> None:
    """Record a run's ending on its span (`span` from `run_span`; None when off)."""
    if span is None:
        return
    span.set_attribute("hookwise.run.state", state)
    if state != "succeeded":
        from opentelemetry.trace import StatusCode

        span.set_attribute("error.type", error_class or state)
        span.set_status(StatusCode.ERROR)


@contextlib.contextmanager
def _model(provider: str, model: str) -> Iterator[Span]:
    from opentelemetry import trace

    with _child(
        f"chat {model}",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
        },
        trace.SpanKind.CLIENT,
    ) as span:
        yield span


def model_call(provider: str, model: str) -> contextlib.AbstractContextManager[Any]:
    """The span of one model call (GenAI `chat` inference span); `model_answered` adds the
    response's model and token counts."""
    if _tracer is None:
        return _NULL
    return _model(provider, model)


def model_answered(
    span: Any, model: str | None, input_tokens: int | None, output_tokens: int | None
) -> None:
    if span is None:
        return
    if model:
        span.set_attribute("gen_ai.response.model", model)
    if input_tokens is not None:
        span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
    if output_tokens is not None:
        span.set_attribute("gen_ai.usage.output_tokens", output_tokens)


async def tool_call(server: str, tool: str, call_id: str | None, call: Awaitable[T]) -> T:
    """Await `call` (one MCP tool call) inside an `execute_tool {tool}` span; its `outcome`
    attribute (`ok`, `error`, `timeout`...) is set when the result has one."""
    if _tracer is None:
        return await call
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.type": "extension",
        "hookwise.mcp.server": server,
    }
    if call_id:
        attributes["gen_ai.tool.call.id"] = call_id[:128]
    with _child(f"execute_tool {tool}", attributes) as span:
        result = await call
        outcome = getattr(result, "outcome", None)
        if isinstance(outcome, str):
            span.set_attribute("hookwise.tool.outcome", outcome)
            if outcome != "ok":
                from opentelemetry.trace import StatusCode

                span.set_attribute("error.type", outcome)
                span.set_status(StatusCode.ERROR)
        return result


@contextlib.contextmanager
def _delivery(d: DeliveryRecord, traceparent: str | None) -> Iterator[Span]:
    assert _tracer is not None
    from opentelemetry import trace

    attributes: dict[str, Any] = {
        "hookwise.delivery.id": d.delivery_id,
        "hookwise.delivery.attempt": d.attempts,
    }
    if d.channel:
        attributes["hookwise.channel"] = d.channel.split(":", 1)[0]
    if d.run_id:
        attributes["hookwise.run.id"] = d.run_id
    with _tracer.start_as_current_span(
        "delivery",
        context=_hex_parent(traceparent),
        kind=trace.SpanKind.CLIENT,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except BaseException as e:
            _error(span, e)
            raise


def delivery_attempt(
    d: DeliveryRecord, traceparent: str | None
) -> contextlib.AbstractContextManager[Any]:
    """The span of one delivery attempt, in the trace of its run (`traceparent`: the run's)."""
    if _tracer is None:
        return _NULL
    return _delivery(d, traceparent)


def delivery_outcome(span: Any, outcome: str) -> None:
    """`sent`, `retry` or `failed` on a delivery attempt's span (None when off)."""
    if span is None:
        return
    span.set_attribute("hookwise.delivery.outcome", outcome)
    if outcome != "sent":
        from opentelemetry.trace import StatusCode

        span.set_attribute("error.type", outcome)
        span.set_status(StatusCode.ERROR)
