"""A local OTLP/HTTP trace receiver: what a collector would get from the gateway, decoded.

`POST /v1/traces` with an `ExportTraceServiceRequest` (protobuf, the exporter's default) is
decoded with `opentelemetry-proto` and each span kept as a plain `ReceivedSpan`; the answer is an
`ExportTraceServiceResponse`, as a collector sends. Any other POST is answered 200 (a callback
target beside it). A test reads `spans`, waits with `eventually`, and may `close()` it.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind)


@attrs.frozen
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    #: every attribute value of the span's events and links, flattened
    extra_values: tuple[Any, ...]
    status_code: int


class OtlpReceiver:
    """A threaded HTTP server on loopback collecting the spans exported to it."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self.other_posts: list[str] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            #: keep-alive, as a collector answers (a new connection per batch costs the
            #: exporter a connect each time)
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path != "/v1/traces":
                    with receiver._lock:
                        receiver.other_posts.append(self.path)
                    self._answer(200, b"{}", "application/json")
                    return
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver._take(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self._answer(200, answer, "application/x-protobuf")

            def _answer(self, status: int, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _take(self, request: ExportTraceServiceRequest) -> None:
        got = []
        for rs in request.resource_spans:
            resource = {kv.key: _value(kv.value) for kv in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    extra: list[Any] = []
                    for e in s.events:
                        extra.append(e.name)
                        extra += [_value(kv.value) for kv in e.attributes]
                    for link in s.links:
                        extra += [_value(kv.value) for kv in link.attributes]
                    got.append(
                        ReceivedSpan(
                            name=s.name,
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_span_id=s.parent_span_id.hex(),
                            kind=s.kind,
                            start_ns=s.start_time_unix_nano,
                            end_ns=s.end_time_unix_nano,
                            attributes={kv.key: _value(kv.value) for kv in s.attributes},
                            resource=resource,
                            extra_values=tuple(extra),
                            status_code=s.status.code,
                        )
                    )
        with self._lock:
            self.requests += 1
            self.spans.extend(got)

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        with self._lock:
            return [s for s in self.spans if s.trace_id == trace_id]

    def named(self, name: str) -> list[ReceivedSpan]:
        with self._lock:
            return [s for s in self.spans if s.name == name]

    def all_values(self) -> Iterator[Any]:
        """Every attribute value received (spans, their events and links, the resources)."""
        with self._lock:
            spans = list(self.spans)
        for s in spans:
            yield s.name
            yield from s.attributes.values()
            yield from s.resource.values()
            yield from s.extra_values

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
