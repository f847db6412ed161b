"""NATS JetStream as a pull source, against the real nats-server (JetStream) on 127.0.0.1:4222.

The module makes one stream (subjects `<stream>.>`); each test publishes on its own subject
and its source's durable consumer filters on it. Messages are published with nats-py, as a
relay would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.gateway import GatewayProcess
from tests.support.sources import (
    GITHUB_ENV,
    acked_by_all,
    event_texts,
    github_message,
    plain,
    requests_of,
    source_config,
    source_state,
    stored_once,
    two_gateways,
    unique,
)
from tests.support.wait import eventually

nats = pytest.importorskip("nats")

URL = "nats://127.0.0.1:4222"
STREAM = unique("hooks").replace("-", "_")


def _run(job: Callable[[Any], Any]) -> Any:
    """Run `job(jetstream)` on a fresh connection."""

    async def main() -> Any:
        nc = await nats.connect(URL, connect_timeout=3, allow_reconnect=False)
        try:
            return await job(nc.jetstream())
        finally:
            await nc.close()

    return asyncio.run(main())


@pytest.fixture(scope="module")
def stream() -> Iterator[str]:
    async def create(js: Any) -> None:
        await js.add_stream(name=STREAM, subjects=[f"{STREAM}.>"])

    try:
        _run(create)
    except Exception as e:  # no server, or no JetStream
        pytest.skip(f"no NATS JetStream on 127.0.0.1:4222 ({type(e).__name__}: {e})")
    yield STREAM

    async def delete(js: Any) -> None:
        await js.delete_stream(STREAM)

    _run(delete)


def publish(subject: str, messages: list[tuple[bytes, dict[str, str]]]) -> None:
    async def send(js: Any) -> None:
        for body, headers in messages:
            await js.publish(f"{STREAM}.{subject}", body, headers=headers or None)

    _run(send)


def waiting(durable: str) -> int:
    """Messages the durable consumer has not had acknowledged (pending or unacked)."""

    async def info(js: Any) -> int:
        i = await js.consumer_info(STREAM, durable)
        return int(i.num_pending) + int(i.num_ack_pending)

    return int(_run(info))


def unacked(durable: str) -> int:
    async def info(js: Any) -> int:
        return int((await js.consumer_info(STREAM, durable)).num_ack_pending)

    return int(_run(info))


def _source(name: str, **nats_opts: Any) -> dict[str, Any]:
    return {
        "name": name,
        "path": nats_opts.pop("path", "plain"),
        "nats": {
            "url": URL,
            "stream": STREAM,
            "durable": name,
            "subject": f"{STREAM}.{name}",
            "fetchWait": "0.5s",
            **nats_opts,
        },
    }


@pytest.fixture(scope="module")
def gw(stream: str, start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    config = source_config([_source("routed", path="github"), _source("refused", path="github")])
    return start_module_gateway(config, env=GITHUB_ENV)


def test_signed_messages_are_routed_by_their_headers_and_acked(gw: GatewayProcess) -> None:
    issue = github_message("issues", {"action": "opened", "issue": {"number": 21}})
    push = github_message("push", {"ref": "refs/heads/dev", "repository": {"full_name": "a/b"}})
    publish("routed", [issue, push])
    eventually(lambda: "issue 21 opened" in event_texts(gw, "gh-issues"), what="the wake event")
    lines = eventually(
        lambda: len(x := requests_of(gw, "source:routed")) >= 2 and x, what="two log lines"
    )
    assert {(x["status"], x["rule"]) for x in lines} == {(200, "gh-issues"), (202, "gh-push")}
    eventually(lambda: waiting("routed") == 0, what="both acknowledged")
    state = source_state(gw, "routed")
    assert state["kind"] == "nats" and state["connected"] is True
    assert state["acked"] == 2 and state["redelivered"] == 0


def test_refused_messages_are_terminated_not_redelivered(gw: GatewayProcess) -> None:
    bad = github_message("issues", {"action": "x", "issue": {"number": 1}}, secret="wrong")
    publish("refused", [bad, (b"[1, 2", {"content-type": "application/json"})])
    lines = eventually(
        lambda: len(x := requests_of(gw, "source:refused")) >= 2 and x, what="two refusals"
    )
    assert sorted(x["code"] for x in lines) == ["invalid_json", "invalid_signature"]
    eventually(lambda: waiting("refused") == 0, what="both settled")
    assert source_state(gw, "refused")["refused"] == 2
    # past any AckWait: never delivered again
    assert len(requests_of(gw, "source:refused")) == 2


def test_a_killed_gateway_loses_nothing_and_runs_nothing_twice(
    stream: str, start_gateway: Callable[..., GatewayProcess]
) -> None:
    name = unique("k")
    config = source_config([{**_source(name, ackWait="2s"), "maxInFlight": 8}])
    texts = [f"n{i}" for i in range(1500)]
    publish(name, [(plain(t), {}) for t in texts])  # a backlog: the kill lands mid-stream
    gw = start_gateway(config, name="killed", env=GITHUB_ENV)
    # mid-stream (the cheap counters, not the event list, so the probe keeps up)
    eventually(
        lambda: source_state(gw, name)["acked"] >= 40 and waiting(name) > 0,
        what="some messages acknowledged and more still waiting",
    )
    gw.kill()
    assert waiting(name) > 0, "the kill came after every message was settled"
    held = unacked(name)  # delivered to the killed gateway, not acknowledged
    gw.start()
    stored_once(gw, texts)
    eventually(lambda: waiting(name) == 0, what="every message acknowledged")
    # what the killed gateway held came back, after AckWait
    assert source_state(gw, name)["redelivered"] >= held


def test_two_gateways_on_postgresql_share_one_durable_consumer(stream: str, tmp_path: Path) -> None:
    name = unique("shared")
    config = source_config([{**_source(name), "maxInFlight": 16}])
    texts = [f"s{i}" for i in range(200)]
    with two_gateways(config, tmp_path, GITHUB_ENV) as gws:
        publish(name, [(plain(t), {}) for t in texts])
        stored_once(gws[0], texts)
        acked_by_all(gws, name, len(texts))
