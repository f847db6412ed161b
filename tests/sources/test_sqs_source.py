"""Amazon SQS as a pull source, against moto in server mode (SQS and SNS over HTTP, on loopback).

One moto server for the module; each test its own queue. Messages are sent with boto3, as a
relay (or an SNS subscription) would. moto's SNS signs its envelopes with a placeholder, so a
source that checks SNS signatures refuses them; envelopes signed as AWS documents it are made
with the SNS door tests' certificate, served from a local server that `sns.keysUrl` names.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.http.test_signatures_sns import HITS, _route, message
from tests.support.documents import serving
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

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto")

AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
ENV = {**GITHUB_ENV, **AWS_ENV}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def moto_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.skip(f"moto did not start: {log.read_text()[-500:]}")
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def sqs(moto_url: str) -> Any:
    return boto3.client("sqs", endpoint_url=moto_url, **_creds())


@pytest.fixture(scope="module")
def sns_url() -> Iterator[str]:
    with serving(_route, HITS) as url:
        yield url + "/"


def _creds() -> dict[str, str]:
    return {
        "region_name": "us-east-1",
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }


def queue(sqs: Any, name: str) -> str:
    url: str = sqs.create_queue(QueueName=name)["QueueUrl"]
    return url


def left(sqs: Any, url: str) -> int:
    """Messages still in the queue, visible or not."""
    a = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(a["ApproximateNumberOfMessages"]) + int(a["ApproximateNumberOfMessagesNotVisible"])


def in_flight(sqs: Any, url: str) -> int:
    """Messages received and neither deleted nor visible again."""
    a = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(a["ApproximateNumberOfMessagesNotVisible"])


def send(sqs: Any, url: str, body: bytes, headers: dict[str, str] | None = None) -> None:
    attributes = {k: {"DataType": "String", "StringValue": v} for k, v in (headers or {}).items()}
    sqs.send_message(QueueUrl=url, MessageBody=body.decode(), MessageAttributes=attributes)


def _source(name: str, url: str, moto_url: str, path: str = "plain", **opts: Any) -> dict[str, Any]:
    block = {"queueUrl": url, "endpointUrl": moto_url, "waitTime": 1, **opts}
    return {"name": name, "path": path, "sqs": block}


QUEUES = {n: unique(n) for n in ("routed", "sns", "checked")}


@pytest.fixture(scope="module")
def urls(sqs: Any) -> dict[str, str]:
    return {n: queue(sqs, q) for n, q in QUEUES.items()}


@pytest.fixture(scope="module")
def gw(
    moto_url: str,
    urls: dict[str, str],
    sns_url: str,
    start_module_gateway: Callable[..., GatewayProcess],
) -> GatewayProcess:
    config = source_config(
        [
            _source("routed", urls["routed"], moto_url, "github"),
            _source("sns", urls["sns"], moto_url),
            _source(
                "checked",
                urls["checked"],
                moto_url,
                sns={"topics": ["arn:aws:sns:us-east-1:123456789012:alerts"], "keysUrl": sns_url},
            ),
        ]
    )
    return start_module_gateway(config, env=ENV)


def test_signed_messages_are_routed_by_their_attributes_and_deleted(
    gw: GatewayProcess, sqs: Any, urls: dict[str, str]
) -> None:
    body, headers = github_message("issues", {"action": "opened", "issue": {"number": 41}})
    send(sqs, urls["routed"], body, headers)
    bad, bad_headers = github_message(
        "issues", {"action": "x", "issue": {"number": 42}}, secret="no"
    )
    send(sqs, urls["routed"], bad, bad_headers)
    eventually(lambda: "issue 41 opened" in event_texts(gw, "gh-issues"), what="the wake event")
    lines = eventually(lambda: len(x := requests_of(gw, "source:routed")) >= 2 and x)
    assert sorted((x["status"], x["code"] or x["rule"]) for x in lines) == [
        (200, "gh-issues"),
        (401, "invalid_signature"),
    ]
    # both deleted: the stored one after its commit, the refused one for good
    eventually(lambda: left(sqs, urls["routed"]) == 0, what="both deleted")
    state = source_state(gw, "routed")
    assert state["kind"] == "sqs" and state["acked"] == 1 and state["refused"] == 1
    assert "issue 42 x" not in event_texts(gw, "gh-issues")


def test_sns_envelopes_are_unwrapped(
    gw: GatewayProcess, sqs: Any, urls: dict[str, str], moto_url: str
) -> None:
    sns = boto3.client("sns", endpoint_url=moto_url, **_creds())
    topic = sns.create_topic(Name=unique("topic"))["TopicArn"]
    arn = sqs.get_queue_attributes(QueueUrl=urls["sns"], AttributeNames=["QueueArn"])
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn["Attributes"]["QueueArn"])
    sns.publish(TopicArn=topic, Message=json.dumps({"text": "via sns"}))
    eventually(lambda: "via sns" in event_texts(gw, "plain"), what="the unwrapped message")
    eventually(lambda: left(sqs, urls["sns"]) == 0, what="deleted")


def test_sns_signatures_are_checked_when_the_source_names_its_topics(
    gw: GatewayProcess, sqs: Any, urls: dict[str, str], sns_url: str
) -> None:
    url = urls["checked"]
    good = message(sns_url, Message=json.dumps({"text": "signed by sns"}))
    send(sqs, url, json.dumps(good).encode())
    forged = message(sns_url, Message=json.dumps({"text": "forged"}))
    forged["Message"] = json.dumps({"text": "tampered"})
    send(sqs, url, json.dumps(forged).encode())
    other = message(
        sns_url, topic="arn:aws:sns:us-east-1:123456789012:other", Message='{"text": "x"}'
    )
    send(sqs, url, json.dumps(other).encode())
    eventually(lambda: "signed by sns" in event_texts(gw, "plain"), what="the signed message")
    lines = eventually(lambda: len(x := requests_of(gw, "source:checked")) >= 3 and x)
    assert sorted(x["status"] for x in lines) == [200, 401, 401]
    assert "tampered" not in event_texts(gw, "plain")
    eventually(lambda: left(sqs, url) == 0, what="all three deleted")


def test_a_killed_gateway_loses_nothing_and_runs_nothing_twice(
    sqs: Any, moto_url: str, start_gateway: Callable[..., GatewayProcess]
) -> None:
    url = queue(sqs, unique("killed"))
    texts = [f"q{i}" for i in range(300)]
    for i in range(0, len(texts), 10):  # a backlog: the kill lands mid-stream
        sqs.send_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(n), "MessageBody": plain(t).decode()}
                for n, t in enumerate(texts[i : i + 10])
            ],
        )
    source = _source("k", url, moto_url, visibilityTimeout=2)
    gw = start_gateway(source_config([{**source, "maxInFlight": 100}]), name="killed", env=ENV)
    # mid-stream (the cheap counters, not the event list, so the probe keeps up)
    eventually(
        lambda: source_state(gw, "k")["acked"] >= 40 and left(sqs, url) > 40,
        what="some messages deleted and more still queued",
    )
    gw.kill()
    assert left(sqs, url) > 0, "the kill came after every message was settled"
    held = in_flight(sqs, url)  # received by the killed gateway, not deleted
    gw.start()
    stored_once(gw, texts)
    eventually(lambda: left(sqs, url) == 0, what="every message deleted")
    # what the killed gateway held came back, after its visibility timeout
    assert source_state(gw, "k")["redelivered"] >= held


def test_the_visibility_of_held_messages_is_extended_until_they_are_settled(
    sqs: Any, moto_url: str
) -> None:
    """The broker client itself, on the real (moto) SQS: a message held past its visibility
    timeout stays invisible to other consumers; released, it is visible again at once."""
    import asyncio

    from hookwise.engine.config.convert import structure
    from hookwise.engine.config.sources import SqsSourceConfig
    from hookwise.server.sources.sqs import SqsBroker

    url = queue(sqs, unique("held"))
    send(sqs, url, plain("held"))
    config = structure(
        {"queueUrl": url, "endpointUrl": moto_url, "waitTime": 1, "visibilityTimeout": 2},
        SqsSourceConfig,
    )

    def receive() -> list[Any]:
        got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0, VisibilityTimeout=0)
        return list(got.get("Messages") or [])

    async def main() -> None:
        broker = SqsBroker(config)
        await broker.connect()
        try:
            pulled = await broker.fetch(10)
            assert [p.message.body for p in pulled] == [plain("held")]
            for _ in range(3):  # past the 2 s timeout, more than once
                await asyncio.sleep(2)
                assert await asyncio.to_thread(receive) == []
            await broker.release([p.handle for p in pulled])
            assert len(await asyncio.to_thread(receive)) == 1
        finally:
            await broker.close()

    import os

    old = {k: os.environ.get(k) for k in AWS_ENV}
    os.environ.update(AWS_ENV)
    try:
        asyncio.run(main())
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_two_gateways_on_postgresql_share_one_queue(
    sqs: Any, moto_url: str, tmp_path: Path
) -> None:
    url = queue(sqs, unique("shared"))
    config = source_config([{**_source("shared", url, moto_url), "maxInFlight": 10}])
    texts = [f"w{i}" for i in range(100)]
    with two_gateways(config, tmp_path, ENV) as gws:
        for t in texts:
            send(sqs, url, plain(t))
        stored_once(gws[0], texts)
        acked_by_all(gws, "shared", len(texts))
