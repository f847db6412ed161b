"""`hooks.transformsDir` resolved and confined as the peer does, through a running gateway
(issue 30 point 3): transforms live in `<config dir>/hooks/transforms`; a relative
`transformsDir` is a folder under it; `..`, an absolute path elsewhere and a symlink leading out
are refused at load (start, `config check` and reload alike), naming the key."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.wait import eventually

UPPER_JS = 'export default function ({ payload }) { return { text: "up " + payload.t }; }\n'
RULE = {
    "id": "up",
    "match": {"path": "up"},
    "action": "wake",
    "textTemplate": "plain",
    "wakeMode": "next-heartbeat",
    "transform": {"module": "up.js"},
}


def _config(transforms_dir: str | None) -> dict[str, Any]:
    hooks: dict[str, Any] = {"enabled": True, "token": HOOK_TOKEN, "mappings": [RULE]}
    if transforms_dir is not None:
        hooks["transformsDir"] = transforms_dir
    return {"hooks": hooks, "gateway": {"auth": {"token": ADMIN_TOKEN}}}


def _check(config_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookwise.server.cli.main", "config", "check", "-c",
         str(config_path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_a_relative_transforms_dir_is_a_folder_under_hooks_transforms(
    tmp_path: Path, start_gateway: Callable[..., GatewayProcess]
) -> None:
    mine = tmp_path / "gw" / "hooks" / "transforms" / "mine"
    mine.mkdir(parents=True)
    (mine / "up.js").write_text(UPPER_JS, encoding="utf-8")
    gw = start_gateway(_config("mine"), workdir=tmp_path / "gw")
    r = gw.hook("up", {"t": "there"})
    assert r.status_code == 200, r.text
    texts = [e["text"] for e in gw.admin("/api/events", limit=50)["items"]]
    assert texts == ["up there"]


def test_the_default_is_hooks_transforms_beside_the_config(
    tmp_path: Path, start_gateway: Callable[..., GatewayProcess]
) -> None:
    root = tmp_path / "gw" / "hooks" / "transforms"
    root.mkdir(parents=True)
    (root / "up.js").write_text(UPPER_JS, encoding="utf-8")
    gw = start_gateway(_config(None), workdir=tmp_path / "gw")
    assert gw.hook("up", {"t": "x"}).status_code == 200


def _escapes(tmp_path: Path) -> dict[str, str]:
    """Each way out of the root, as a transformsDir value."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "up.js").write_text(UPPER_JS, encoding="utf-8")
    root = tmp_path / "gw" / "hooks" / "transforms"
    root.mkdir(parents=True)
    (root / "link").symlink_to(outside)
    return {
        "dotdot": "..",
        "dotdot-to-outside": "../../../outside",
        "absolute-outside": str(outside),
        "symlink-out": "link",
        "absolute-through-symlink": str(root / "link"),
    }


def test_every_way_out_of_the_root_is_refused_at_load(tmp_path: Path) -> None:
    for name, value in _escapes(tmp_path).items():
        gw = GatewayProcess(_config(value), tmp_path / "gw")
        gw.write_config()
        r = _check(gw.config_path)
        assert r.returncode == 1, (name, r.stderr)
        assert "hooks.transformsDir" in r.stderr and "outside" in r.stderr, (name, r.stderr)
        with pytest.raises(RuntimeError, match=r"hooks\.transformsDir"):
            gw.start()


def test_a_reload_to_a_transforms_dir_outside_is_refused_and_the_rules_stay(
    tmp_path: Path, start_gateway: Callable[..., GatewayProcess]
) -> None:
    escapes = _escapes(tmp_path)
    (tmp_path / "gw" / "hooks" / "transforms" / "up.js").write_text(UPPER_JS, encoding="utf-8")
    gw = start_gateway(_config(None), workdir=tmp_path / "gw")
    gw.config = _config(escapes["absolute-outside"])  # main loaded it
    gw.write_config()
    assert gw.proc is not None
    gw.proc.send_signal(signal.SIGHUP)
    eventually(lambda: "reload failed" in gw.stderr(), what="the reload to be refused")
    assert "hooks.transformsDir" in gw.stderr()
    assert gw.hook("up", {"t": "still"}).status_code == 200
