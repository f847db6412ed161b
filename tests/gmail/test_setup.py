"""`webhooks gmail setup`: the configuration it writes, checked against a real Dovecot login."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hookwise.engine.config.load import load_config
from hookwise.server.gmail import add_cli
from hookwise.server.gmail.setup import SetupError, run_setup
from tests.gmail import gmail_mails as mails
from tests.gmail.conftest import ACCOUNT, HOOK_TOKEN, PASSWORD, Dovecot, requires_dovecot, wait_for

pytestmark = [requires_dovecot, pytest.mark.timeout(60)]

EXISTING_YAML = """\
# hookwise for the home lab
hooks:
  enabled: false   # turned on by the gmail setup
  path: /in
  token: existing-token-0123456789abcdefghijkl
  presets:
    - custom
agents:
  defaults:
    model: echo/echo  # the test model
"""


def _setup(dovecot: Dovecot, config: Path, password_file: Path, **kw):
    return run_setup(
        config,
        account=ACCOUNT,
        imap_host=dovecot.host,
        imap_port=dovecot.port,
        tls="none",
        password_file=str(password_file),
        **kw,
    )


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    p = tmp_path / "imap-password"
    p.write_text(PASSWORD + "\n")
    return p


def test_setup_writes_a_fresh_config(dovecot, tmp_path, password_file):
    config = tmp_path / "hookwise.yaml"

    report = _setup(dovecot, config, password_file)

    loaded = load_config(config).config
    assert loaded.hooks.enabled is True
    assert loaded.hooks.presets == ("gmail",)
    assert loaded.hooks.token is not None and len(loaded.hooks.token) >= 43
    gmail = loaded.hooks.gmail
    assert gmail is not None
    assert (gmail.account, gmail.imap_host, gmail.imap_port, gmail.tls, gmail.label) == (
        ACCOUNT,
        "127.0.0.1",
        dovecot.port,
        "none",
        "INBOX",
    )
    assert gmail.password_file == str(password_file)
    assert PASSWORD not in config.read_text()
    assert config.stat().st_mode & 0o077 == 0  # it holds the hook token
    assert report.created and report.changed and report.login_checked
    text = report.render()
    assert "IMAP login checked: OK" in text
    assert "generated a new hook token" in text
    assert loaded.hooks.token not in text
    assert f"hookwise webhooks gmail run --config {config}" in text


def test_setup_keeps_comments_and_other_keys_of_an_existing_yaml(dovecot, tmp_path, password_file):
    config = tmp_path / "hookwise.yaml"
    config.write_text(EXISTING_YAML)

    _setup(dovecot, config, password_file, label="INBOX")

    text = config.read_text()
    for comment in (
        "# hookwise for the home lab",
        "# turned on by the gmail setup",
        "# the test model",
    ):
        assert comment in text
    loaded = load_config(config).config
    assert loaded.hooks.enabled is True
    assert loaded.hooks.path == "/in"
    assert loaded.hooks.token == "existing-token-0123456789abcdefghijkl"
    assert loaded.hooks.presets == ("custom", "gmail")
    assert loaded.agents.defaults.model == "echo/echo"
    assert loaded.hooks.gmail is not None and loaded.hooks.gmail.account == ACCOUNT


@pytest.mark.parametrize("name", ["hookwise.yaml", "hookwise.json"])
def test_a_second_run_changes_nothing(dovecot, tmp_path, password_file, name):
    config = tmp_path / name
    if name.endswith(".yaml"):
        config.write_text(EXISTING_YAML)
    _setup(dovecot, config, password_file)
    before = config.read_bytes()
    mtime = config.stat().st_mtime_ns

    report = _setup(dovecot, config, password_file)

    assert config.read_bytes() == before
    assert config.stat().st_mtime_ns == mtime
    assert not report.changed and report.actions == ()
    assert "nothing changed" in report.render()


def test_json_and_json5_configs_are_rewritten_as_json_keeping_keys(
    dovecot, tmp_path, password_file
):
    config = tmp_path / "hookwise.json5"
    config.write_text("// mine\n{hooks: {path: '/h'}, agents: {defaults: {model: 'echo/echo'}}}\n")

    report = _setup(dovecot, config, password_file, password_env=None)

    data = json.loads(config.read_text())
    assert data["hooks"]["path"] == "/h"
    assert data["agents"] == {"defaults": {"model": "echo/echo"}}
    assert data["hooks"]["presets"] == ["gmail"]
    assert any("JSON5" in n for n in report.notes)


def test_password_env_is_written_as_a_reference_not_a_value(dovecot, tmp_path, monkeypatch):
    monkeypatch.setenv("HOOKWISE_TEST_IMAP_PASSWORD", PASSWORD)
    config = tmp_path / "hookwise.yaml"

    run_setup(
        config,
        account=ACCOUNT,
        imap_host=dovecot.host,
        imap_port=dovecot.port,
        tls="none",
        password_env="HOOKWISE_TEST_IMAP_PASSWORD",
    )

    assert "password: ${HOOKWISE_TEST_IMAP_PASSWORD}" in config.read_text()
    assert PASSWORD not in config.read_text()
    assert load_config(config).config.hooks.gmail.password == PASSWORD


@pytest.mark.parametrize("existing", [False, True])
def test_a_failing_login_writes_nothing_and_says_why(dovecot, tmp_path, existing):
    config = tmp_path / "hookwise.yaml"
    if existing:
        config.write_text(EXISTING_YAML)
    wrong = tmp_path / "wrong-password"
    wrong.write_text("not the password\n")

    with pytest.raises(SetupError) as err:
        _setup(dovecot, config, wrong)

    message = str(err.value)
    assert f"IMAP login check failed (127.0.0.1:{dovecot.port})" in message
    assert "refused" in message and "Nothing was written" in message
    assert "not the password" not in message
    if existing:
        assert config.read_text() == EXISTING_YAML
    else:
        assert not config.exists()


def test_a_missing_folder_writes_nothing(dovecot, tmp_path, password_file):
    config = tmp_path / "hookwise.yaml"
    with pytest.raises(SetupError, match="folder 'Nope' does not exist"):
        _setup(dovecot, config, password_file, label="Nope")
    assert not config.exists()


def test_unreachable_server_is_reported(tmp_path, password_file):
    from tests.gmail.conftest import free_port

    port = free_port()
    with pytest.raises(SetupError, match=f"cannot connect to IMAP server 127.0.0.1:{port}"):
        run_setup(
            tmp_path / "c.yaml",
            account=ACCOUNT,
            imap_host="127.0.0.1",
            imap_port=port,
            tls="none",
            password_file=str(password_file),
        )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hookwise webhooks")
    add_cli(parser.add_subparsers(dest="command", required=True))
    return parser


def test_cli_setup_command(dovecot, tmp_path, password_file, capsys):
    config = tmp_path / "hookwise.yaml"
    args = _parser().parse_args(
        [
            "gmail",
            "setup",
            "--account",
            ACCOUNT,
            "--imap-host",
            "127.0.0.1",
            "--imap-port",
            str(dovecot.port),
            "--tls",
            "none",
            "--password-file",
            str(password_file),
            "--config",
            str(config),
        ]
    )
    assert args.func(args) == 0
    assert "Next: hookwise webhooks gmail run" in capsys.readouterr().out
    assert load_config(config).config.hooks.gmail is not None


def test_cli_help_texts(capsys):
    parser = _parser()
    for argv in (["gmail", "--help"], ["gmail", "setup", "--help"], ["gmail", "run", "--help"]):
        with pytest.raises(SystemExit) as exit_:
            parser.parse_args(argv)
        assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "--password-env" in out and "IDLE" in out and "--state-dir" in out


_RUN_SCRIPT = """
import argparse, sys
from hookwise.server.gmail import add_cli
parser = argparse.ArgumentParser(prog="hookwise webhooks")
add_cli(parser.add_subparsers(dest="command", required=True))
args = parser.parse_args(sys.argv[1:])
sys.exit(args.func(args))
"""


def test_cli_run_command_watches_until_sigterm(dovecot, receiver, tmp_path, password_file):
    config = tmp_path / "hookwise.yaml"
    config.write_text(
        "hooks:\n  enabled: true\n  path: /hooks\n  token: ${HOOKWISE_TEST_HOOK_TOKEN}\n"
        "  presets: [gmail]\n  gmail:\n    account: alice@example.com\n"
        f"    imapHost: 127.0.0.1\n    imapPort: {dovecot.port}\n    tls: none\n"
        "    passwordFile: imap-password\n"
    )
    env = {**os.environ, "HOOKWISE_TEST_HOOK_TOKEN": HOOK_TOKEN}
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _RUN_SCRIPT,
            "gmail",
            "run",
            "--config",
            str(config),
            "--state-dir",
            str(state),
            "--port",
            str(receiver.port),
        ],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: (state / "gmail").exists() or proc.poll() is not None, what="checkpoint")
        assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
        dovecot.append(mails.plain(1))
        [got] = receiver.wait_accepted(1)
        assert got.path == "/hooks/gmail"
        assert got.headers["authorization"] == f"Bearer {HOOK_TOKEN}"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        output = proc.stdout.read().decode() if proc.stdout else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert PASSWORD not in output and HOOK_TOKEN not in output
    assert "Bob Sender" not in output and "Plain message 1" not in output  # no content logged
    assert "this is message 1" not in output
    assert "1 messages posted" in output
