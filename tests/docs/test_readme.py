"""The README and the manual work as written: in each of them (README.md and every page under
docs/), the shell blocks marked `<!-- runnable -->` run, in order, against a started server (the
quick start's), with `hookwise` on PATH as the quick start puts it there, each file in a fresh
directory of its own; every `hookwise ...` command line anywhere in their shell blocks parses."""

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
DOCS = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
RUNNABLE = re.compile(r"^<!-- runnable.*?-->\n```sh\n(.*?)^```", re.S | re.M)
VENV_BIN = str(Path(sys.executable).parent)


def _name(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def runnable_blocks(path: Path) -> list[str]:
    return RUNNABLE.findall(path.read_text(encoding="utf-8"))


def hookwise_lines() -> list[tuple[str, str]]:
    """(file, line) for every `hookwise ...` line of a shell block in the README and the docs."""
    lines = []
    for path in DOCS:
        for lang, body in BLOCK.findall(path.read_text(encoding="utf-8")):
            if lang not in ("sh", "bash", "console"):
                continue
            joined = body.replace("\\\n", " ")
            lines += [
                (_name(path), x.strip())
                for x in joined.splitlines()
                if x.strip().startswith("hookwise ")
            ]
    return lines


RUNNABLE_FILES = [p for p in DOCS if runnable_blocks(p)]


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
        # as after `. .venv/bin/activate` (or ./scripts/serve): the quick start's MCP server runs
        # on `python` from PATH
        env={**os.environ, "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}"},
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


def test_the_quick_start_and_the_first_steps_are_marked_runnable() -> None:
    readme = runnable_blocks(REPO / "README.md")
    assert readme and any("curl" in b and "/hooks/wake" in b for b in readme)
    first_steps = runnable_blocks(REPO / "docs" / "getting-started.md")
    assert any("hookwise init" in b for b in first_steps)
    assert any("hookwise rules test" in b for b in first_steps)


@pytest.mark.parametrize("path", RUNNABLE_FILES, ids=_name)
def test_the_runnable_blocks_run_as_written(
    path: Path, quickstart_server: str, tmp_path: Path
) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if k != "HOOKWISE_CONFIG"},
        "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}",  # what `. .venv/bin/activate` does
    }
    # an HTTP error answer fails the block (the docs show `curl -s` for readable output)
    prelude = 'curl() { command curl --fail-with-body --max-time 20 "$@"; }\n'
    for block in runnable_blocks(path):
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
            f"{_name(path)}: block failed:\n{block}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
        )


@pytest.mark.parametrize(("path", "line"), hookwise_lines())
def test_every_hookwise_command_line_in_the_docs_parses(path: str, line: str) -> None:
    # the command's own words: up to the first shell operator (`| curl -K -`, `&&`, `>`, ...)
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words = list(lexer)
    cut = next((i for i, w in enumerate(words) if w and set(w) <= set("|&;<>()")), len(words))
    argv = words[1:cut]
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:  # --version and --help exit 0; a usage error exits 2
        assert e.code == 0, f"{path}: `{line}` is not a valid command line"
        return
    assert callable(args.func)
