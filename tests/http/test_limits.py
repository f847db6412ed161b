"""Body limits: 413 on a declared or streamed oversize body, 408 on a slow one."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

from tests.support.gateway import HOOK_TOKEN, GatewayProcess, base_config


def _raw(
    gw: GatewayProcess, head: bytes, body_parts: list[bytes] = (), pause: float = 0.0
) -> bytes:
    """Send a hand-made HTTP request and return the raw response (up to the first 64 KiB)."""
    u = urlsplit(gw.url)
    with socket.create_connection((u.hostname, u.port), timeout=10) as s:
        s.sendall(head)
        for part in body_parts:
            if pause:
                time.sleep(pause)
            try:
                s.sendall(part)
            except OSError:
                break
        s.settimeout(10)
        data = b""
        while True:
            head_end = data.find(b"\r\n\r\n")
            if head_end >= 0:
                length = 0
                for line in data[:head_end].split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                if len(data) >= head_end + 4 + length:
                    return data
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk


def _status(raw: bytes) -> int:
    return int(raw.split(b" ", 2)[1])


def test_declared_oversize_body_is_413_without_reading_it(start_gateway) -> None:
    gw = start_gateway(base_config(maxBodyBytes=1024))
    head = (
        b"POST /hooks/wake HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + HOOK_TOKEN.encode() + b"\r\nContent-Length: 5000000\r\n\r\n"
    )
    raw = _raw(gw, head)  # no body is ever sent: the answer must come anyway
    assert _status(raw) == 413
    assert b'"code":"payload_too_large"' in raw


def test_streamed_body_crossing_the_limit_is_413(start_gateway) -> None:
    gw = start_gateway(base_config(maxBodyBytes=1024))
    head = (
        b"POST /hooks/wake HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + HOOK_TOKEN.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"x" * 600
    part = hex(len(chunk))[2:].encode() + b"\r\n" + chunk + b"\r\n"
    raw = _raw(gw, head, [part, part, part])
    assert _status(raw) == 413
    assert gw.admin("/api/events")["items"] == []


def test_body_exactly_at_the_limit_is_read(start_gateway) -> None:
    gw = start_gateway(base_config(maxBodyBytes=64))
    payload = b'{"text": "' + b"a" * (64 - 12) + b'"}'
    assert len(payload) == 64
    r = gw.hook("wake", content=payload, headers={"Content-Type": "application/json"})
    assert r.status_code == 200
    r = gw.hook("wake", content=payload + b" ", headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and r.json()["code"] == "payload_too_large"


def test_slow_body_is_408(start_gateway) -> None:
    gw = start_gateway(base_config(bodyTimeoutSeconds=0.5))
    head = (
        b"POST /hooks/wake HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + HOOK_TOKEN.encode() + b'\r\nContent-Length: 20\r\n\r\n{"te'
    )
    raw = _raw(gw, head)
    assert _status(raw) == 408
    assert b'"code":"body_timeout"' in raw


def test_a_body_arriving_in_pieces_within_the_timeout_is_read_whole(start_gateway) -> None:
    gw = start_gateway(base_config(bodyTimeoutSeconds=5))
    body = b'{"text": "in pieces", "mode": "next-heartbeat"}'
    head = (
        b"POST /hooks/wake HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + HOOK_TOKEN.encode() + b"\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    raw = _raw(gw, head, [body[:10], body[10:30], body[30:]], pause=0.2)
    assert _status(raw) == 200
    assert b'"ok":true' in raw
    [event] = gw.admin("/api/events")["items"]
    assert (event["text"], event["mode"]) == ("in pieces", "next-heartbeat")


def test_auth_comes_before_the_body_limit(start_gateway) -> None:
    gw = start_gateway(base_config(maxBodyBytes=16))
    r = gw.hook("wake", content=b"x" * 100, token="wrong")
    assert r.status_code == 401
