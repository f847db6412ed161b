"""The door through the real server: strict JSON bodies, admin cursors, HTTP framing answered in
JSON, header limits and timeouts, forwarded addresses, the token header alias, log forging."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess, base_config
from tests.support.mapped import events_of, logged
from tests.support.wait import eventually


def _config(**gateway: Any) -> dict[str, Any]:
    config = base_config(
        mappings=[
            {"id": "big", "match": {"path": "big"}, "action": "wake", "textTemplate": "{{n}}"}
        ],
        authThrottle={"maxFailures": 5, "windowSeconds": 60, "lockoutSeconds": 60},
        maxBodyBytes=262144,
        bodyTimeoutSeconds=1,
    )
    config["gateway"].update({"headerTimeoutSeconds": 1, "maxHeaderBytes": 8192, **gateway})
    return config


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    return start_module_gateway(_config(), name="door")


def _address(gw: GatewayProcess) -> tuple[str, int]:
    host, port = gw.url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def raw(gw: GatewayProcess, data: bytes, *, wait: float = 5.0) -> tuple[int, dict[str, str], Any]:
    """Send raw bytes on a fresh connection; (status, headers, JSON body) of the answer, reading
    until the server closes the connection (asserting that it does)."""
    with socket.create_connection(_address(gw), timeout=wait) as sock:
        sock.sendall(data)
        return _read_closed(sock)


def _read_closed(sock: socket.socket) -> tuple[int, dict[str, str], Any]:
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    assert headers.get("content-type") == "application/json", received[:300]
    return status, headers, json.loads(body)


def _post(path: str, body: bytes, *, extra: str = "", token: bool = True) -> bytes:
    auth = f"Authorization: Bearer {HOOK_TOKEN}\r\n" if token else ""
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n{extra}\r\n"
    ).encode() + body


# --- bodies and queries ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b'{"text": "caf\xe9 \xff\xfe"}',
        b"[" * 100_000,
        b'{"text": "x", "deep": ' + b"[" * 65 + b"]" * 65 + b"}",
        b'{"text": "x", "deep": ' + b'{"a":' * 65 + b"1" + b"}" * 65 + b"}",
    ],
    ids=["invalid-utf8", "100k-brackets", "65-arrays", "65-objects"],
)
def test_invalid_json_is_400(gw: GatewayProcess, body: bytes) -> None:
    before = len(events_of(gw, "big"))
    r = gw.hook("wake", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    assert (r.json()["ok"], r.json()["code"]) == (False, "invalid_json")
    assert len(events_of(gw, "big")) == before


def test_nesting_up_to_the_limit_and_big_integers_are_accepted(gw: GatewayProcess) -> None:
    deep = json.loads("[" * 63 + "]" * 63)
    big = 2**200 + 1
    r = gw.hook("big", content=json.dumps({"n": big, "deep": deep}).encode())
    assert r.status_code == 200, r.text
    event = eventually(
        lambda: [e for e in events_of(gw, "big") if e["text"] == str(big)], what="the event"
    )
    assert event


@pytest.mark.parametrize("cursor", [str(2**63), str(2**64 + 5), "9" * 19])
def test_admin_cursors_out_of_range_are_400_invalid_query(gw: GatewayProcess, cursor: str) -> None:
    assert gw.client is not None
    for path in ("/api/events", "/api/runs", "/api/deliveries", "/api/requests"):
        r = gw.client.get(
            path, params={"cursor": cursor}, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        )
        assert r.status_code == 400, (path, r.text)
        assert (r.json()["ok"], r.json()["code"]) == (False, "invalid_query")


# --- framing ---------------------------------------------------------------------------------

MALFORMED = {
    "bad-content-length": _post("/hooks/wake", b"{}").replace(
        b"Content-Length: 2", b"Content-Length: 2x"
    ),
    "te-and-cl": (
        b"POST /hooks/wake HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    ),
    "bad-chunk-size": (
        b"POST /hooks/wake HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n"
    ),
    "control-in-header": b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n",
    "lowercase-method": b"post /hooks/wake HTTP/1.1\r\nHost: x\r\n\r\n",
    "not-http": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40 + b"\r\n\r\n",
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_requests_are_answered_in_json(gw: GatewayProcess, name: str) -> None:
    status, headers, body = raw(gw, MALFORMED[name])
    assert status == 400
    assert headers["connection"] == "close"
    assert (body["ok"], body["code"]) == (False, "malformed_request")


def test_a_64k_url_and_a_32m_header_are_431_before_authentication(gw: GatewayProcess) -> None:
    status, headers, body = raw(
        gw, f"GET /hooks/{'a' * 65536} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    )
    assert (status, body["code"], headers["connection"]) == (431, "headers_too_large", "close")
    with socket.create_connection(_address(gw), timeout=10) as sock:
        sock.sendall(b"POST /hooks/wake HTTP/1.1\r\nHost: x\r\nX-Big: ")
        sent = 0
        with pytest.raises(OSError):  # the server answers and closes long before 32 MiB
            while sent < 32 * 1024 * 1024:
                sock.sendall(b"a" * 65536)
                sent += 65536
        assert sent < 4 * 1024 * 1024


def test_a_dribbled_header_is_408_and_the_connection_closed(gw: GatewayProcess) -> None:
    with socket.create_connection(_address(gw), timeout=10) as sock:
        started = time.monotonic()
        sock.sendall(b"POST /hooks/wake HTTP/1.1\r\nHost: x\r\n")
        try:
            for _ in range(20):
                sock.sendall(b"X-Slow: 1\r\n")
                time.sleep(0.2)
        except OSError:
            pass
        status, headers, body = _read_closed(sock)
        assert (status, body["code"], headers["connection"]) == (408, "header_timeout", "close")
        assert time.monotonic() - started < 3


def _read_response(sock: socket.socket, pending: bytes) -> tuple[int, Any, bytes]:
    """One response off a kept-alive connection: (status, JSON body, bytes read past it)."""
    while b"\r\n\r\n" not in pending:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        pending += chunk
    head, _, rest = pending.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(int(ln.split(":")[1]) for ln in lines if ln.lower().startswith("content-length"))
    while len(rest) < length:
        rest += sock.recv(65536)
    return int(lines[0].split()[1]), json.loads(rest[:length]), rest[length:]


def test_the_header_timeout_counts_per_request_on_a_kept_alive_connection(
    gw: GatewayProcess,
) -> None:
    """One timer per connection: requests that keep it busy past the timeout are served, and a
    head dribbled after them is still refused about one timeout after its first byte."""
    request = _post("/hooks/wake", b'{"text": "kept alive"}').replace(b"Connection: close\r\n", b"")
    with socket.create_connection(_address(gw), timeout=10) as sock:
        pending = b""
        started = time.monotonic()
        while time.monotonic() - started < 1.6:  # the timeout is 1 s
            sock.sendall(request)
            status, body, pending = _read_response(sock, pending)
            assert (status, body["ok"]) == (200, True)
            time.sleep(0.15)
        dribbled = time.monotonic()
        sock.sendall(b"POST /hooks/wake HTTP/1.1\r\n")
        try:
            for _ in range(20):
                sock.sendall(b"X-Slow: 1\r\n")
                time.sleep(0.2)
        except OSError:
            pass
        status, _, body = _read_closed(sock)
        assert (status, body["code"]) == (408, "header_timeout")
        assert 0.9 < time.monotonic() - dribbled < 2.5


def test_an_idle_connection_is_closed_after_the_header_timeout(gw: GatewayProcess) -> None:
    with socket.create_connection(_address(gw), timeout=10) as sock:
        status, _, body = _read_closed(sock)
    assert (status, body["code"]) == (408, "header_timeout")


def test_413_and_408_close_the_connection(gw: GatewayProcess) -> None:
    # declared too large: answered at once (the client has only sent the start of its body)
    big = _post("/hooks/wake", b"x" * 270000)[: -270000 + 1000]
    status, headers, body = raw(gw, big)
    assert (status, body["code"], headers["connection"]) == (413, "payload_too_large", "close")
    with socket.create_connection(_address(gw), timeout=10) as sock:
        head = _post("/hooks/wake", b"{}").replace(b"Content-Length: 2", b"Content-Length: 50")
        head = head.replace(b"Connection: close\r\n", b"")
        sock.sendall(head)  # the body never comes
        status, headers, body = _read_closed(sock)
    assert (status, body["code"], headers["connection"]) == (408, "body_timeout", "close")


# --- the token header alias ------------------------------------------------------------------


def test_x_openclaw_token_is_an_alias_of_x_service_token(gw: GatewayProcess) -> None:
    r = gw.hook("wake", {"text": "alias"}, token=None, headers={"x-openclaw-token": HOOK_TOKEN})
    assert r.status_code == 200, r.text
    r = gw.hook("wake", {"text": "alias"}, headers={"x-openclaw-token": HOOK_TOKEN})
    assert (r.status_code, r.json()["code"]) == (401, "unauthorized")
    assert "exactly one way" in r.json()["error"]
    r = gw.hook(
        "wake",
        {"text": "alias"},
        token=None,
        headers={"x-openclaw-token": HOOK_TOKEN, "x-service-token": HOOK_TOKEN},
    )
    assert r.status_code == 401


# --- forwarded addresses ---------------------------------------------------------------------


def _wrong(gw: GatewayProcess, xff: str) -> int:
    return gw.hook(
        "wake", {"text": "x"}, token="wrong" * 6, headers={"X-Forwarded-For": xff}
    ).status_code


def test_rotating_x_forwarded_for_does_not_escape_the_lock_out(
    start_gateway: Callable[..., GatewayProcess],
) -> None:
    gw = start_gateway(_config())
    statuses = [_wrong(gw, f"198.51.100.{i}") for i in range(8)]
    assert statuses[:5] == [401] * 5 and statuses[5:] == [429] * 3
    entries = eventually(lambda: len(x := logged(gw, "/hooks/wake")) >= 5 and x)
    assert {e["client"] for e in entries} == {"127.0.0.1"}


def test_behind_a_trusted_proxy_the_forwarded_client_is_locked_out(
    start_gateway: Callable[..., GatewayProcess],
) -> None:
    gw = start_gateway(_config(trustedProxies=["127.0.0.0/8", "10.0.0.0/8"]))
    # each client its own bucket: five failures from one address lock out that address only
    assert [_wrong(gw, "203.0.113.7") for _ in range(6)] == [401] * 5 + [429]
    assert _wrong(gw, "203.0.113.8") == 401
    # the right-most untrusted hop counts; what the client wrote to its left does not
    assert _wrong(gw, "203.0.113.9, 203.0.113.7, 10.1.2.3") == 429
    assert gw.client is not None
    r = gw.client.post(
        "/hooks/wake",
        json={"text": "fwd"},
        headers={"Authorization": f"Bearer {HOOK_TOKEN}", "Forwarded": 'for="[2001:db8::5]:1"'},
    )
    assert r.status_code == 200, r.text
    wanted = {"2001:db8::5", "203.0.113.7", "203.0.113.8"}

    def clients() -> set[str] | None:
        seen = {e["client"] for e in logged(gw, "/hooks/wake")}
        return seen if wanted <= seen else None

    assert "127.0.0.1" not in eventually(clients)


# --- logs ------------------------------------------------------------------------------------


def test_a_request_cannot_forge_a_log_line(gw: GatewayProcess) -> None:
    assert gw.client is not None
    r = gw.client.post(
        "/hooks/x%0d%0aFORGED-LOG-LINE%1b[31m",
        json={},
        headers={"Authorization": f"Bearer {HOOK_TOKEN}"},
    )
    assert (r.status_code, r.json()["code"]) == (404, "not_found")
    gw.hook("wake", content=b"\xff", headers={"Content-Type": "application/json"})
    entries = eventually(
        lambda: [e for e in gw.admin("/api/requests", limit=500)["items"] if "FORGED" in e["path"]]
    )
    assert entries[0]["path"] == "/hooks/x\\x0d\\x0aFORGED-LOG-LINE\\x1b[31m"
    lines = gw.stderr().splitlines()
    assert not any(line.startswith("FORGED") for line in lines)
    assert any("x\\x0d\\x0aFORGED-LOG-LINE" in line for line in lines)
    assert "\x1b" not in gw.stderr()
