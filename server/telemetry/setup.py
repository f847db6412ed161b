"""The OpenTelemetry SDK of one gateway process: started from `telemetry.traces` and the
standard `OTEL_*` variables, stopped (and flushed) at shutdown.

Spans leave through a `BatchSpanProcessor`: `on_end` only appends to a bounded queue, and the
SDK's own thread exports over OTLP/HTTP (protobuf), so a slow or dead collector never slows a
request. The exporter is the official one; its protobuf is written by `encode` (the same
messages at about a third of the official encoder's CPU, which runs in this process too). What is lost on the way is counted in `hookwise_trace_spans_dropped_total`: a span that
finds the queue full (`queue_full`) and the spans of a batch the collector refused or could not
be reached for (`export_failed`). The SDK is imported only when tracing is on.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...engine.config.models import TracesConfig
from .. import metrics
from . import encode, request, spans

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

log = logging.getLogger("hookwise.telemetry")

DEFAULT_SERVICE = "hookwise"
_provider: TracerProvider | None = None
#: the provider's one span processor (the request spans are handed to it directly)
_processor: SpanProcessor | None = None


class TraceIdFilter(logging.Filter):
    """Adds the current trace id to a log record's fields (`traceId` in a JSON line)."""

    def filter(self, record: logging.LogRecord) -> bool:
        trace_id = spans.current_trace_id()
        if trace_id is not None:
            fields = getattr(record, "fields", None)
            record.fields = {**(fields or {}), "traceId": trace_id}
        return True


_TRACE_IDS = TraceIdFilter()


def wanted(config: TracesConfig, env: os._Environ[str] | dict[str, str] = os.environ) -> bool:
    """Whether tracing is on: `OTEL_SDK_DISABLED=true` wins, then `enabled`, then
    `OTEL_TRACES_EXPORTER=otlp` (unset: off)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if config.enabled is not None:
        return config.enabled
    exporters = [e.strip().lower() for e in env.get("OTEL_TRACES_EXPORTER", "").split(",")]
    return "otlp" in exporters


def traces_endpoint(config: TracesConfig) -> str | None:
    """The OTLP/HTTP traces URL from the config's base URL (None: the exporter reads the
    standard variables itself)."""
    if config.endpoint is None:
        return None
    return config.endpoint.rstrip("/") + "/v1/traces"


def start(config: TracesConfig) -> bool:
    """Start tracing in this process when it is wanted; whether it is on. Never raises: a
    tracing set-up that fails is logged and the gateway runs untraced."""
    global _provider, _processor
    if _provider is not None or not wanted(config):
        return _provider is not None
    try:
        provider, processor = _make_provider(config)
    except Exception as e:
        log.error("tracing could not be started (%s: %s); running without it", type(e).__name__, e)
        return False
    _provider, _processor = provider, processor
    pipeline = request.Pipeline(
        provider, processor, stage_spans=config.stages, slow_stage_ms=config.slow_stage_ms
    )
    spans.enable(provider.get_tracer("hookwise"), pipeline)
    for handler in logging.getLogger().handlers:
        handler.addFilter(_TRACE_IDS)
    log.info(
        "tracing on: OTLP/HTTP to %s",
        traces_endpoint(config)
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318"),
    )
    return True


def shutdown() -> None:
    """Export what is queued (bounded by the export timeout) and stop."""
    global _provider, _processor
    provider, _provider, _processor = _provider, None, None
    spans.disable()
    for handler in logging.getLogger().handlers:
        handler.removeFilter(_TRACE_IDS)
    if provider is not None:
        try:
            provider.shutdown()
        except Exception as e:  # never fail a shutdown for telemetry
            log.warning("tracing shutdown: %s: %s", type(e).__name__, e)


def _make_provider(config: TracesConfig) -> tuple[TracerProvider, SpanProcessor]:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, TraceIdRatioBased

    from ..version import version_info

    class CountingExporter(SpanExporter):
        """The OTLP exporter, counting the spans of each batch it could not deliver."""

        def __init__(self, inner: SpanExporter) -> None:
            self._inner = inner

        def export(self, batch: Sequence[ReadableSpan]) -> SpanExportResult:
            try:
                result = self._inner.export(batch)
            except Exception:
                result = SpanExportResult.FAILURE
            if result is not SpanExportResult.SUCCESS:
                metrics.trace_spans_dropped("export_failed", len(batch))
            return result

        def shutdown(self) -> None:
            self._inner.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return self._inner.force_flush(timeout_millis)

    class CountingProcessor(BatchSpanProcessor):
        """A batch processor that drops a span finding the queue full (the newest, where the
        SDK would drop the oldest and log a warning) and counts it."""

        def on_end(self, span: ReadableSpan) -> None:
            queue = getattr(self._batch_processor, "_queue", None)
            if (
                queue is not None
                and span.context is not None
                and span.context.trace_flags.sampled
                and len(queue) >= config.max_queue_size
            ):
                # dropped here, counted, not logged: the SDK would log a warning per span,
                # which under a dead collector costs each request far more than the span
                metrics.trace_spans_dropped("queue_full")
                return
            super().on_end(span)

        def enqueue(self, span: Any) -> None:
            """Queue a span written already and sampled by construction (a hook request's
            `encode.Written`): `on_end` without its checks of a span object."""
            batch = self._batch_processor
            if len(batch._queue) >= config.max_queue_size:
                metrics.trace_spans_dropped("queue_full")
                return
            batch.emit(span)

    attributes: dict[str, Any] = {
        "service.version": version_info()["version"],
        "process.pid": os.getpid(),  # which gateway process made a span (a run may move)
    }
    if config.service_name is not None:
        attributes[SERVICE_NAME] = config.service_name
    elif not os.environ.get("OTEL_SERVICE_NAME"):
        attributes[SERVICE_NAME] = DEFAULT_SERVICE
    created = Resource.create(attributes)  # + OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES

    class HashedResource(Resource):
        """The process's resource, hashed once: the OTLP encoder groups each span of a batch
        by its resource, and `Resource.__hash__` serialises every attribute to JSON each time
        (about 3 µs per span exported)."""

        _hash: int | None = None

        def __hash__(self) -> int:
            if self._hash is None:
                self._hash = super().__hash__()
            return self._hash

        def __eq__(self, other: object) -> bool:
            return self is other or super().__eq__(other)

    resource = HashedResource(created.attributes, created.schema_url)
    sampler = None  # the SDK reads OTEL_TRACES_SAMPLER(_ARG); default: parent-based, always on
    if config.sample_ratio == 1.0:  # the same decisions, without a ratio's arithmetic
        sampler = ParentBased(ALWAYS_ON)
    elif config.sample_ratio is not None:
        sampler = ParentBased(TraceIdRatioBased(config.sample_ratio))
    provider = TracerProvider(resource=resource, sampler=sampler)
    encode.install()  # the official exporter, writing its protobuf with hookwise's encoder
    exporter = OTLPSpanExporter(
        endpoint=traces_endpoint(config), timeout=config.export_timeout_seconds
    )
    processor = CountingProcessor(
        CountingExporter(exporter),
        max_queue_size=config.max_queue_size,
        # a batch is one HTTP request: half the queue, up to 1024 spans (the SDK's 512 made
        # twice the requests for the same spans)
        max_export_batch_size=max(1, min(1024, config.max_queue_size // 2)),
    )
    provider.add_span_processor(processor)
    return provider, processor
