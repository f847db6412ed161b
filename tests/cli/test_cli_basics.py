"""The command line as a newcomer meets it: --version, init, the config file's default and
override, exit statuses (2 for usage only), and one-line errors."""

from __future__ import annotations

import os
import re
import socket
import stat
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

from tests.cli.support import run

START = ["--port", "0", "--state-dir", "state"]


def test_version_comes_from_the_installed_metadata(tmp_path: Path) -> None:
    r = run("--version", cwd=tmp_path)
    assert (r.returncode, r.stdout.strip()) == (0, f"hookwise {version('hookwise')}")


def test_init_writes_a_private_starter_with_fresh_tokens_that_checks_clean(tmp_path: Path) -> None:
    r = run("init", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    path = tmp_path / "hookwise.yaml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert text.startswith("# hookwise configuration")  # commented
    data = yaml.safe_load(text)
    hook, admin = data["hooks"]["token"], data["gateway"]["auth"]["token"]
    assert len(hook) >= 40 and len(admin) >= 40 and hook != admin
    # the default config of every command: no -c needed
    check = run("config", "check", cwd=tmp_path)
    assert (check.returncode, check.stderr) == (0, ""), check.stderr
    # a second file gets other tokens
    assert run("init", "--path", "other.yaml", cwd=tmp_path).returncode == 0
    other = yaml.safe_load((tmp_path / "other.yaml").read_text())
    assert {other["hooks"]["token"], other["gateway"]["auth"]["token"]}.isdisjoint({hook, admin})


def test_init_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "hookwise.yaml"
    path.write_text("mine: true\n")
    r = run("init", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.strip() == "hookwise: hookwise.yaml already exists; not overwritten"
    assert path.read_text() == "mine: true\n"


def test_the_starter_mapping_works_with_rules_test(tmp_path: Path) -> None:
    assert run("init", cwd=tmp_path).returncode == 0
    (tmp_path / "alert.json").write_text('{"service": "db-1", "summary": "disk almost full"}')
    r = run("rules", "test", "--path", "alerts", "--payload", "alert.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert '"text": "Alert from db-1: disk almost full"' in r.stdout


@pytest.mark.parametrize(
    "command",
    [["config", "check"], ["rules", "check"], ["serve", *START], ["webhooks", "gmail", "run"]],
)
def test_every_command_reads_hookwise_config_and_c(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "a").mkdir()
    bad = tmp_path / "a" / "broken.yaml"
    bad.write_text("hooks: {enabled: maybe}\n")
    by_env = run(*command, cwd=tmp_path, env={"HOOKWISE_CONFIG": str(bad)})
    by_flag = run(*command, "-c", str(bad), cwd=tmp_path)
    for r in (by_env, by_flag):
        assert r.returncode == 1
        assert "broken.yaml" in r.stderr and "hooks.enabled" in r.stderr
    assert not (tmp_path / "state").exists()


def test_a_missing_default_config_says_how_to_make_one(tmp_path: Path) -> None:
    r = run("config", "check", cwd=tmp_path)
    assert r.returncode == 1
    assert "hookwise.yaml: no such config file" in r.stderr
    assert "hookwise init" in r.stderr and "HOOKWISE_CONFIG" in r.stderr


@pytest.mark.parametrize(
    "args",
    [["serve", "--no-such-flag"], ["nonsense"], ["rules", "test"], ["serve", "--port", "x"]],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str]) -> None:
    r = run(*args, cwd=tmp_path)
    assert r.returncode == 2
    assert "usage:" in r.stderr


def test_a_port_in_use_is_one_line_exit_1_and_creates_nothing(tmp_path: Path) -> None:
    assert run("init", cwd=tmp_path).returncode == 0
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        r = run("serve", "--port", str(port), "--state-dir", "state", cwd=tmp_path)
    finally:
        taken.close()
    assert r.returncode == 1
    assert r.stderr == f"hookwise: 127.0.0.1:{port} is in use; pick another with --port\n"
    assert r.stdout == ""
    assert sorted(os.listdir(tmp_path)) == ["hookwise.yaml"]


def test_a_start_up_failure_is_one_line_and_debug_shows_the_traceback(tmp_path: Path) -> None:
    assert run("init", cwd=tmp_path).returncode == 0
    unreachable = ["--store", "postgresql://hookwise@127.0.0.1:9/hookwise"]
    r = run("serve", *START, *unreachable, cwd=tmp_path)
    assert r.returncode == 1
    errors = [line for line in r.stderr.splitlines() if " INFO " not in line]
    assert errors == [
        "hookwise: start-up failed: ConnectionRefusedError: [Errno 111] Connection refused "
        "(--debug shows the traceback)"
    ]
    debug = run("serve", *START, *unreachable, "--debug", cwd=tmp_path)
    assert debug.returncode == 1
    assert "Traceback (most recent call last)" in debug.stderr


def test_an_unexpected_error_is_one_line_without_debug(tmp_path: Path) -> None:
    assert run("init", cwd=tmp_path).returncode == 0
    (tmp_path / "state").write_text("a file where the state dir should be")
    r = run("serve", *START, cwd=tmp_path)
    assert r.returncode == 1
    [line] = [x for x in r.stderr.splitlines() if x.strip()]
    assert re.fullmatch(r"hookwise: serve failed: .*state.* \(--debug shows the traceback\)", line)
    debug = run("serve", *START, "--debug", cwd=tmp_path)
    assert debug.returncode == 1 and "Traceback" in debug.stderr


def test_the_banner_shows_the_version(tmp_path: Path) -> None:
    import subprocess

    from tests.cli.support import HOOKWISE

    assert run("init", cwd=tmp_path).returncode == 0
    proc = subprocess.Popen(
        [HOOKWISE, "serve", *START], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
    finally:
        proc.terminate()
        proc.wait(15)
        if proc.stdout is not None:
            proc.stdout.close()
    assert re.match(
        rf"hookwise: listening on http://127\.0\.0\.1:\d+ \(hookwise {re.escape(version('hookwise'))}, hooks at /hooks\)",
        line,
    ), line
