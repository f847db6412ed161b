"""A seeded fuzz of the HTTP surface: a few thousand malformed and hostile requests on raw
sockets, bounded in time. Every answer is JSON in the gateway's shape, nothing is a 500, no line
of the log is started by a request, and the gateway serves normally afterwards."""

from __future__ import annotations

import json
import random
import socket
import time
from collections.abc import Callable

import pytest

from tests.support.gateway import HOOK_TOKEN, GatewayProcess, base_config

SEED = 20261124
REQUESTS = 2500
TIME_BUDGET_S = 90.0

METHODS = [b"POST", b"GET", b"PUT", b"DELETE", b"post", b"P\x00ST", b"", b"GET /", b"PATCH"]
PATHS = [
    b"/hooks/wake",
    b"/hooks/agent",
    b"/hooks/mapped",
    b"/hooks/x%0d%0aFORGED",
    b"/hooks/%ff%fe",
    b"/hooks/../../etc/passwd",
    b"/api/runs?cursor=99999999999999999999",
    b"/api/events?limit=-1",
    b"/healthz",
    b"/hooks",
    b"*",
    b"/hooks/wake?token=" + HOOK_TOKEN.encode(),
]
BODIES = [
    b'{"text": "fuzz"}',
    b'{"message": "fuzz", "name": "F"}',
    b"[" * 5000,
    b'{"a": ' + b"{" * 70 + b"}" * 70 + b"}",
    b'{"text": "\xff\xfe"}',
    b'{"n": 123456789012345678901234567890}',
    b"text=a&payload=%7B%7D",
    b"\x00\x01\x02",
    b"",
    b'{"text": 1e400}',
    b'{"text": "' + b"x" * 3000 + b'"}',
]


def _request(rng: random.Random) -> bytes:
    method = rng.choice(METHODS)
    path = rng.choice(PATHS)
    body = rng.choice(BODIES)
    headers = [b"Host: fuzz"]
    if rng.random() < 0.7:
        headers.append(b"Authorization: Bearer " + HOOK_TOKEN.encode())
    if rng.random() < 0.2:
        headers.append(b"X-Service-Token: " + HOOK_TOKEN.encode())
    if rng.random() < 0.3:
        headers.append(b"X-Forwarded-For: 10.%d.0.1" % rng.randrange(256))
    framing = rng.random()
    if framing < 0.5:
        headers.append(b"Content-Length: %d" % len(body))
    elif framing < 0.6:
        headers.append(b"Content-Length: %d" % rng.choice([-1, 10**20, len(body) + 5]))
    elif framing < 0.7:
        headers.append(b"Transfer-Encoding: chunked")
        body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if rng.random() < 0.7 else b"zz\r\n"
    elif framing < 0.8:
        headers += [b"Content-Length: 3", b"Transfer-Encoding: chunked"]
    if rng.random() < 0.1:
        headers.append(b"X-Junk: " + bytes(rng.randrange(256) for _ in range(20)))
    if rng.random() < 0.05:
        headers.append(b"X-Big: " + b"b" * 20000)
    headers.append(b"Connection: close")
    data = method + b" " + path + b" HTTP/1.1\r\n" + b"\r\n".join(headers) + b"\r\n\r\n" + body
    if rng.random() < 0.1:  # a random byte flipped somewhere
        i = rng.randrange(len(data))
        data = data[:i] + bytes([rng.randrange(256)]) + data[i + 1 :]
    return data


def _exchange(address: tuple[str, int], data: bytes) -> bytes:
    with socket.create_connection(address, timeout=5) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except OSError:
            pass
        return received


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    config = base_config(
        mappings=[{"id": "mapped", "match": {"path": "mapped"}, "messageTemplate": "{{text}}"}],
        authThrottle={"maxFailures": 0},
        bodyTimeoutSeconds=2,
    )
    config["gateway"].update({"headerTimeoutSeconds": 2, "maxHeaderBytes": 16384})
    return start_module_gateway(config, name="fuzz")


def test_the_http_surface_holds_under_seeded_fuzz(gw: GatewayProcess) -> None:
    host, port = gw.url.removeprefix("http://").rsplit(":", 1)
    address = (host, int(port))
    rng = random.Random(SEED)
    started = time.monotonic()
    statuses: dict[int, int] = {}
    sent = empty = 0
    while sent < REQUESTS and time.monotonic() - started < TIME_BUDGET_S:
        data = _request(rng)
        answer = _exchange(address, data)
        sent += 1
        if not answer:
            empty += 1  # closed without an answer (the request never started, or a reset)
            continue
        head, _, body = answer.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        statuses[status] = statuses.get(status, 0) + 1
        assert status < 500, (data[:200], answer[:300])
        if status == 204:
            continue
        assert b"content-type: application/json" in head.lower(), (data[:200], answer[:300])
        document = json.loads(body)
        assert isinstance(document, dict) and isinstance(document.get("ok"), bool)
        if not document["ok"]:
            assert isinstance(document.get("code"), str) and document.get("error")
    print(f"{sent} requests, {empty} unanswered, statuses {sorted(statuses.items())}")
    assert empty < sent * 0.05
    assert sent >= 1000, f"only {sent} requests within the time budget"
    assert statuses.get(400, 0) > 0 and sum(v for k, v in statuses.items() if k < 300) > 0
    assert gw.proc is not None and gw.proc.poll() is None
    assert gw.hook("wake", {"text": "after the fuzz"}).status_code == 200
    log = gw.stderr()
    assert "Traceback" not in log and "unexpected error" not in log
    assert not any(line.startswith("FORGED") for line in log.splitlines())
