"""Authentication: the three ways, refusals, the lock-out, 405 before auth, tokens never logged."""

from __future__ import annotations

import pytest

from tests.support.gateway import HOOK_TOKEN, GatewayProcess, base_config


def _wake(gw: GatewayProcess, **kw) -> object:
    return gw.hook("wake", {"text": "auth test"}, **kw)


@pytest.mark.parametrize(
    "way",
    [
        {"headers": {"Authorization": f"Bearer {HOOK_TOKEN}"}},
        {"headers": {"authorization": f"bearer {HOOK_TOKEN}"}},
        {"headers": {"x-service-token": HOOK_TOKEN}},
        {"params": {"token": HOOK_TOKEN}},
    ],
)
def test_each_way_of_presenting_the_token_is_accepted(gateway: GatewayProcess, way: dict) -> None:
    r = _wake(gateway, token=None, **way)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    "way",
    [
        {},
        {"headers": {"Authorization": "Bearer wrong-token"}},
        {"headers": {"Authorization": f"Basic {HOOK_TOKEN}"}},
        {"headers": {"Authorization": "Bearer"}},
        {"headers": {"x-service-token": HOOK_TOKEN + "x"}},
        {"params": {"token": HOOK_TOKEN[:-1]}},
        {"headers": {"Authorization": f"Bearer {HOOK_TOKEN}", "x-service-token": HOOK_TOKEN}},
        {"headers": {"x-service-token": HOOK_TOKEN}, "params": {"token": HOOK_TOKEN}},
        {"params": {"token": "\U0010fdb7"}},  # beyond latin-1 once percent-decoded (was a 500)
    ],
)
def test_a_missing_wrong_or_ambiguous_token_is_401(start_gateway, way: dict) -> None:
    gw = start_gateway()
    r = _wake(gw, token=None, **way)
    assert r.status_code == 401
    body = r.json()
    assert body["ok"] is False and body["code"] == "unauthorized"
    assert gw.admin("/api/events")["items"] == []


def test_a_query_token_of_any_bytes_is_a_401_not_a_server_error(start_gateway) -> None:
    gw = start_gateway()
    assert gw.client is not None
    for raw in ("%ED%A0%80", "%FF%FE", "%F4%8F%B6%B7"):  # a surrogate, not UTF-8, beyond latin-1
        r = gw.client.post(f"/hooks/wake?token={raw}", json={"text": "auth test"})
        assert (r.status_code, r.json()["code"]) == (401, "unauthorized"), raw


def test_non_post_is_405_with_allow_before_auth(gateway: GatewayProcess) -> None:
    for method in ("GET", "PUT", "DELETE", "PATCH"):
        r = gateway.client.request(method, "/hooks/wake")
        assert r.status_code == 405
        assert r.headers["allow"] == "POST"
        assert r.json()["code"] == "method_not_allowed"


def test_lockout_after_repeated_failures_and_a_correct_token_still_passes(start_gateway) -> None:
    config = base_config(authThrottle={"maxFailures": 3, "windowSeconds": 60, "lockoutSeconds": 30})
    gw = start_gateway(config)
    for _ in range(3):
        assert _wake(gw, token="bad-token").status_code == 401
    r = _wake(gw, token="bad-token")
    assert r.status_code == 429
    assert r.json()["code"] == "locked_out"
    assert 1 <= int(r.headers["retry-after"]) <= 30
    assert _wake(gw, token=None).status_code == 429
    # the right token passes during the lock-out, and clears it
    assert _wake(gw).status_code == 200
    assert _wake(gw, token="bad-token").status_code == 401


def test_405_does_not_count_as_a_failure(start_gateway) -> None:
    gw = start_gateway(base_config(authThrottle={"maxFailures": 2}))
    for _ in range(5):
        assert gw.client.get("/hooks/wake").status_code == 405
    assert _wake(gw, token="bad").status_code == 401


def test_tokens_and_payloads_never_reach_the_log(start_gateway) -> None:
    gw = start_gateway()
    secret_text = "payload-secret-7f3a"
    assert _wake(gw, token=None, params={"token": HOOK_TOKEN}).status_code == 200
    assert gw.hook("wake", {"text": secret_text}).status_code == 200
    assert gw.hook("wake", {"text": secret_text, "bad": 1}).status_code == 400
    assert _wake(gw, token="wrong-token-value-123").status_code == 401
    gw.stop()
    log = gw.stderr()
    assert "authentication failed" in log
    assert HOOK_TOKEN not in log
    assert "wrong-token-value-123" not in log
    assert secret_text not in log


def test_hooks_disabled_means_no_hook_route(start_gateway) -> None:
    gw = start_gateway({"hooks": {"enabled": False}})
    r = gw.hook("wake", {"text": "x"})
    assert r.status_code == 404
    assert r.json()["code"] == "not_found"


def test_paths_that_only_start_like_the_hook_path_are_not_hooks(gateway: GatewayProcess) -> None:
    r = gateway.client.post("/hooksX/wake", headers={"Authorization": f"Bearer {HOOK_TOKEN}"})
    assert r.status_code == 404 and r.json()["code"] == "not_found"


def test_the_bare_hook_path_is_404_after_auth(gateway: GatewayProcess) -> None:
    assert gateway.client.post("/hooks").status_code == 401
    r = gateway.client.post("/hooks", headers={"Authorization": f"Bearer {HOOK_TOKEN}"})
    assert r.status_code == 404 and r.json()["code"] == "not_found"


def test_unknown_hook_name_is_404(gateway: GatewayProcess) -> None:
    r = gateway.hook("nothing-here", {"x": 1})
    assert r.status_code == 404 and r.json()["code"] == "not_found"


def test_a_custom_hook_path_is_normalised(start_gateway) -> None:
    config = base_config(path="inbound///")
    gw = start_gateway(config)
    r = gw.client.post(
        "/inbound/wake", json={"text": "x"}, headers={"Authorization": f"Bearer {HOOK_TOKEN}"}
    )
    assert r.status_code == 200
    assert gw.client.post("/hooks/wake", json={"text": "x"}).status_code == 404
