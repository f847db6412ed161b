"""The plumbing of the channel fakes: a loopback HTTP server, recording, scripted failures.

Each fake listens on 127.0.0.1 (random port) in a background thread. Every request is recorded
in `server.requests` (method, path, query, lower-cased headers, body), so tests assert the exact
requests sent; `server.missing.add(id)` makes a recipient unknown to the service; failures are
scriptable:

    server.rate_limit(times=2, retry_after=1)   # next 2 sends answer the API's 429
    server.fail(times=1)                        # next send answers the API's 5xx
    server.script(Reply(400, {...}))            # next send answers exactly this

`server.answers` keeps every (request, reply) pair, so tests can check the answers against the
service's published schemas.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import parse_qsl, unquote, urlsplit

import attrs


@attrs.frozen
class Recorded:
    """One request a fake received."""

    method: str
    path: str  # percent-decoded, without the query
    raw_path: str  # exactly as sent, with the query
    query: dict[str, str]
    headers: dict[str, str]  # lower-cased names
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def form(self) -> dict[str, str]:
        return dict(parse_qsl(self.body.decode()))


@attrs.frozen
class Reply:
    """An answer: a dict or list body goes as JSON, a str as text/plain, None as no body."""

    status: int
    body: Any = None
    headers: dict[str, str] = attrs.field(factory=dict)


class FakeServer:
    """Base of the fakes: the HTTP plumbing, the recording and the failure script."""

    name: ClassVar[str]

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.answers: list[tuple[Recorded, Reply]] = []
        self.missing: set[str] = set()  # recipients that do not exist on this service
        self._script: deque[tuple[Reply, Callable[[Recorded], bool]]] = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None

    # --- life ---

    def start(self) -> FakeServer:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @property
    def url(self) -> str:
        assert self._httpd is not None, "the fake is not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    # --- scripting ---

    def script(
        self, reply: Reply, times: int = 1, when: Callable[[Recorded], bool] | None = None
    ) -> None:
        """Answer the next `times` requests matching `when` (default: sends) with `reply`."""
        with self._lock:
            for _ in range(times):
                self._script.append((reply, when or self.is_send))

    def rate_limit(self, times: int = 1, retry_after: float = 1) -> None:
        """The next `times` sends get this API's rate-limit answer."""
        self.script(self.rate_limited_reply(retry_after), times)

    def fail(self, times: int = 1) -> None:
        """The next `times` sends get this API's server-error answer."""
        self.script(self.server_error_reply(), times)

    def recover(self) -> None:
        """Forget the scripted answers still waiting: the next sends succeed again."""
        with self._lock:
            self._script.clear()

    @property
    def sends(self) -> list[Recorded]:
        """The recorded requests that send a message."""
        return [r for r in self.requests if self.is_send(r)]

    # --- to implement per API ---

    def config(self) -> dict[str, Any]:
        raise NotImplementedError

    def is_send(self, req: Recorded) -> bool:
        raise NotImplementedError

    def handle(self, req: Recorded) -> Reply:
        raise NotImplementedError

    def rate_limited_reply(self, retry_after: float) -> Reply:
        raise NotImplementedError

    def server_error_reply(self) -> Reply:
        raise NotImplementedError

    # --- plumbing ---

    def _dispatch(self, req: Recorded) -> Reply:
        with self._lock:
            self.requests.append(req)
            scripted = next((i for i, (_, when) in enumerate(self._script) if when(req)), None)
            if scripted is not None:
                reply = self._script[scripted][0]
                del self._script[scripted]
            else:
                reply = self.handle(req)
            self.answers.append((req, reply))
            return reply

    def _next_id(self) -> int:
        return next(self._ids)


def _handler_for(fake: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def do_PUT(self) -> None:
            self._serve()

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            parts = urlsplit(self.path)
            req = Recorded(
                method=self.command,
                path=unquote(parts.path),
                raw_path=self.path,
                query=dict(parse_qsl(parts.query)),
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
            )
            try:
                reply = fake._dispatch(req)
            except Exception as exc:  # a bug in the fake: make it loud
                reply = Reply(599, f"fake {fake.name} crashed: {exc!r}")
            if isinstance(reply.body, (dict, list)):
                data, ctype = json.dumps(reply.body).encode(), "application/json; charset=utf-8"
            elif isinstance(reply.body, str):
                data, ctype = reply.body.encode(), "text/plain; charset=utf-8"
            else:
                data, ctype = b"", None
            self.send_response(reply.status)
            if ctype:
                self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            for k, v in reply.headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def json_of(req: Recorded) -> Any:
    try:
        return json.loads(req.body or b"null")
    except ValueError:
        return None


def bearer(req: Recorded) -> str | None:
    auth = req.headers.get("authorization", "")
    return auth[7:] if auth.startswith("Bearer ") else None
