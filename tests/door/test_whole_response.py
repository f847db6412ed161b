"""A hook's answer written whole into the server's cycle (`http.write_whole`), over real HTTP:
framed exactly (status line, JSON content type, a length that matches the body), pipelined
requests each answered in order on one connection, and `Connection: close` or HTTP/1.0 honoured
(the header sent, the connection closed), as uvicorn's own `send` does."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.gateway import HOOK_TOKEN, GatewayProcess, base_config


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    return start_module_gateway(base_config(), name="whole")


def _address(gw: GatewayProcess) -> tuple[str, int]:
    host, port = gw.url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _wake(text: str, *, version: str = "1.1", extra: str = "") -> bytes:
    body = json.dumps({"text": text}).encode()
    return (
        f"POST /hooks/wake HTTP/{version}\r\nHost: x\r\nAuthorization: Bearer {HOOK_TOKEN}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    ).encode() + body


def _response(sock: socket.socket, pending: bytes) -> tuple[str, dict[str, str], Any, bytes]:
    """One response: (status line, headers, JSON body, bytes read past it)."""
    while b"\r\n\r\n" not in pending:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        pending += chunk
    head, _, rest = pending.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    length = int(headers["content-length"])
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection inside a body"
        rest += chunk
    return lines[0], headers, json.loads(rest[:length]), rest[length:]


def _closed(sock: socket.socket, pending: bytes) -> bool:
    """Nothing more arrives and the server closes the connection."""
    return pending == b"" and sock.recv(65536) == b""


def test_pipelined_wakes_are_answered_in_order_on_one_connection(gw: GatewayProcess) -> None:
    with socket.create_connection(_address(gw), timeout=10) as sock:
        sock.sendall(b"".join(_wake(f"pipelined {n}") for n in range(3)))
        pending = b""
        ids = []
        for _ in range(3):
            line, headers, body, pending = _response(sock, pending)
            assert line == "HTTP/1.1 200 OK"
            assert headers["content-type"] == "application/json"
            assert "connection" not in headers
            assert body["ok"] is True and body["mode"] == "now"
            ids.append(body["eventId"])
        # still open: one more request on it is answered too
        sock.sendall(_wake("after the pipeline"))
        line, _, body, pending = _response(sock, pending)
        assert line == "HTTP/1.1 200 OK" and body["ok"] is True
    assert len(set(ids)) == 3
    events = {e["eventId"] for e in gw.admin("/api/events", limit=50)["items"]}
    assert set(ids) <= events


@pytest.mark.parametrize(
    ("version", "extra"),
    [("1.1", "Connection: close\r\n"), ("1.0", "")],
    ids=["connection-close", "http-1.0"],
)
def test_a_last_request_gets_connection_close_and_the_connection_ends(
    gw: GatewayProcess, version: str, extra: str
) -> None:
    with socket.create_connection(_address(gw), timeout=10) as sock:
        sock.sendall(_wake("last one", version=version, extra=extra))
        line, headers, body, pending = _response(sock, b"")
        assert line.endswith("200 OK") and body["ok"] is True
        assert headers["connection"] == "close"
        assert _closed(sock, pending)


def test_refusals_with_their_own_headers_are_framed_the_same(gw: GatewayProcess) -> None:
    """A refusal (here a 400 with no extra header, and a 405 with `Allow`) goes the other way
    (uvicorn's `send`) or this one; both are framed alike on one kept-alive connection."""
    bad = (
        b"POST /hooks/wake HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        + HOOK_TOKEN.encode()
        + b"\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{]"
    )
    get = b"GET /hooks/wake HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(_address(gw), timeout=10) as sock:
        sock.sendall(bad)
        line, headers, body, pending = _response(sock, b"")
        assert (line, body["code"]) == ("HTTP/1.1 400 Bad Request", "invalid_json")
        sock.sendall(get)
        line, headers, body, pending = _response(sock, pending)
        assert line == "HTTP/1.1 405 Method Not Allowed"
        assert headers["allow"] == "POST"
        sock.sendall(_wake("still served"))
        line, _, body, _ = _response(sock, pending)
        assert line == "HTTP/1.1 200 OK" and body["ok"] is True


def test_expect_100_continue_is_answered_before_the_body_is_sent(gw: GatewayProcess) -> None:
    request = _wake("after continue", extra="Expect: 100-continue\r\n")
    head, _, body = request.partition(b"\r\n\r\n")
    with socket.create_connection(_address(gw), timeout=10) as sock:
        sock.sendall(head + b"\r\n\r\n")
        interim = b""
        while b"\r\n\r\n" not in interim:
            chunk = sock.recv(65536)
            assert chunk, "the server closed the connection"
            interim += chunk
        line, _, pending = interim.partition(b"\r\n\r\n")
        assert line == b"HTTP/1.1 100 Continue"
        sock.sendall(body)
        line, _, answer, _ = _response(sock, pending)
    assert line == "HTTP/1.1 200 OK" and answer["ok"] is True
