"""RabbitMQ as a pull source, against the real broker on 127.0.0.1:5672 (guest/guest).

Each test its own queue (declared by the gateway); messages are published with aio-pika to the
default exchange, as a relay would, and queues are inspected with it.
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

aio_pika = pytest.importorskip("aio_pika")

URL = "amqp://guest:guest@127.0.0.1:5672/"
QUEUES = {"routed": unique("routed"), "refused": unique("refused")}


def _run(job: Callable[[Any], Any]) -> Any:
    """Run `job(channel)` on a fresh connection."""

    async def main() -> Any:
        conn = await aio_pika.connect(URL, timeout=5)
        try:
            return await job(await conn.channel())
        finally:
            await conn.close()

    return asyncio.run(main())


def publish(queue: str, messages: list[tuple[bytes, dict[str, str]]], **props: Any) -> None:
    async def send(ch: Any) -> None:
        for i, (body, headers) in enumerate(messages):
            ctype = headers.pop("content-type", None)
            await ch.default_exchange.publish(
                aio_pika.Message(
                    body,
                    headers=headers,
                    content_type=ctype,
                    message_id=f"{queue}-{i}",
                    delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                    **props,
                ),
                routing_key=queue,
            )

    _run(send)


def depth(queue: str) -> tuple[int, int]:
    """(ready messages, consumers) of a queue."""

    async def info(ch: Any) -> tuple[int, int]:
        q = await ch.declare_queue(queue, passive=True)
        r = q.declaration_result
        return int(r.message_count), int(r.consumer_count)

    return tuple(_run(info))  # type: ignore[return-value]


def declare(queue: str) -> None:
    async def make(ch: Any) -> None:
        await ch.declare_queue(queue, durable=True)

    _run(make)


def delete(*queues: str) -> None:
    async def drop(ch: Any) -> None:
        for q in queues:
            await ch.queue_delete(q)

    _run(drop)


@pytest.fixture(scope="module")
def broker() -> Iterator[None]:
    try:
        _run(lambda ch: asyncio.sleep(0))
    except Exception as e:
        pytest.skip(f"no RabbitMQ on 127.0.0.1:5672 ({type(e).__name__}: {e})")
    yield
    queues = list(QUEUES.values())
    delete(*queues, QUEUES["refused"] + ".refused")


def _source(name: str, queue: str, path: str = "plain", **opts: Any) -> dict[str, Any]:
    return {"name": name, "path": path, "rabbitmq": {"url": URL, "queue": queue, **opts}}


@pytest.fixture(scope="module")
def gw(broker: None, start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    config = source_config(
        [
            _source("routed", QUEUES["routed"], "github"),
            _source(
                "refused",
                QUEUES["refused"],
                "github",
                deadLetterExchange=QUEUES["refused"] + ".dlx",
            ),
        ]
    )
    gw = start_module_gateway(config, env=GITHUB_ENV)
    eventually(lambda: all(source_state(gw, n)["connected"] for n in ("routed", "refused")))
    return gw


def test_signed_messages_are_routed_by_their_headers_and_acked(gw: GatewayProcess) -> None:
    queue = QUEUES["routed"]
    issue = github_message("issues", {"action": "opened", "issue": {"number": 31}})
    push = github_message("push", {"ref": "refs/heads/x", "repository": {"full_name": "c/d"}})
    publish(queue, [issue, push])
    eventually(lambda: "issue 31 opened" in event_texts(gw, "gh-issues"), what="the wake event")
    lines = eventually(
        lambda: len(x := requests_of(gw, "source:routed")) >= 2 and x, what="two log lines"
    )
    assert {(x["status"], x["rule"]) for x in lines} == {(200, "gh-issues"), (202, "gh-push")}
    eventually(lambda: source_state(gw, "routed")["acked"] == 2, what="both acknowledged")
    assert depth(queue)[0] == 0
    assert source_state(gw, "routed")["kind"] == "rabbitmq"


def test_refused_messages_go_to_the_dead_letter_exchange(gw: GatewayProcess) -> None:
    queue = QUEUES["refused"]
    bad = github_message("issues", {"action": "x", "issue": {"number": 2}}, secret="wrong")
    publish(queue, [bad, (b"nope", {"content-type": "application/json"})])
    lines = eventually(
        lambda: len(x := requests_of(gw, "source:refused")) >= 2 and x, what="two refusals"
    )
    assert sorted(x["code"] for x in lines) == ["invalid_json", "invalid_signature"]
    # dead-lettered once, not redelivered: the refused queue holds both, the source none
    eventually(lambda: depth(queue + ".refused")[0] == 2, what="both dead-lettered")
    assert depth(queue)[0] == 0
    assert source_state(gw, "refused")["refused"] == 2
    assert len(requests_of(gw, "source:refused")) == 2


def test_a_killed_gateway_loses_nothing_and_runs_nothing_twice(
    broker: None, start_gateway: Callable[..., GatewayProcess]
) -> None:
    queue = unique("killed")
    config = source_config([{**_source("k", queue), "maxInFlight": 8}])
    texts = [f"r{i}" for i in range(1500)]
    try:
        declare(queue)  # a backlog waits before the gateway starts: the kill lands mid-stream
        publish(queue, [(plain(t), {}) for t in texts])
        gw = start_gateway(config, name="killed", env=GITHUB_ENV)
        # mid-stream (the cheap counters, not the event list, so the probe keeps up)
        eventually(
            lambda: source_state(gw, "k")["acked"] >= 40 and depth(queue)[0] > 0,
            what="some messages acknowledged and more still ready",
        )
        gw.kill()
        assert depth(queue)[0] > 0, "the kill came after every message was settled"
        gw.start()
        stored_once(gw, texts)
        eventually(lambda: depth(queue)[0] == 0, what="every message acknowledged")
        assert source_state(gw, "k")["redelivered"] >= 1  # the killed one's unacked messages
    finally:
        delete(queue)


def test_two_gateways_on_postgresql_share_one_queue(broker: None, tmp_path: Path) -> None:
    queue = unique("shared")
    config = source_config([{**_source("shared", queue), "maxInFlight": 16}])
    texts = [f"q{i}" for i in range(200)]
    try:
        with two_gateways(config, tmp_path, GITHUB_ENV) as gws:
            eventually(lambda: depth(queue)[1] == 2, what="two consumers")
            publish(queue, [(plain(t), {}) for t in texts])
            stored_once(gws[0], texts)
            assert all(acked_by_all(gws, "shared", len(texts)))  # both took a share
    finally:
        delete(queue)
