"""Operating pull sources: `config check`, `hookwise sources`, the console's overview, /metrics.

The live gateway reads a Redis stream (127.0.0.1:6379); the config checks need no broker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support.gateway import ADMIN_TOKEN, REPO, GatewayProcess
from tests.support.sources import GITHUB_ENV, event_texts, plain, source_config, unique
from tests.support.wait import eventually

redis = pytest.importorskip("redis")

URL = "redis://127.0.0.1:6379/0"
STREAM = unique("operate")


def hookwise(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookwise.server.cli.main", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "HOOKWISE_ADMIN_TOKEN": ADMIN_TOKEN, **(env or {})},
        cwd=REPO,
        timeout=60,
    )


@pytest.fixture(scope="module")
def r() -> Iterator[Any]:
    client = redis.Redis.from_url(URL)
    try:
        client.ping()
    except redis.exceptions.ConnectionError as e:
        pytest.skip(f"no Redis on 127.0.0.1:6379 ({e})")
    yield client
    client.delete(STREAM)
    client.close()


@pytest.fixture(scope="module")
def gw(r: Any, start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    config = source_config(
        [
            {"name": "events", "path": "plain", "redis": {"url": URL, "stream": STREAM}},
            {
                "name": "broken",
                "path": "plain",
                "redis": {"url": "redis://127.0.0.1:9/0", "stream": STREAM},
                "reconnectMaxSeconds": 1,
            },
        ]
    )
    config["gateway"]["metrics"] = {"enabled": True}
    gw = start_module_gateway(config, env=GITHUB_ENV)
    r.xadd(STREAM, {"body": plain("seen by the surfaces")})
    eventually(lambda: "seen by the surfaces" in event_texts(gw, "plain"))
    return gw


def _check(tmp_path: Path, sources: Any) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "hookwise.yaml"
    path.write_text(yaml.safe_dump(source_config(sources)))
    return hookwise("config", "check", "--config", str(path), env=GITHUB_ENV)


def test_config_check_names_each_faulty_source(tmp_path: Path) -> None:
    done = _check(
        tmp_path,
        [
            {"name": "a", "path": "plain", "redis": {"stream": "s"}, "nats": {"stream": "t"}},
            {"name": "b", "path": "plain"},
            {"name": "c", "path": "plain", "redis": {"stream": "s"}, "maxInFlight": 0},
            {"name": "c", "path": "plain", "rabbitmq": {"queue": "q", "prefetch": 3}},
            {"name": "bad name!", "path": "", "redis": {"stream": "s"}},
            {
                "name": "d",
                "path": "plain",
                "sqs": {"queueUrl": "u", "waitTime": 30, "sns": {"topics": []}},
            },
        ],
    )
    assert done.returncode == 1
    err = done.stderr
    assert "sources[0]" in err and "exactly one broker block" in err
    assert "sources[1]" in err
    assert "sources[2]" in err and "maxInFlight must be at least 1" in err
    assert "sources[3]" in err and "prefetch" in err
    assert "sources[4]" in err and "name must be" in err and "path must name one hook" in err
    assert "sources[5]" in err and "waitTime must be between 1 and 20" in err
    assert "sns.topics must name at least one topic" in err


def test_config_check_accepts_every_broker(tmp_path: Path) -> None:
    done = _check(
        tmp_path,
        [
            {"name": "r", "path": "github", "redis": {"stream": "s", "claimIdle": "30s"}},
            {"name": "n", "path": "github", "nats": {"stream": "S", "ackWait": "1m"}},
            {"name": "q", "path": "plain", "rabbitmq": {"queue": "q", "deadLetterExchange": "x"}},
            {
                "name": "s",
                "path": "plain",
                "sqs": {
                    "queueUrl": "https://sqs.eu-west-1.amazonaws.com/123456789012/hooks",
                    "region": "eu-west-1",
                    "sns": {"topics": ["arn:aws:sns:eu-west-1:123456789012:alerts"]},
                },
            },
        ],
    )
    assert done.returncode == 0, done.stderr


def test_hookwise_sources_shows_each_source(gw: GatewayProcess) -> None:
    eventually(lambda: "Connection" in (hookwise("sources", "--url", gw.url).stdout))
    done = hookwise("sources", "--url", gw.url)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:5] == ["SOURCE", "KIND", "PATH", "CONNECTED", "LAG"]
    events = next(x for x in lines if x.startswith("events "))
    assert events.split()[1:4] == ["redis", "plain", "true"]
    broken = next(x for x in lines if x.startswith("broken "))
    assert broken.split()[3] == "false" and "Connection" in broken
    items = json.loads(hookwise("sources", "--url", gw.url, "--json").stdout)
    assert {s["name"]: s["acked"] >= 1 for s in items} == {"events": True, "broken": False}


def test_the_console_overview_has_a_line_per_source(gw: GatewayProcess) -> None:
    with httpx.Client(base_url=gw.url, timeout=10) as client:
        login = client.post("/ui/login", data={"token": ADMIN_TOKEN, "next": "/ui/"})
        assert login.status_code == 303
        html = client.get("/ui/").text
    assert "Pull sources" in html
    assert 'data-source="events"' in html and 'data-source="broken"' in html
    row = html.split('data-source="broken"', 1)[1].split("</tr>", 1)[0]
    assert "retrying" in row and "Connection" in row


def test_metrics_count_each_source(gw: GatewayProcess) -> None:
    assert gw.client is not None
    eventually(
        lambda: (
            'hookwise_source_lag{source="events"}'
            in gw.client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).text
        )  # type: ignore[union-attr]
    )
    text = gw.client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).text
    assert 'hookwise_source_messages_total{outcome="acked",source="events"} 1.0' in text
    assert 'hookwise_source_connected{source="events"} 1.0' in text
    assert 'hookwise_source_connected{source="broken"} 0.0' in text
