"""Tracing: OpenTelemetry spans for a hook from the door to the run's last delivery.

`setup` owns the SDK (started from `telemetry.traces` and the standard `OTEL_*` variables, off by
default, spans exported over OTLP/HTTP by a bounded batch processor whose losses are counted);
`spans` owns the spans the gateway makes: one per hook request (continuing an incoming W3C
`traceparent`), a child per stage, and the run's spans (queue wait, each model call with the
GenAI conventions, each tool call, each delivery attempt) under the request's trace, whichever
process executes the run (the context is stored with it). When tracing is off every function
returns at once: no SDK work on the hook path. See docs/tracing.md.
"""

from .setup import shutdown, start
from .spans import (
    accept_stage,
    active,
    delivery_attempt,
    delivery_outcome,
    model_answered,
    model_call,
    request_span,
    run_ended,
    run_span,
    stage,
    tool_call,
    trace_id,
    traceparent,
)

__all__ = [
    "accept_stage",
    "active",
    "delivery_attempt",
    "delivery_outcome",
    "model_answered",
    "model_call",
    "request_span",
    "run_ended",
    "run_span",
    "shutdown",
    "stage",
    "start",
    "tool_call",
    "trace_id",
    "traceparent",
]
