"""The spans hookwise makes, as context managers that cost nothing while tracing is off.

One trace per hook request: `request_span` (kind SERVER, continuing the sender's W3C
`traceparent`; `hookwise.server.telemetry.request` owns it) with a `stage` per step (auth, door,
rule selection, transform, store commit), timed on the request's span. The request's context is
what `traceparent()` returns for the store to keep with each run it creates; `run_span` reopens it
in whichever process claims the run, so the run (its queue wait, `model_call`s, `tool_call`s) and
its `delivery_attempt`s are children of the request in the same trace. `_span` opens each of
those, recording an exception as its class.

Attributes are ids, names, counts and outcomes: never a payload, a message, a tool's arguments or
result, a header value or a token. Exceptions are recorded as their class (`error.type`), never
their message, which may quote the request.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from . import request
from .processes import Accept, Executions
from .request import RequestSpan

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from ..store.base import RunRecord
    from ..store.records import DeliveryRecord

T = TypeVar("T")

_tracer: Tracer | None = None
_NULL: contextlib.nullcontext[None] = contextlib.nullcontext()


def enable(tracer: Tracer, pipeline: request.Pipeline | None = None) -> None:
    global _tracer
    _tracer = tracer
    request.enable(pipeline)


def disable() -> None:
    global _tracer
    _tracer = None
    request.enable(None)


def active() -> bool:
    """Whether tracing is on in this process."""
    return _tracer is not None


def tracing_request() -> bool:
    """Whether the stages of a hook request being handled here are timed now (it is sampled)."""
    span = request.current.get()
    return span is not None and span.sampled


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


@contextlib.contextmanager
def _span(name: str, context: Any, kind: Any, attributes: dict[str, Any]) -> Iterator[Span]:
    """A span made current while the block runs (`context`: its parent's, None: the current
    span), an exception recorded as its class (`error.type`), never its message."""
    assert _tracer is not None
    with _tracer.start_as_current_span(
        name,
        context=context,
        kind=kind,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except BaseException as e:
            _error(span, e)
            raise


def request_span(
    method: str, route: str, headers: Iterable[tuple[bytes, bytes]]
) -> RequestSpan | None:
    """Start the span of a hook request (None when tracing is off): see `request.start`."""
    return request.start(method, route, headers)


def stage(
    name: str, attributes: dict[str, Any] | None = None
) -> contextlib.AbstractContextManager[Any]:
    """A step of the hook request being handled (`hook.auth`, `hook.door`, `hook.rule`,
    `hook.transform`, `hook.accept`), timed on the request's span with its `attributes` (a
    None value is left out); nothing when tracing is off, the request is not sampled or no
    request is traced here (a replay)."""
    span = request.current.get()
    if span is None or not span.sampled:
        return _NULL
    return span.stage(name, attributes)


def accept_stage(rule_id: str | None) -> contextlib.AbstractContextManager[Any]:
    """The accept stage (`hook.accept`) of the hook request being handled, as `stage`, with the
    commit of its write: a `store.commit` span under the stage when it is a span (see
    `processes`); nothing when the request is not traced."""
    span = request.current.get()
    if span is None or not span.sampled:
        return _NULL
    return Accept(span, rule_id)


def transform_calls(rule_id: str, runtime: str) -> contextlib.AbstractContextManager[Any]:
    """Around the transform calls of the hook request being handled: each a `transform.execute`
    span with its sandbox worker's times and pid (see `processes`); nothing when the request is
    not traced."""
    span = request.current.get()
    if span is None or not span.sampled:
        return _NULL
    return Executions(span, rule_id, runtime)


def current_trace_id() -> str | None:
    """The trace id of the request or run handled here, when sampled: the `traceId` field of a
    JSON log line written inside it."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    span = request.current.get()
    if span is not None:
        return span.trace_id() if span.sampled else None
    c = trace.get_current_span().get_span_context()
    return f"{c.trace_id:032x}" if c.is_valid and c.trace_flags.sampled else None


def traceparent() -> str | None:
    """The W3C `traceparent` of the hook request being handled (None: not traced), stored with
    each run it creates."""
    span = request.current.get()
    return None if span is None else span.traceparent()


def trace_id() -> str | None:
    """The trace id (32 hex digits) of the hook request being handled, when it is sampled: what
    its request log line keeps."""
    span = request.current.get()
    if span is None or not span.sampled:
        return None
    return span.trace_id()


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
    with _span(f"invoke_agent {run.agent_id}", parent, trace.SpanKind.INTERNAL, attributes) as span:
        yield span


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

    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
    }
    with _span(f"chat {model}", None, trace.SpanKind.CLIENT, attributes) as span:
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
    from opentelemetry import trace

    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.type": "extension",
        "hookwise.mcp.server": server,
    }
    if call_id:
        attributes["gen_ai.tool.call.id"] = call_id[:128]
    with _span(f"execute_tool {tool}", None, trace.SpanKind.INTERNAL, attributes) as span:
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
    from opentelemetry import trace

    attributes: dict[str, Any] = {
        "hookwise.delivery.id": d.delivery_id,
        "hookwise.delivery.attempt": d.attempts,
    }
    if d.channel:
        attributes["hookwise.channel"] = d.channel.split(":", 1)[0]
    if d.run_id:
        attributes["hookwise.run.id"] = d.run_id
    with _span("delivery", _hex_parent(traceparent), trace.SpanKind.CLIENT, attributes) as span:
        yield span


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
