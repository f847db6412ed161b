"""Per-route limits: `rateLimit` (429 rate_limited + Retry-After) and `maxInFlight` (429
too_many_in_flight) on mappings and on the built-in paths (`hooks.limits`), on both stores."""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import pytest

from hookwise.engine.config.load import load_data
from hookwise.engine.errors import ConfigError
from tests.http.test_operate import sample, scrape
from tests.support.gateway import HOOK_TOKEN, GatewayProcess, base_config
from tests.support.wait import eventually


def _mapping(path: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": path,
        "match": {"path": path},
        "action": "wake",
        "textTemplate": "hello from " + path,
        **extra,
    }


def _hold(gw: GatewayProcess, name: str) -> socket.socket:
    """A request of `name` whose body never finishes arriving: in flight until closed."""
    u = urlsplit(gw.url)
    s = socket.create_connection((u.hostname, u.port), timeout=10)
    s.sendall(
        f"POST /hooks/{name} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {HOOK_TOKEN}\r\nContent-Length: 100\r\n\r\n{{".encode()
    )
    return s


def _wait_in_flight(gw: GatewayProcess, route: str, n: int) -> None:
    eventually(lambda: sample(scrape(gw), "hookwise_in_flight", route=route) == n)


def test_a_mapping_over_its_rate_is_429_rate_limited_with_retry_after(start_gateway) -> None:
    gw = start_gateway(
        base_config(
            mappings=[
                _mapping("limited", rateLimit={"requests": 3, "per": "1h"}),
                _mapping("free"),
            ]
        )
    )
    for _ in range(3):
        assert gw.hook("limited", {}).status_code == 200
    r = gw.hook("limited", {})
    assert r.status_code == 429
    body = r.json()
    assert body["ok"] is False and body["code"] == "rate_limited"
    # one request every 20 minutes at the steady rate (an hour is long enough that a slow
    # machine cannot see one refill during the test): the next is admitted within 20 minutes
    assert 60 < int(r.headers["retry-after"]) <= 1200
    # another route is not counted
    for _ in range(5):
        assert gw.hook("free", {}).status_code == 200
    # nothing refused was stored; the refusal is counted in metrics
    assert len(gw.admin("/api/events")["items"]) == 8
    samples = scrape(gw)
    assert sample(samples, "hookwise_limited_total", route="/hooks/limited", code="rate_limited")
    assert "429 rate_limited" in gw.stderr()


def test_a_client_that_keeps_sending_after_429_has_its_refusals_paced(start_gateway) -> None:
    gw = start_gateway(
        base_config(
            mappings=[_mapping("limited", rateLimit={"requests": 1, "per": "1h"}), _mapping("free")]
        )
    )
    assert gw.hook("limited", {}).status_code == 200
    with ThreadPoolExecutor(max_workers=40) as pool:
        answers = [pool.submit(gw.hook, "limited", {}) for _ in range(40)]
        # beyond the burst the refusals wait for their turn (visible in metrics) ...
        eventually(lambda: (sample(scrape(gw), "hookwise_refusals_held") or 0) >= 1)
        # ... while another route is answered at once
        assert gw.hook("free", {}).status_code == 200
        codes = [a.result().json()["code"] for a in answers]
    assert codes == ["rate_limited"] * 40  # every one answered, none lost
    eventually(lambda: sample(scrape(gw), "hookwise_refusals_held") == 0)


def test_an_unauthenticated_request_is_not_counted(start_gateway) -> None:
    gw = start_gateway(
        base_config(mappings=[_mapping("limited", rateLimit={"requests": 1, "per": "1h"})])
    )
    for _ in range(3):
        assert gw.hook("limited", {}, token="wrong-token-0123456789abcdef").status_code == 401
    assert gw.hook("limited", {}).status_code == 200
    assert gw.hook("limited", {}).status_code == 429


def test_by_address_counts_each_client_as_the_trusted_proxies_resolve_it(start_gateway) -> None:
    cfg = base_config(
        mappings=[_mapping("per-client", rateLimit={"requests": 2, "per": "1h", "by": "address"})]
    )
    cfg["gateway"]["trustedProxies"] = ["127.0.0.1"]
    gw = start_gateway(cfg)

    def post(address: str) -> int:
        return gw.hook("per-client", {}, headers={"X-Forwarded-For": address}).status_code

    assert [post("192.0.2.1") for _ in range(3)] == [200, 200, 429]
    assert [post("192.0.2.2") for _ in range(2)] == [200, 200]
    r = gw.hook("per-client", {}, headers={"X-Forwarded-For": "192.0.2.1"})
    assert r.status_code == 429 and "192.0.2.1" in r.json()["error"]
    assert int(r.headers["retry-after"]) > 60  # 2 per hour: one every 30 minutes


def test_the_built_in_paths_take_their_limits_from_hooks_limits(start_gateway) -> None:
    gw = start_gateway(base_config(limits={"wake": {"rateLimit": {"requests": 2, "per": "1h"}}}))
    assert [gw.hook("wake", {"text": "x"}).status_code for _ in range(3)] == [200, 200, 429]
    r = gw.hook("agent", {"message": "x", "deliver": False, "wakeMode": "next-heartbeat"})
    assert r.status_code == 202  # /agent has no limit


def test_max_in_flight_refuses_a_request_beyond_the_cap_until_one_ends(start_gateway) -> None:
    gw = start_gateway(base_config(mappings=[_mapping("capped", maxInFlight=2), _mapping("free")]))
    held = [_hold(gw, "capped"), _hold(gw, "capped")]
    try:
        _wait_in_flight(gw, "/hooks/capped", 2)
        r = gw.hook("capped", {})
        assert r.status_code == 429 and r.json()["code"] == "too_many_in_flight"
        assert r.headers["retry-after"] == "1"
        assert gw.hook("free", {}).status_code == 200  # another route is not capped
    finally:
        held[0].close()
    _wait_in_flight(gw, "/hooks/capped", 1)
    try:
        assert gw.hook("capped", {}).status_code == 200
    finally:
        held[1].close()
    samples = scrape(gw)
    assert sample(
        samples, "hookwise_limited_total", route="/hooks/capped", code="too_many_in_flight"
    )


def test_max_in_flight_on_the_agent_path(start_gateway) -> None:
    gw = start_gateway(base_config(limits={"agent": {"maxInFlight": 1}}))
    held = _hold(gw, "agent")
    try:
        _wait_in_flight(gw, "/hooks/agent", 1)
        r = gw.hook("agent", {"message": "x", "deliver": False})
        assert r.status_code == 429 and r.json()["code"] == "too_many_in_flight"
        assert gw.hook("wake", {"text": "x"}).status_code == 200
    finally:
        held.close()


@pytest.mark.parametrize(
    "mappings",
    [
        [{"action": "wake", "rateLimit": {"requests": 1, "per": "1m"}}],  # no match.path
        [
            _mapping("a", rateLimit={"requests": 1, "per": "1m"}),
            {**_mapping("a", rateLimit={"requests": 2, "per": "1m"}), "id": "a2"},
        ],
        [_mapping("a", rateLimit={"requests": 0, "per": "1m"})],
        [_mapping("a", rateLimit={"requests": 1, "per": 0})],
        [_mapping("a", rateLimit={"requests": 1, "per": "1m", "by": "header"})],
        [_mapping("a", maxInFlight=0)],
    ],
)
def test_limits_that_cannot_work_fail_at_load(mappings: list[dict[str, Any]]) -> None:
    from hookwise.server.lifecycle.gateway import compile_rules

    with pytest.raises(ConfigError):
        compile_rules(load_data(base_config(mappings=mappings))).close()


def test_unsigned_dribblers_hold_no_in_flight_slot_of_a_signature_route(start_gateway) -> None:
    import hashlib
    import hmac
    import json

    secret = "whsec-in-flight"
    verify = {"scheme": "github", "secret": secret, "auth": "signature"}
    gw = start_gateway(base_config(mappings=[_mapping("signed", maxInFlight=2, verify=verify)]))
    u = urlsplit(gw.url)
    dribblers = []
    for _ in range(2):  # a wrong signature, and a 40-byte body sent a byte at a time
        s = socket.create_connection((u.hostname, u.port), timeout=10)
        s.sendall(
            b"POST /hooks/signed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"X-GitHub-Event: issues\r\nX-Hub-Signature-256: sha256=" + b"0" * 64
            + b"\r\nContent-Length: 40\r\n\r\n{"
        )  # fmt: skip
        dribblers.append(s)
    try:
        body = json.dumps({"action": "opened"}).encode()
        mac = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        headers = {"X-GitHub-Event": "issues", "X-Hub-Signature-256": f"sha256={mac}",
                   "Content-Type": "application/json"}  # fmt: skip
        for _ in range(3):  # while both dribble, every signed delivery is handled
            for s in dribblers:
                s.sendall(b" ")
            r = gw.hook("signed", content=body, headers=headers, token=None)
            assert r.status_code == 200, r.text
        assert sample(scrape(gw), "hookwise_in_flight", route="/hooks/signed") == 0
    finally:
        for s in dribblers:
            s.close()
