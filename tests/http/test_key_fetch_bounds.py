"""The key fetcher under hostile remote servers, through the real server: a certificate host that
dribbles a byte a second is cut at the whole fetch's limit (not per read), and badly signed SNS
messages naming ever new certificate URLs under an allowed host cost at most the host's fetch
budget, never one outbound fetch each."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from hookwise.server.ingress.fetch import HOST_FETCHES, TIMEOUT
from tests.http.test_signatures_sns import OTHER, TOPIC, message
from tests.support.documents import serving
from tests.support.gateway import GatewayProcess, base_config

HITS: dict[str, int] = {}


def _route(path: str) -> tuple[int, bytes, dict[str, str]]:
    return 200, b"-----BEGIN CERTIFICATE-----\nnot one\n-----END CERTIFICATE-----\n", {}


@pytest.fixture(scope="module")
def flood_url() -> Iterator[str]:
    with serving(_route, HITS) as url:
        yield url + "/"


@pytest.fixture(scope="module")
def dribble_url() -> Iterator[str]:
    """A server that sends its headers, then one byte of body a second, for a minute."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 60\r\n\r\n")
            for _ in range(60):
                if stop.wait(1.0):
                    return
                try:
                    conn.sendall(b"x")
                except OSError:
                    return

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/"
    finally:
        stop.set()
        listener.close()


@pytest.fixture(scope="module")
def gw(
    start_module_gateway: Callable[..., GatewayProcess], flood_url: str, dribble_url: str
) -> GatewayProcess:
    def mapping(name: str, keys_url: str) -> dict[str, object]:
        verify = {"scheme": "sns", "topics": [TOPIC], "keysUrl": keys_url, "auth": "signature"}
        return {"id": name, "match": {"path": name}, "action": "wake",
                "textTemplate": "{{ payload.Subject }}", "verify": verify}  # fmt: skip

    mappings = [mapping("flood", flood_url), mapping("dribble", dribble_url)]
    return start_module_gateway(base_config(mappings=mappings), name="key-fetch-bounds")


def _post(gw: GatewayProcess, path: str, data: dict[str, str]) -> object:
    import json

    headers = {"Content-Type": "text/plain", "x-amz-sns-message-type": data["Type"]}
    assert gw.client is not None
    return gw.client.post(f"/hooks/{path}", content=json.dumps(data).encode(), headers=headers)


def test_a_dribbling_key_server_is_cut_at_the_whole_fetch_limit(
    gw: GatewayProcess, dribble_url: str
) -> None:
    started = time.monotonic()
    r = _post(gw, "dribble", message(dribble_url, cert_url=dribble_url + "cert.pem"))
    assert r.status_code == 503, r.text  # type: ignore[attr-defined]
    body = r.json()  # type: ignore[attr-defined]
    assert body["code"] == "keys_unavailable"
    assert f"not fetched within {TIMEOUT:g} s" in body["error"]
    # the body would take 60 s at a byte a second; a per-read timeout would never fire
    assert time.monotonic() - started < 60
    assert "not fetched within" in gw.stderr()


def test_new_certificate_urls_cost_at_most_the_hosts_fetch_budget(
    gw: GatewayProcess, flood_url: str
) -> None:
    HITS.clear()  # the module runs once per store backend, on one document server
    statuses = []
    for i in range(HOST_FETCHES + 15):
        data = message(flood_url, key=OTHER, cert_url=f"{flood_url}cert-{i}.pem")
        statuses.append(_post(gw, "flood", data).status_code)  # type: ignore[attr-defined]
    fetched = sum(n for path, n in HITS.items() if path.startswith("/cert-"))
    assert fetched <= HOST_FETCHES
    assert statuses.count(503) >= 15, statuses
    assert set(statuses) <= {401, 503}
    r = _post(gw, "flood", message(flood_url, key=OTHER, cert_url=f"{flood_url}cert-last.pem"))
    assert r.json()["code"] == "keys_unavailable"  # type: ignore[attr-defined]
    assert "too many new fetches" in r.json()["error"]  # type: ignore[attr-defined]
    assert "fetch budget spent" in gw.stderr()
