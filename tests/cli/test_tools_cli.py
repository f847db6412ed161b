"""`hookwise tools list`, the MCP servers in `config check`, and the commented tools example
`hookwise init` writes (uncommented, it checks clean)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.cli.support import run
from tests.fakes.mcp_server import stdio_command


def _config(tmp_path: Path, servers: dict) -> Path:
    path = tmp_path / "hookwise.yaml"
    path.write_text(yaml.safe_dump({"tools": {"mcpServers": servers}}))
    return path


def test_tools_list_prints_one_tool_per_line_and_why_a_server_is_down(tmp_path: Path) -> None:
    _config(tmp_path, {"t": stdio_command(), "down": {"command": str(tmp_path / "missing")}})
    r = run("tools", "list", cwd=tmp_path)
    assert r.returncode == 1  # one server could not be reached
    lines = r.stdout.splitlines()
    assert "t.echo\tReturn the text it was given." in lines
    assert "t.fail\tAlways fails with a tool error." in lines
    [down] = [line for line in lines if line.startswith("down:")]
    assert "cannot connect" in down and "No such file" in down


def test_tools_list_succeeds_when_every_server_answers(tmp_path: Path) -> None:
    _config(tmp_path, {"t": stdio_command()})
    r = run("tools", "list", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert all(re.fullmatch(r"t\.\w+\t.+", line) for line in r.stdout.splitlines())


def test_config_check_lists_the_servers_without_their_secrets(tmp_path: Path) -> None:
    _config(
        tmp_path,
        {
            "gh": {"command": "github-mcp", "env": {"GITHUB_TOKEN": "ghp_secret123"}},
            "mon": {"url": "http://127.0.0.1:9400/mcp", "headers": {"Authorization": "Bearer s3"}},
        },
    )
    r = run("config", "check", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "MCP server gh: stdio github-mcp" in r.stdout
    assert "MCP server mon: Streamable HTTP http://127.0.0.1:9400" in r.stdout
    assert "secret" not in r.stdout and "s3" not in r.stdout


def test_the_init_example_of_tools_checks_clean_once_uncommented(tmp_path: Path) -> None:
    assert run("init", cwd=tmp_path).returncode == 0
    path = tmp_path / "hookwise.yaml"
    text = path.read_text()
    assert "# tools:" in text and "tools: [monitoring.*, github.get_pull_request]" in text
    lines = text.splitlines()
    start = lines.index("# tools:")
    for i in range(start, len(lines)):
        if lines[i].startswith("# For production"):
            break
        lines[i] = lines[i][2:]
    path.write_text("\n".join(lines) + "\n")
    r = run("config", "check", cwd=tmp_path, env={"GITHUB_TOKEN": "x", "MON_TOKEN": "y"})
    assert r.returncode == 0, r.stderr
    assert "MCP server github: stdio github-mcp" in r.stdout


def test_tools_list_shows_what_a_dead_stdio_server_wrote_to_stderr(tmp_path: Path) -> None:
    import sys

    dead = {"command": sys.executable, "args": ["-c", "import hookwise_no_such_module_mcp"]}
    _config(tmp_path, {"dead": dead})
    r = run("tools", "list", cwd=tmp_path)
    assert r.returncode == 1
    [line] = [line for line in r.stdout.splitlines() if line.startswith("dead:")]
    assert "cannot connect" in line
    assert "ModuleNotFoundError: No module named 'hookwise_no_such_module_mcp'" in line
