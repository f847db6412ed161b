"""`hookwise runs|deliveries|requests` against a running gateway, on both stores: tables for
people, JSON for scripts, retries one by one and in bulk, and clear errors."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from hookwise.server.cli.admin import Progress, usage_line
from tests.fakes.channel_servers import FakeServer
from tests.fakes.channel_servers import start as start_channel
from tests.fakes.model_server import ModelServer
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, REPO, GatewayProcess
from tests.support.wait import eventually


@pytest.fixture(scope="module")
def model_server() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


@pytest.fixture(scope="module")
def telegram() -> Iterator[FakeServer]:
    server = start_channel("telegram")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gw(
    start_module_gateway: Callable[..., GatewayProcess],
    model_server: ModelServer,
    telegram: FakeServer,
) -> GatewayProcess:
    # a channel is configured (so a reply with no route to it fails) but never reached
    config = {
        "channels": {"telegram": telegram.config()},
        "hooks": {"enabled": True, "token": HOOK_TOKEN},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {"defaults": {"heartbeat": {"every": 0}}},
        "models": {
            "providers": {
                "fake": {
                    "api": "openai",
                    "baseUrl": model_server.openai_base_url,
                    "apiKey": model_server.api_key,
                    "maxRetries": 0,
                }
            }
        },
    }
    return start_module_gateway(config, name="cli")


def hookwise(*args: str, token: str | None = ADMIN_TOKEN) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HOOKWISE_ADMIN_TOKEN", "HOOKWISE_URL")}
    if token is not None:
        env["HOOKWISE_ADMIN_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "hookwise.server.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
    )


def ok(*args: str) -> str:
    done = hookwise(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def failed_run(gw: GatewayProcess, model_server: ModelServer, session: str) -> str:
    model_server.fail(400, message="This model does not exist")
    r = gw.hook(
        "agent",
        {"message": "m", "model": "fake/m", "deliver": False, "sessionKey": session},
    )
    run_id = r.json()["runId"]
    eventually(lambda: gw.admin(f"/api/runs/{run_id}")["run"]["state"] == "failed")
    return run_id


def test_runs_list_prints_a_table_and_json(gw: GatewayProcess, model_server: ModelServer) -> None:
    run_id = failed_run(gw, model_server, "hook:cli-list")
    out = ok("runs", "list", "--url", gw.url, "--state", "failed")
    header, *lines = out.splitlines()
    assert header.split() == ["RUN", "STATE", "RULE", "SESSION", "CREATED", "TRIES", "ERROR"]
    [line] = [line for line in lines if line.startswith(run_id)]
    assert "failed" in line and "hook:cli-list" in line and "answered HTTP 400" in line
    items = json.loads(ok("runs", "list", "--url", gw.url, "--session", "hook:cli-list", "--json"))
    assert [i["runId"] for i in items] == [run_id] and items[0]["state"] == "failed"
    assert "(none)" in ok("runs", "list", "--url", gw.url, "--session", "hook:nobody")


def test_runs_show_and_retry_one(gw: GatewayProcess, model_server: ModelServer) -> None:
    run_id = failed_run(gw, model_server, "hook:cli-one")
    shown = ok("runs", "show", run_id, "--url", gw.url)
    assert f"runId: {run_id}" in shown and "state: failed" in shown
    assert "deliveries:" in shown and "retries:" in shown
    assert ok("runs", "retry", run_id, "--url", gw.url).strip() == f"run {run_id}: queued again"
    run = eventually(
        lambda: (r := gw.admin(f"/api/runs/{run_id}")["run"])["state"] == "succeeded" and r
    )
    [retry] = run["retries"]
    assert retry["by"].endswith("@127.0.0.1") and retry["fromState"] == "failed"
    # values as JSON reads them, never Python's reprs (True, {'inputTokens': ...})
    fields = dict(
        line.strip().split(": ", 1)
        for line in ok("runs", "show", run_id, "--url", gw.url).split("\n\n")[0].splitlines()
    )
    assert fields["deliver"] == "false"
    assert fields["usage"] == usage_line(run["usage"]) and "'" not in fields["usage"]
    assert fields["usage"].startswith("2 call(s), ") and fields["usage"].endswith("cost -")
    # every model call of every attempt: the first failed (400), the retry answered
    calls = ok("runs", "show", run_id, "--url", gw.url).split("model calls:\n", 1)[1]
    header, first, second = calls.split("\n\n")[0].splitlines()
    assert header.split()[:5] == ["TRY", "#", "MODEL", "OUTCOME", "ERROR"]
    assert first.split()[:5] == ["1", "1", "fake/m", "error", "bad_request"]
    assert second.split()[:4] == ["2", "1", "fake/m", "ok"]
    # again: the run succeeded, the API's refusal is one line and exit 1
    done = hookwise("runs", "retry", run_id, "--url", gw.url)
    assert done.returncode == 1 and "(run_not_retryable)" in done.stderr
    assert "Traceback" not in done.stderr


def test_bulk_retry_counts_first_then_retries(
    gw: GatewayProcess, model_server: ModelServer
) -> None:
    ids = [failed_run(gw, model_server, "hook:cli-bulk") for _ in range(3)]
    out = ok("runs", "retry", "--session", "hook:cli-bulk", "--dry-run", "--url", gw.url)
    assert out.strip() == "3 runs would be retried"
    assert all(gw.admin(f"/api/runs/{i}")["run"]["state"] == "failed" for i in ids)
    answer = json.loads(
        ok("runs", "retry", "--session", "hook:cli-bulk", "--json", "--url", gw.url)
    )
    assert answer == {"ok": True, "count": 3, "dryRun": False}
    for run_id in ids:
        eventually(lambda i=run_id: gw.admin(f"/api/runs/{i}")["run"]["state"] == "succeeded")
    done = hookwise("runs", "retry", "--url", gw.url)
    assert done.returncode == 1 and "--all" in done.stderr


def test_deliveries_list_and_retry(gw: GatewayProcess) -> None:
    # no last route: the reply's delivery fails for good
    run_id = gw.hook("agent", {"message": "d", "wakeMode": "next-heartbeat"}).json()["runId"]
    delivery = eventually(
        lambda: (
            (d := gw.admin("/api/deliveries", runId=run_id)["items"])
            and d[0]["state"] == "failed"
            and d[0]
        )
    )
    out = ok("deliveries", "list", "--url", gw.url, "--run", run_id)
    assert delivery["deliveryId"] in out and "no last route" in out
    ok("deliveries", "retry", delivery["deliveryId"], "--url", gw.url)
    # tried once more (still no route to send it to), and failed again
    eventually(
        lambda: (
            (d := gw.admin("/api/deliveries", runId=run_id)["items"][0])["attempts"]
            > delivery["attempts"]
            and d["state"] == "failed"
        )
    )
    done = hookwise("deliveries", "retry", "--url", gw.url, "--channel", "slack", "--dry-run")
    assert done.returncode == 0 and done.stdout.strip() == "0 deliveries would be retried"


def test_requests_list_shows_links_never_payloads(gw: GatewayProcess) -> None:
    body = gw.hook("wake", {"text": "secret-cli-payload", "mode": "next-heartbeat"}).json()
    items = json.loads(ok("requests", "list", "--url", gw.url, "--json", "--limit", "5"))
    assert any(i["eventIds"] == [body["eventId"]] for i in items)
    out = ok("requests", "list", "--url", gw.url, "--status", "200")
    assert body["eventId"] in out and "secret-cli-payload" not in out


def test_the_token_comes_from_the_config_or_the_environment(
    gw: GatewayProcess, tmp_path: Path
) -> None:
    done = hookwise("runs", "list", "--url", gw.url, token=None)
    assert done.returncode == 1 and "HOOKWISE_ADMIN_TOKEN" in done.stderr
    config = tmp_path / "hookwise.yaml"
    config.write_text(yaml.safe_dump({"gateway": {"auth": {"token": ADMIN_TOKEN}}}))
    done = hookwise("runs", "list", "--url", gw.url, "--config", str(config), token=None)
    assert done.returncode == 0, done.stderr
    done = hookwise("runs", "list", "--url", gw.url, token="wrong-token")
    assert done.returncode == 1 and "(unauthorized)" in done.stderr


def test_an_unreachable_gateway_is_one_line(tmp_path: Path) -> None:
    done = hookwise("runs", "list", "--url", "http://127.0.0.1:9")
    assert done.returncode == 1 and "cannot reach the gateway" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_draws_on_a_terminal_only() -> None:
    term = _Terminal()
    bar = Progress("retrying runs", 4, term)
    bar.advance(2)
    bar.advance(2)
    bar.close()
    frames = term.getvalue().split("\r")
    assert frames[-1].startswith("retrying runs [" + "#" * 30 + "] 4/4")
    assert "[" + "#" * 15 + "-" * 15 + "] 2/4" in term.getvalue()
    pipe = io.StringIO()
    Progress("retrying runs", 4, pipe).advance(4)
    assert pipe.getvalue() == ""
