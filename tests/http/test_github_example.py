"""The GitHub example followed as written: the path-level block its comment gives (`auth:
signature`, GitHub cannot send the hook token), the webhook URL without `?token=`, and the
example printed by `hookwise webhooks sign --help` pasted into a shell; and examples/production.yaml,
which guards every worked example's path by signature, checks clean."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.support import run
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, REPO, GatewayProcess
from tests.support.mapped import events_of
from tests.support.wait import eventually

EXAMPLE = REPO / "rules" / "examples" / "github.yaml"
SECRET = "It's a Secret to Everybody"


def documented_block() -> dict[str, Any]:
    """The `hooks:` block the example's comment tells the reader to put in hookwise.yaml."""
    lines = EXAMPLE.read_text().splitlines()
    start = lines.index("#      hooks:")
    block = []
    for line in lines[start:]:
        if line.strip() == "#":
            break
        block.append(line[len("#    ") :])
    parsed: dict[str, Any] = yaml.safe_load("\n".join(block))
    return parsed


def help_example() -> str:
    """The shell example at the end of `hookwise webhooks sign --help`, as printed."""
    r = subprocess.run(
        [sys.executable, "-m", "hookwise.server.cli", "webhooks", "sign", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    after = r.stdout.split("\nexample", 1)[1].split("\n\n", 1)[0]
    return "\n".join(line for line in after.splitlines() if line.startswith("  "))


@pytest.fixture(scope="module")
def gw(
    start_module_gateway: Callable[..., GatewayProcess], tmp_path_factory: pytest.TempPathFactory
) -> GatewayProcess:
    folder = tmp_path_factory.mktemp("github-example")
    (folder / "github.yaml").write_text(EXAMPLE.read_text())
    hooks = documented_block()["hooks"]
    config = {
        "hooks": {"enabled": True, "token": HOOK_TOKEN, "rules": ["github.yaml"], **hooks},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
    }
    return start_module_gateway(
        config, env={"GITHUB_WEBHOOK_SECRET": SECRET}, workdir=folder, name="github"
    )


def test_the_documented_block_authenticates_the_path_by_signature() -> None:
    assert documented_block() == {
        "hooks": {
            "verify": {
                "github": {
                    "scheme": "github",
                    "secret": "${GITHUB_WEBHOOK_SECRET}",
                    "auth": "signature",
                }
            }
        }
    }
    assert "# verify:" not in EXAMPLE.read_text()  # no rule-level block left to uncomment


def test_the_sign_help_example_works_when_pasted(gw: GatewayProcess, tmp_path: Path) -> None:
    example = help_example()
    assert "--curl" in example and "curl -K -" in example and "token" not in example
    (tmp_path / "gh.secret").write_text(SECRET + "\n")
    push = {"ref": "refs/heads/main", "repository": {"full_name": "acme/gateway"}}
    (tmp_path / "push.json").write_text(json.dumps(push))
    env = {
        **os.environ,
        "URL": gw.url,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    r = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", example],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["ok"] is True, answer
    events = eventually(lambda: events_of(gw, "github-other"))
    assert "GitHub push event on acme/gateway" in events[0]["text"]


def test_an_unsigned_delivery_without_the_token_is_refused(gw: GatewayProcess) -> None:
    r = gw.hook("github", {"zen": "hi"}, token=None, headers={"X-GitHub-Event": "ping"})
    assert r.status_code == 401 and r.json()["code"] == "invalid_signature"
    # the hook token alone does not open a path that authenticates by signature
    r = gw.hook("github", {"zen": "hi"}, headers={"X-GitHub-Event": "ping"})
    assert r.status_code == 401 and r.json()["code"] == "invalid_signature"


def test_sign_curl_config_quotes_what_curl_would_split(tmp_path: Path) -> None:
    # a JSON body to Twilio: the URL it signs gains bodySHA256, so the URL is printed too
    (tmp_path / "p.json").write_text('{"Body": "hi"}')
    r = run("webhooks", "sign", "--scheme", "twilio", "--secret", "t", "--payload", "p.json",
            "--url", 'https://h.example/hooks/twilio?a="b"', "--curl", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert re.fullmatch(
        r'url = "https://h.example/hooks/twilio\?a=\\"b\\"&bodySHA256=\w+"', lines[0]
    )
    assert re.fullmatch(r'header = "X-Twilio-Signature: [A-Za-z0-9+/=]+"', lines[1])


PRODUCTION_ENV = {
    "HOOKWISE_HOOK_TOKEN": "h" * 43,
    "HOOKWISE_ADMIN_TOKEN": "a" * 43,
    "OPENAI_API_KEY": "sk-x",
    "ANTHROPIC_API_KEY": "sk-ant-x",
    "TELEGRAM_BOT_TOKEN": "123:abc",
    "SLACK_BOT_TOKEN": "xoxb-1",
    "GITHUB_WEBHOOK_SECRET": "gh",
    "STRIPE_WEBHOOK_SECRET": "whsec_abc",
    "SHOPIFY_WEBHOOK_SECRET": "shp",
    "SLACK_SIGNING_SECRET": "sl",
    "DISCORD_PUBLIC_KEY": "ab" * 32,
    "TWILIO_AUTH_TOKEN": "tw",
}


def test_production_example_guards_every_worked_example_by_signature(tmp_path: Path) -> None:
    config = REPO / "examples" / "production.yaml"
    verify = yaml.safe_load(config.read_text())["hooks"]["verify"]
    # monitoring tools and Alertmanager sign nothing: they send the hook token
    unsigned = {"monitoring", "alertmanager"}
    paths = {p.stem for p in (REPO / "rules" / "examples").glob("*.yaml")} - unsigned
    assert set(verify) == paths
    assert {block["auth"] for block in verify.values()} == {"signature"}
    r = run("config", "check", "-c", str(config), cwd=tmp_path, env=PRODUCTION_ENV)
    assert r.returncode == 0, r.stderr
    without = {**PRODUCTION_ENV, "GITHUB_WEBHOOK_SECRET": ""}
    r = run("config", "check", "-c", str(config), cwd=tmp_path, env=without)
    assert r.returncode != 0 and "hooks.verify.github.secret" in r.stderr
