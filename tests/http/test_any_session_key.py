"""Session keys are data: a key with `/`, `#`, `:`, spaces, `%`, `?` or non-ASCII round-trips
through the admin API (percent-encoded as one segment, or with its `/` left as is), the console's
session page (the link the run page gives) and `hookwise sessions show`; and the admin CLI
finds its token as every other command finds its config (`-c`, `$HOOKWISE_CONFIG`,
`./hookwise.yaml`), reading only that key, so secrets it does not need may be unset."""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
import yaml

from tests.support.gateway import ADMIN_TOKEN, REPO, GatewayProcess, base_config
from tests.support.wait import eventually

KEYS = [
    "hook:github:owner/name#2",
    "hook:a//b/",
    "hook:space and ünïcödé ✓",
    "hook:100%2Fliteral?x=1&y",
    "hook:trailing/",
]
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    config = base_config()
    config["agents"] = {"defaults": {"heartbeat": {"every": 0}}}
    gw = start_module_gateway(config, name="keys")
    for key in KEYS:
        r = gw.hook("agent", {"message": f"hello {key}", "sessionKey": key, "deliver": False})
        assert r.status_code == 202, r.text
        run_id = r.json()["runId"]
        eventually(lambda r=run_id: gw.admin(f"/api/runs/{r}")["run"]["state"] == "succeeded")
    return gw


def hookwise(
    *args: str, cwd: Path = REPO, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HOOKWISE_ADMIN_TOKEN", "HOOKWISE_URL", "HOOKWISE_CONFIG")
    }
    return subprocess.run(
        [sys.executable, "-m", "hookwise.server.cli.main", *args],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        cwd=cwd,
        timeout=60,
    )


@pytest.mark.parametrize("key", KEYS)
def test_the_admin_api_opens_any_session_key(gw: GatewayProcess, key: str) -> None:
    for path in (quote(key, safe=""), quote(key, safe="/:")):
        r = httpx.get(f"{gw.url}/api/sessions/{path}", headers=AUTH, timeout=10)
        assert r.status_code == 200, (path, r.text)
        body = r.json()
        assert body["sessionKey"] == key
        assert any(f"hello {key}" in t["content"] for t in body["items"])


def test_an_unknown_key_is_404_not_a_neighbour(gw: GatewayProcess) -> None:
    r = httpx.get(f"{gw.url}/api/sessions/{quote('hook:github:owner', safe='')}", headers=AUTH)
    assert r.status_code == 404 and r.json()["code"] == "session_not_found"


@pytest.mark.parametrize("key", KEYS)
def test_the_consoles_link_opens_the_session(gw: GatewayProcess, key: str) -> None:
    with httpx.Client(base_url=gw.url, timeout=10) as client:
        assert client.post("/ui/login", data={"token": ADMIN_TOKEN}).status_code == 303
        runs = client.get("/ui/sessions").text
        start = runs.index(f">{html.escape(key, quote=False)}</a>")
        href = runs[
            runs.rindex('href="', 0, start) + 6 : runs.index(
                '"', runs.rindex('href="', 0, start) + 6
            )
        ]
        page = client.get(html.unescape(href))
        assert page.status_code == 200, page.text
        assert f"hello {html.escape(key, quote=False)}" in page.text


@pytest.mark.parametrize("key", KEYS)
def test_the_cli_shows_any_session(gw: GatewayProcess, key: str) -> None:
    done = hookwise("sessions", "show", key, "--url", gw.url, "--json",
                    env={"HOOKWISE_ADMIN_TOKEN": ADMIN_TOKEN})  # fmt: skip
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["sessionKey"] == key
    assert [t["role"] for t in answer["items"]][:2] == ["user", "assistant"]


def test_sessions_list_and_events_list(gw: GatewayProcess) -> None:
    env = {"HOOKWISE_ADMIN_TOKEN": ADMIN_TOKEN}
    listed = hookwise("sessions", "list", "--url", gw.url, "--json", "--limit", "0", env=env)
    assert listed.returncode == 0, listed.stderr
    assert set(KEYS) <= {s["sessionKey"] for s in json.loads(listed.stdout)}
    table = hookwise("sessions", "list", "--url", gw.url, env=env)
    assert table.stdout.split()[:2] == ["SESSION", "LAST"]
    events = hookwise("events", "list", "--url", gw.url, "--session", "main", "--json", env=env)
    assert events.returncode == 0, events.stderr
    texts = [e["text"] for e in json.loads(events.stdout)]
    assert any("hello" in t or "echo" in t for t in texts), texts


def test_the_admin_cli_reads_its_token_like_every_command(
    gw: GatewayProcess, tmp_path: Path
) -> None:
    # the config references secrets this command does not need, unset here
    config = {
        "hooks": {
            "enabled": True,
            "token": "${HOOK_TOKEN_NOT_SET_HERE}",
            "verify": {"github": {"scheme": "github", "secret": "${GITHUB_SECRET_NOT_SET}"}},
        },
        "gateway": {"auth": {"token": "${ADMIN_FROM_ENV}"}},
    }
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "hookwise.yaml").write_text(yaml.safe_dump(config))
    env = {"ADMIN_FROM_ENV": ADMIN_TOKEN}
    # ./hookwise.yaml in the current folder
    done = hookwise("runs", "list", "--url", gw.url, cwd=folder, env=env)
    assert done.returncode == 0, done.stderr
    # -c FILE, from anywhere
    done = hookwise("sessions", "list", "--url", gw.url, "-c", str(folder / "hookwise.yaml"),
                    cwd=tmp_path, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    # $HOOKWISE_CONFIG
    done = hookwise("events", "list", "--url", gw.url, cwd=tmp_path,
                    env={**env, "HOOKWISE_CONFIG": str(folder / "hookwise.yaml")})  # fmt: skip
    assert done.returncode == 0, done.stderr
    # a tokenFile next to the config
    (folder / "admin.token").write_text(ADMIN_TOKEN + "\n")
    (folder / "other.yaml").write_text(
        yaml.safe_dump({"gateway": {"auth": {"tokenFile": "admin.token"}}})
    )
    done = hookwise(
        "requests", "list", "--url", gw.url, "-c", str(folder / "other.yaml"), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    # what is missing is said: the admin token's own variable
    done = hookwise("runs", "list", "--url", gw.url, cwd=folder)
    assert done.returncode == 1
    assert "gateway.auth.token" in done.stderr and "ADMIN_FROM_ENV" in done.stderr
    # no config anywhere: one line naming both ways
    done = hookwise("runs", "list", "--url", gw.url, cwd=tmp_path)
    assert (
        done.returncode == 1 and "HOOKWISE_ADMIN_TOKEN" in done.stderr and "-c FILE" in done.stderr
    )
    # a named file that does not exist is an error, not a silent fallback
    done = hookwise(
        "runs", "list", "--url", gw.url, "-c", str(tmp_path / "nope.yaml"), cwd=folder, env=env
    )
    assert done.returncode == 1 and "nope.yaml" in done.stderr
