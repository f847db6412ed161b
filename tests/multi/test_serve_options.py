"""`serve`'s typed options (`ServeOptions`) reach every gateway worker whole: an option set on
the command line is seen by the workers (and by a worker restarted after a death), with no
worker command line rebuilt by hand."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
import yaml

from hookwise.server.cli.main import _parser
from hookwise.server.lifecycle.options import OPTIONS_ENV, ServeOptions
from tests.support.gateway import HOOK_TOKEN, REPO, GatewayProcess
from tests.support.wait import eventually

CONFIG = {"hooks": {"enabled": True, "token": HOOK_TOKEN}}
#: a store no worker can open: its start-up fails at once
UNREACHABLE = "postgresql://postgres@127.0.0.1:1/hookwise"


def _serve_parser() -> argparse.ArgumentParser:
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["serve"]


def test_every_serve_option_is_a_field_of_serve_options_and_back() -> None:
    dests = {a.dest for a in _serve_parser()._actions if a.dest != "help"}
    fields = {f.name for f in attrs.fields(ServeOptions)}
    assert dests == fields - {"socket_fd"}  # the one a supervisor adds for its workers


def test_the_options_are_built_once_from_the_command_line_and_travel_whole() -> None:
    args = _serve_parser().parse_args(
        ["-c", "x.yaml", "--workers", "3", "--log-format", "json", "--watch", "--debug"]
    )
    options = ServeOptions.from_namespace(args)
    assert options == ServeOptions(
        config="x.yaml", workers=3, log_format="json", watch=True, debug=True
    )
    worker = options.for_worker(7)
    assert worker.is_worker and not options.is_worker
    assert ServeOptions.from_json(worker.to_json()) == worker
    env = dict(options.worker_env(7))
    assert ServeOptions.take_from_env(env) == worker
    assert OPTIONS_ENV not in env  # a worker's own children do not see them


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        "{}",
        '{"config": "x", "colour": "red"}',
        "not json",
        '{"config": "x", "port": 1, "nope": 2}',
    ],
)
def test_options_that_are_not_serve_options_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="serve options"):
        ServeOptions.from_json(text)


def test_a_worker_started_without_options_says_so() -> None:
    env = {k: v for k, v in os.environ.items() if k != OPTIONS_ENV}
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from hookwise.server.cli.main import serve_worker; sys.exit(serve_worker())",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 1
    assert f"${OPTIONS_ENV} is not set" in r.stderr


def _serve(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    tmp_path.mkdir(parents=True)
    config = tmp_path / "hookwise.yaml"
    config.write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "hookwise.server.cli.main",
            "serve",
            "-c",
            str(config),
            "--port",
            "0",
            "--state-dir",
            str(tmp_path / "state"),
            "--workers",
            "2",
            "--store",
            UNREACHABLE,
            *extra,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_debug_on_the_command_line_reaches_the_workers(tmp_path: Path) -> None:
    """`--debug` (never on the workers' hand-built command line before) shows a worker's
    start-up traceback; without it the worker says one line."""
    quiet = _serve(tmp_path / "quiet")
    assert quiet.returncode == 1
    assert "a worker did not start" in quiet.stderr
    assert "start-up failed: ConnectionRefusedError" in quiet.stderr
    assert "Traceback" not in quiet.stderr

    debug = _serve(tmp_path / "debug", "--debug")
    assert debug.returncode == 1
    assert "a worker did not start" in debug.stderr
    assert "Traceback" in debug.stderr and "ConnectionRefusedError" in debug.stderr


def _started(gw: GatewayProcess) -> set[int]:
    """Pids of the workers that logged their start as JSON lines."""
    pids = set()
    for line in gw.stderr().splitlines():
        if not line.startswith("{"):
            continue
        found = re.search(r"Started server process \[(\d+)\]", json.loads(line)["msg"])
        if found:
            pids.add(int(found.group(1)))
    return pids


def test_a_log_format_on_the_command_line_reaches_every_worker_and_a_restarted_one_and_sighup_both(
    tmp_path: Path,
) -> None:
    gw = GatewayProcess(CONFIG, tmp_path, extra_args=["--workers", "2", "--log-format", "json"])
    gw.start(timeout=120)
    try:
        first = eventually(lambda: len(p := _started(gw)) == 2 and p, timeout=60, what="2 workers")
        victim = min(first)
        os.kill(victim, signal.SIGKILL)
        restarted = eventually(
            lambda: (p := _started(gw) - first) and p,
            timeout=60,
            what="a restarted worker logging as JSON",
        )
        assert len(restarted) == 1
        lines = [json.loads(x) for x in gw.stderr().splitlines() if x.startswith("{")]
        restart = [x for x in lines if f"(pid {victim}) exited with signal SIGKILL" in x["msg"]]
        assert restart and restart[0]["level"] == "ERROR"
        assert "restarting it in" in restart[0]["msg"]
        r = gw.client.post(
            "/hooks/wake", json={"text": "x"}, headers={"Authorization": f"Bearer {HOOK_TOKEN}"}
        )  # type: ignore[union-attr]
        assert r.status_code == 200

        # SIGHUP to the supervisor reaches both workers, the restarted one too: each reloads
        def swapped() -> int:
            return gw.stderr().count("reload: rules swapped in")

        before = swapped()
        assert gw.proc is not None
        gw.proc.send_signal(signal.SIGHUP)
        eventually(lambda: swapped() == before + 2, timeout=60, what="both workers reloading")
    finally:
        gw.stop()


def test_a_restarted_worker_that_never_becomes_ready_is_logged_reaped_and_counted(
    tmp_path: Path,
) -> None:
    gw = GatewayProcess(CONFIG, tmp_path, extra_args=["--workers", "2"])
    gw.start(timeout=120)
    try:
        pids = eventually(
            lambda: len(p := _worker_pids(gw.stderr())) == 2 and p, timeout=60, what="2 workers"
        )
        gw.config_path.write_text("hooks: [not, a, mapping]\n", encoding="utf-8")  # no restart
        os.kill(min(pids), signal.SIGKILL)
        eventually(
            lambda: re.search(r"worker \d \(pid \d+\) ended \(exit code 1\)", gw.stderr()),
            timeout=60,
            what="the failed restart logged",
        )
        # each failed restart counts: past five a minute, the supervisor gives up
        assert gw.proc is not None
        assert gw.proc.wait(timeout=120) == 1
        assert "workers keep dying; stopping" in gw.stderr()
    finally:
        gw.stop()


def _worker_pids(stderr: str) -> set[int]:
    return {int(p) for p in re.findall(r"Started server process \[(\d+)\]", stderr)}
