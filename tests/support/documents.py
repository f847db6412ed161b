"""A local HTTP server of fixed documents, standing in for a provider's key or certificate
host in tests: `serving(route)` runs it on loopback and yields its base URL; `route(path)`
answers (status, body, headers) and every GET is counted in `hits` by path."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Route = Callable[[str], tuple[int, bytes, dict[str, str]]]


@contextmanager
def serving(route: Route, hits: dict[str, int]) -> Iterator[str]:
    """Serve `route` on 127.0.0.1; yields `http://127.0.0.1:PORT` (no trailing slash)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            hits[path] = hits.get(path, 0) + 1
            status, body, headers = route(path)
            self.send_response(status)
            for name, value in {**headers, "Content-Length": str(len(body))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
