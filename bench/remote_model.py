"""A stand-in for a remote model: an OpenAI-compatible Chat Completions server on loopback that
answers every request after a fixed delay.

With the built-in echo model a run finishes in microseconds, so during an acceptance benchmark
the runs compete with the HTTP path for the same cores; with a real provider a run mostly waits
on the network. `--model-latency` in `bench/ingest.py` puts this server behind the default model
so that `/agent` acceptance is measured as it would be in production.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

API_KEY = "sk-bench-remote-model"


class _Server(ThreadingHTTPServer):
    """Counts the answers cut off by the client (a gateway stopped while its runs were waiting
    on this model, as the bench stops each server at the end of its measurement) instead of
    printing a traceback per request; any other error is reported as usual."""

    daemon_threads = True
    cut_off = 0

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            self.cut_off += 1
            return
        super().handle_error(request, client_address)


class RemoteModel:
    """`with RemoteModel(latency=2.0) as m: m.base_url` -> `http://127.0.0.1:<port>/v1`."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self._httpd: _Server | None = None

    def __enter__(self) -> RemoteModel:
        latency = self.latency

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                time.sleep(latency)
                body = json.dumps(
                    {
                        "id": "chatcmpl-bench",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": request.get("model", "bench"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": "noted"},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, args=(0.1,), daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            if self._httpd.cut_off:
                print(
                    f"remote model: {self._httpd.cut_off} answers cut off by a gateway stopping"
                    " while its runs waited (expected at the end of each measurement)"
                )

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
