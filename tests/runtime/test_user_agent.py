"""Every outbound HTTP call names hookwise and its version in `User-Agent`: the model provider's
request and the channel's delivery, through the real gateway."""

from __future__ import annotations

from importlib.metadata import version

from tests.fakes.channel_servers import start
from tests.fakes.model_server import ModelServer
from tests.runtime.test_runtime_http import config, run_state
from tests.support.wait import eventually


def test_model_and_channel_calls_carry_the_hookwise_user_agent(
    start_gateway, model_server: ModelServer
) -> None:
    tg = start("telegram")
    try:
        cfg = config(model_server)
        cfg["channels"] = {"telegram": tg.config()}
        gw = start_gateway(cfg)
        model_server.reply("done")
        r = gw.hook(
            "agent",
            {
                "message": "deploy",
                "model": "fake/gpt-test",
                "channel": "telegram",
                "to": "-1001234567890",
                "wakeMode": "next-heartbeat",
            },
        )
        assert r.status_code == 202, r.text
        run_state(gw, r.json()["runId"], "succeeded")
        [send] = eventually(lambda: tg.sends, what="the telegram delivery")
    finally:
        tg.stop()
    expected = f"hookwise/{version('hookwise')}"
    assert model_server.last_request.headers["user-agent"] == expected
    assert send.headers["user-agent"] == expected
