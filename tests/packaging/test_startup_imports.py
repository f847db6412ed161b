"""What a gateway's start-up imports: not the SDKs that only some configurations use.

Every test starts gateways, and so does every operator's restart: the MCP SDK (about half a
second of imports) loads only when tool servers are configured (`server/tools/connection.py`),
PyJWT and `cryptography` with the first JWT-signed request or GitHub App token. A top-level
import of either, anywhere on the way to `serve`, shows here."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.gateway import REPO

#: what `hookwise serve` imports before it listens (see `hookwise.server.lifecycle.serve`)
SERVING = (
    "hookwise.server.cli.main",
    "hookwise.server.lifecycle.serve",
    "hookwise.server.lifecycle.gateway",
    "hookwise.server.app",
)
#: loaded on first use only
ON_FIRST_USE = ("mcp", "mcp_types", "jwt", "cryptography")


def test_serving_imports_no_tool_sdk_and_no_jwt_library() -> None:
    code = (
        "import importlib, json, sys\n"
        f"for name in {SERVING!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout))
    assert "litestar" in loaded and "hookwise" in loaded  # the probe imported what serves
    assert loaded.isdisjoint(ON_FIRST_USE), sorted(loaded & set(ON_FIRST_USE))
