"""Redis Streams as a pull source, against the real Redis on 127.0.0.1:6379.

One gateway for the module reads three streams (each test its own); the kill and the
two-gateway tests start their own. Entries are added with redis-py, as a relay would.
"""

from __future__ import annotations

import json
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

redis = pytest.importorskip("redis")

URL = "redis://127.0.0.1:6379/0"


@pytest.fixture(scope="module")
def r() -> Iterator[Any]:
    client = redis.Redis.from_url(URL)
    try:
        client.ping()
    except redis.exceptions.ConnectionError as e:
        pytest.skip(f"no Redis on 127.0.0.1:6379 ({e})")
    yield client
    client.close()


STREAMS = {"routed": unique("routed"), "refused": unique("refused"), "dup": unique("dup")}


def _source(name: str, stream: str, path: str, **redis_opts: Any) -> dict[str, Any]:
    return {"name": name, "path": path, "redis": {"url": URL, "stream": stream, **redis_opts}}


@pytest.fixture(scope="module")
def gw(r: Any, start_module_gateway: Callable[..., GatewayProcess]) -> Iterator[GatewayProcess]:
    config = source_config(
        [
            _source("routed", STREAMS["routed"], "github"),
            _source("refused", STREAMS["refused"], "github"),
            _source("dup", STREAMS["dup"], "plain"),
        ]
    )
    yield start_module_gateway(config, env=GITHUB_ENV)
    for stream in STREAMS.values():
        r.delete(stream)


def _add(r: Any, stream: str, body: bytes, headers: dict[str, str] | None = None) -> str:
    entry_id: bytes = r.xadd(stream, {"body": body, **(headers or {})})
    return entry_id.decode()


def _pending(r: Any, stream: str, group: str = "hookwise") -> int:
    return int(r.xpending(stream, group)["pending"])


def test_signed_messages_are_routed_by_their_headers_and_acked(gw: GatewayProcess, r: Any) -> None:
    stream = STREAMS["routed"]
    body, headers = github_message("issues", {"action": "opened", "issue": {"number": 7}})
    _add(r, stream, body, headers)
    body, headers = github_message(
        "push", {"ref": "refs/heads/main", "repository": {"full_name": "acme/app"}}
    )
    _add(r, stream, body, headers)
    eventually(lambda: "issue 7 opened" in event_texts(gw, "gh-issues"), what="the wake event")
    runs = eventually(
        lambda: [x for x in gw.admin("/api/runs", limit=100)["items"] if x["rule"] == "gh-push"],
        what="the push run",
    )
    assert runs[0]["sessionKey"] == "hook:push:acme/app"
    lines = eventually(
        lambda: len(requests_of(gw, "source:routed")) >= 2 and requests_of(gw, "source:routed")
    )
    assert {(x["path"], x["status"], x["rule"]) for x in lines} == {
        ("/hooks/github", 200, "gh-issues"),
        ("/hooks/github", 202, "gh-push"),
    }
    # acknowledged once committed: nothing is left pending for the group
    eventually(lambda: _pending(r, stream) == 0, what="no pending entries")
    state = source_state(gw, "routed")
    assert state["connected"] is True and state["kind"] == "redis"
    assert state["received"] == 2 and state["acked"] == 2 and state["refused"] == 0


def test_refused_messages_are_acked_and_logged_with_the_http_codes(
    gw: GatewayProcess, r: Any
) -> None:
    stream = STREAMS["refused"]
    body, headers = github_message(
        "issues", {"action": "closed", "issue": {"number": 8}}, secret="wrong"
    )
    _add(r, stream, body, headers)  # bad signature
    _add(r, stream, b"{not json", {"content-type": "application/json", "x-github-event": "issues"})
    body, headers = github_message("deployment", {"x": 1})  # no rule for this event
    _add(r, stream, body, headers)
    # hostile: not UTF-8, and a header no HTTP request could carry
    _add(
        r,
        stream,
        b"\xff\xfe{",
        {"content-type": "application/json", "x-note": "caf\u00e9 \U0001f600"},
    )
    lines = eventually(
        lambda: len(requests_of(gw, "source:refused")) >= 4 and requests_of(gw, "source:refused"),
        what="four refusals in the request log",
    )
    assert sorted((x["status"], x["code"]) for x in lines) == [
        (400, "invalid_json"),
        (400, "invalid_json"),
        (401, "invalid_signature"),
        (404, "not_found"),
    ]
    eventually(lambda: _pending(r, stream) == 0, what="the refused entries acknowledged")
    assert "issue 8 closed" not in event_texts(gw, "gh-issues")
    assert source_state(gw, "refused")["refused"] == 4


def test_a_message_stored_but_not_acked_is_not_run_twice(gw: GatewayProcess, r: Any) -> None:
    """A crash between the commit and the XACK: the entry comes back (claimed by another
    consumer), and its id is recognised: acknowledged, nothing stored twice."""
    stream = STREAMS["dup"]
    entry = _add(r, stream, plain("once only"))
    eventually(lambda: "once only" in event_texts(gw, "plain"), what="the first delivery")
    eventually(lambda: _pending(r, stream) == 0, what="the ack")
    # as if the gateway died before its XACK: the same entry, delivered again (a consumer
    # that took it and vanished, its entry claimed back after claimIdle)
    r.xgroup_setid(stream, "hookwise", id="0")
    eventually(lambda: source_state(gw, "dup")["duplicates"] >= 1, what="the redelivery seen")
    assert event_texts(gw, "plain").count("once only") == 1
    assert _pending(r, stream) == 0
    assert entry


def test_a_broker_that_cannot_be_reached_makes_readyz_say_so_and_hooks_still_answer(
    start_gateway: Callable[..., GatewayProcess],
) -> None:
    config = source_config(
        [
            {
                "name": "down",
                "path": "plain",
                "redis": {"url": "redis://127.0.0.1:9/0", "stream": "nowhere"},
                "reconnectMinSeconds": 0.2,
                "reconnectMaxSeconds": 1,
            }
        ]
    )
    gw = start_gateway(config, env=GITHUB_ENV)
    assert gw.client is not None
    r = eventually(lambda: (x := gw.client.get("/readyz")).status_code == 503 and x)  # type: ignore[union-attr]
    assert "source down is not connected" in r.json()["error"]
    assert gw.hook("wake", {"text": "still here"}).status_code == 200
    state = source_state(gw, "down")
    assert state["connected"] is False and "Connection" in (state["lastError"] or "")
    assert "source down (redis)" in gw.stderr() and "retrying in" in gw.stderr()


def test_a_killed_gateway_loses_nothing_and_runs_nothing_twice(
    r: Any, start_gateway: Callable[..., GatewayProcess], tmp_path: Path
) -> None:
    stream = unique("killed")
    source = _source("k", stream, "plain", claimIdle="1s", consumer="first")
    config = source_config([{**source, "maxInFlight": 8}])
    texts = [f"m{i}" for i in range(3000)]
    try:
        with r.pipeline(transaction=False) as pipe:  # a backlog: the kill lands mid-stream
            for t in texts:
                pipe.xadd(stream, {"body": plain(t)})
            pipe.execute()
        gw = start_gateway(config, name="killed", env=GITHUB_ENV)
        # mid-stream, and while the consumer holds a batch (read, perhaps stored, not acked)
        eventually(
            lambda: source_state(gw, "k")["acked"] >= 8 and _pending(r, stream) > 0,
            what="some entries stored and a batch held",
        )
        gw.kill()
        left = _pending(r, stream)
        # the group had entries still to read: the kill came before the last one
        assert r.xinfo_groups(stream)[0]["lag"] > 0
        # the same store, another consumer name: the first one's pending entries are claimed
        config["sources"][0]["redis"]["consumer"] = "second"
        gw.config = config
        gw.start()
        stored_once(gw, texts)
        eventually(lambda: _pending(r, stream) == 0, what="every entry acknowledged")
        # the first consumer's pending entries came back to the second one
        assert source_state(gw, "k")["redelivered"] >= left
    finally:
        r.delete(stream)


def test_two_gateways_on_postgresql_share_one_group(r: Any, tmp_path: Path) -> None:
    stream = unique("shared")
    config = source_config([_source("shared", stream, "plain", claimIdle="2s")])
    texts = [f"s{i}" for i in range(200)]
    try:
        with two_gateways(config, tmp_path, GITHUB_ENV) as gws:
            for t in texts:
                _add(r, stream, plain(t))
            stored_once(gws[0], texts)
            acked_by_all(gws, "shared", len(texts))
            consumers = {c["name"] for c in r.xinfo_consumers(stream, "hookwise")}
            assert len(consumers) == 2
    finally:
        r.delete(stream)


def test_pulling_waits_while_the_lanes_are_saturated(
    r: Any, start_gateway: Callable[..., GatewayProcess]
) -> None:
    """Runs pile up (one lane slot, a model that never answers within the run's 1 s): past
    `maxQueuedRuns` queued runs the source stops reading, its messages wait in the stream, and
    it reads on as the runs drain; nothing is lost."""
    import socket

    hole = socket.socket()  # accepts connections, never answers: each run times out
    hole.bind(("127.0.0.1", 0))
    hole.listen(64)
    stream = unique("saturated")
    config = source_config(
        [{**_source("sat", stream, "slow"), "maxInFlight": 1, "maxQueuedRuns": 2}]
    )
    slow = {
        "id": "slow",
        "match": {"path": "slow"},
        "action": "agent",
        "messageTemplate": "{{text}}",
        "model": "hole/m",
        "timeoutSeconds": 1,
        "wakeMode": "next-heartbeat",
    }
    config["hooks"]["mappings"] = [*config["hooks"]["mappings"], slow]
    port = hole.getsockname()[1]
    config["models"] = {
        "providers": {
            "hole": {
                "api": "openai",
                "baseUrl": f"http://127.0.0.1:{port}",
                "apiKey": "k",
                "maxRetries": 0,
            }
        }
    }
    config["agents"] = {"defaults": {"maxConcurrentRuns": 1, "heartbeat": {"every": 0}}}
    try:
        for i in range(8):
            _add(r, stream, plain(f"s{i}"))
        gw = start_gateway(config, name="saturated", env=GITHUB_ENV)
        eventually(
            lambda: source_state(gw, "sat")["waitingForLanes"], what="pulling waiting for lanes"
        )
        # at most the running run, maxQueuedRuns queued and the batch read before the count
        assert source_state(gw, "sat")["acked"] <= 1 + 2 + 1
        assert "over maxQueuedRuns 2: pulling waits" in gw.stderr()
        # the runs time out one by one; the source reads on until every message is a run
        runs = eventually(
            lambda: len(x := gw.admin("/api/runs", limit=100)["items"]) >= 8 and x,
            timeout=90,
            what="every message a run",
        )
        assert sorted(x["message"] for x in runs if x["rule"] == "slow") == sorted(
            f"s{i}" for i in range(8)
        )
        eventually(lambda: _pending(r, stream) == 0, what="every entry acknowledged")
        assert source_state(gw, "sat")["acked"] == 8
    finally:
        hole.close()
        r.delete(stream)


def test_pulled_messages_are_accepted_as_live_requests_are(
    r: Any, start_gateway: Callable[..., GatewayProcess]
) -> None:
    """A pulled message commits through the hook path's accept stage: the rule's coalescing
    applies, so two messages with the same key inside the window make one run."""
    stream = unique("coalesce")
    config = source_config([_source("prs", stream, "prs")])
    config["hooks"]["mappings"] = [
        *config["hooks"]["mappings"],
        {
            "id": "prs",
            "match": {"path": "prs"},
            "messageTemplate": "PR {{ number }}",
            "sessionMode": "per-request",
            "deliver": False,
            "wakeMode": "next-heartbeat",
            "coalesce": {"key": "{{ number }}", "window": "60s", "maxWait": "2m"},
        },
    ]
    gw = start_gateway(config, env=GITHUB_ENV)
    try:
        for n in (1, 2):
            _add(r, stream, json.dumps({"number": 7, "n": n}).encode())

        def both() -> list[dict[str, Any]] | None:
            found = requests_of(gw, "source:prs")
            return found if len(found) == 2 else None

        lines = eventually(both, what="both messages' log lines")
        [run_id] = lines[0]["runIds"]
        assert lines[1]["runIds"] == [run_id] and {x["status"] for x in lines} == {202}
        assert [x["runId"] for x in gw.admin("/api/runs", rule="prs")["items"]] == [run_id]
    finally:
        r.delete(stream)
