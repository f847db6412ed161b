"""The README works as written: its shell blocks marked `<!-- runnable -->` run, in order,
against a started server (the quick start's), with `hookwise` on PATH as the quick start puts
it there; every `hookwise ...` command line anywhere in its shell blocks parses."""

from __future__ import annotations

import os
import re
import select
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookwise.server.cli.main import _parser

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
RUNNABLE = re.compile(r"^<!-- runnable.*?-->\n```sh\n(.*?)^```", re.S | re.M)
VENV_BIN = str(Path(sys.executable).parent)


def runnable_blocks() -> list[str]:
    return RUNNABLE.findall(README)


def hookwise_lines() -> list[str]:
    lines = []
    for lang, body in BLOCK.findall(README):
        if lang not in ("sh", "bash", "console"):
            continue
        joined = body.replace("\\\n", " ")
        lines += [x.strip() for x in joined.splitlines() if x.strip().startswith("hookwise ")]
    return lines


@pytest.fixture
def quickstart_server(tmp_path: Path) -> Iterator[str]:
    """`hookwise serve -c examples/quickstart.yaml` in a directory that looks like the clone."""
    for name in ("examples", "rules", "transforms", "schemas"):
        (tmp_path / name).symlink_to(REPO / name)
    proc = subprocess.Popen(
        [
            f"{VENV_BIN}/hookwise",
            "serve",
            "-c",
            "examples/quickstart.yaml",
            "--port",
            "0",
            "--state-dir",
            "state",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    line = b""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and b"listening on" not in line:
        if select.select([proc.stdout], [], [], 0.5)[0]:
            line = proc.stdout.readline()
            if not line:
                break
    try:
        assert b"listening on" in line, "the quick-start server did not start"
        yield line.split(b"listening on http://", 1)[1].split()[0].decode()
    finally:
        proc.terminate()
        proc.wait(15)
        proc.stdout.close()


def test_the_readme_marks_its_walkthrough_runnable() -> None:
    blocks = runnable_blocks()
    assert len(blocks) >= 3
    assert any("curl" in b for b in blocks) and any("hookwise init" in b for b in blocks)


def test_the_runnable_blocks_run_as_written(quickstart_server: str, tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if k != "HOOKWISE_CONFIG"},
        "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}",  # what `. .venv/bin/activate` does
    }
    # an HTTP error answer fails the block (the README shows `curl -s` for readable output)
    prelude = 'curl() { command curl --fail-with-body --max-time 20 "$@"; }\n'
    for block in runnable_blocks():
        script = block.replace("localhost:8787", quickstart_server).replace(
            "127.0.0.1:8787", quickstart_server
        )
        r = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", prelude + script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, (
            f"README block failed:\n{block}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
        )


@pytest.mark.parametrize("line", hookwise_lines())
def test_every_hookwise_command_line_in_the_readme_parses(line: str) -> None:
    argv = shlex.split(line, comments=True)[1:]
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:  # --version and --help exit 0; a usage error exits 2
        assert e.code == 0, f"`{line}` is not a valid command line"
        return
    assert callable(args.func)
