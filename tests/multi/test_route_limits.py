"""Per-route limits counted across gateway processes on one PostgreSQL database: the rate and
the in-flight cap are the route's, whichever process a request reaches."""

from __future__ import annotations

from collections.abc import Callable

from tests.http.test_route_limits import _hold, _mapping, _wait_in_flight
from tests.multi.test_gateways import gateways, shared_store  # noqa: F401 - fixture
from tests.support.gateway import GatewayProcess, base_config


def test_the_rate_of_a_route_is_shared_by_every_gateway(
    start_gateway: Callable[..., GatewayProcess],
    shared_store: list[str],  # noqa: F811
) -> None:
    cfg = base_config(mappings=[_mapping("limited", rateLimit={"requests": 4, "per": "1h"})])
    gws = gateways(start_gateway, 3, shared_store, cfg)
    statuses = [gws[i % 3].hook("limited", {}).status_code for i in range(9)]
    assert statuses.count(200) == 4 and statuses.count(429) == 5
    assert statuses[:4] == [200] * 4
    # and a key remembered refused in one process is refused in the others too
    assert {gw.hook("limited", {}).status_code for gw in gws} == {429}


def test_the_in_flight_cap_of_a_route_is_shared_by_every_gateway(
    start_gateway: Callable[..., GatewayProcess],
    shared_store: list[str],  # noqa: F811
) -> None:
    cfg = base_config(mappings=[_mapping("capped", maxInFlight=1)])
    first, second = gateways(start_gateway, 2, shared_store, cfg)
    held = _hold(first, "capped")
    try:
        _wait_in_flight(first, "/hooks/capped", 1)
        r = second.hook("capped", {})
        assert r.status_code == 429 and r.json()["code"] == "too_many_in_flight"
    finally:
        held.close()
    _wait_in_flight(first, "/hooks/capped", 0)
    from tests.support.wait import eventually

    eventually(lambda: second.hook("capped", {}).status_code == 200)
