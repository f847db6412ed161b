"""Each agent has its own last route: a delivery for one agent's run follows and updates that
agent's main session's route, never another's."""

from __future__ import annotations

from tests.channels.test_delivery_http import config, delivery_of, fakes  # noqa: F401 (fixture)


def test_last_routes_are_per_agent(start_gateway, fakes) -> None:  # noqa: F811
    tg = fakes["telegram"]
    cfg = config(
        {"telegram": tg.config()},
        session={"lastRoute": {"channel": "telegram", "to": "-100111"}},  # the default agent's
    )
    cfg["agents"]["list"] = [{"id": "main", "default": True}, {"id": "hooks"}]
    gw = start_gateway(cfg)

    def agent(**payload: object) -> str:
        r = gw.hook("agent", {"wakeMode": "next-heartbeat", **payload})
        assert r.status_code == 202, r.text
        return r.json()["runId"]

    d = delivery_of(gw, agent(message="no route yet", agentId="hooks"), "failed")
    assert d["lastError"].startswith("no last route to deliver to (channel: last)")
    delivery_of(gw, agent(message="a", agentId="hooks", channel="telegram", to="-100222"), "sent")
    d = delivery_of(gw, agent(message="b", agentId="hooks"), "sent", "failed")
    assert (d["channel"], d["to"], d["state"]) == ("telegram", "-100222", "sent")
    d = delivery_of(gw, agent(message="c"), "sent", "failed")  # main keeps its own route
    assert (d["to"], d["state"]) == ("-100111", "sent")
    assert [s.json["chat_id"] for s in tg.sends] == ["-100222", "-100222", "-100111"]
