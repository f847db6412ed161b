"""The best-known peer, OpenClaw, as a server the benches can start: its gateway with
`hooks.enabled` and a token on loopback, no channels, no model credentials, so `POST
/hooks/wake` answers 200 `{"ok":true,"mode":"now",...}` and keeps the event in memory.

Nothing of OpenClaw is in this repository: it is installed beside it with npm (Node 24 from the
npm package `node`, without touching the system's Node), see bench/README.md:

    mkdir -p /work/oc && cd /work/oc && npm init -y
    npm install node@24 && npm install-scripts approve node && npm rebuild node
    PATH=$PWD/node_modules/node/bin:$PATH npm install openclaw@2026.9.6

`start(install_dir, workdir, token)` starts it from that folder (`node_modules/node/bin/node
node_modules/openclaw/openclaw.mjs gateway run`) with its home, state and config under `workdir`
(`OPENCLAW_HOME`, `OPENCLAW_STATE_DIR`, `OPENCLAW_CONFIG_PATH`; `OPENCLAW_SKIP_CHANNELS=1`) and
returns once `/hooks/wake` answers 200. With no model credentials, the heartbeat a `wake now`
requests fails and is logged by OpenClaw; the wake itself is answered before that, as in
production.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

#: the version the issue names (needs Node 24)
VERSION = "2026.9.6"
#: the gateway's own admin token (must differ from the hook token)
GATEWAY_TOKEN = "bench-openclaw-gateway-token-0123456789abcdef"
#: the gateway loads its plugins before it listens (about 5 s on a quiet 2-core machine)
START_TIMEOUT_S = 120.0
#: after it answers it goes on starting (plugins, model catalogue): quiet means its process tree
#: used less than this much CPU (seconds) in a second, waited for at most `QUIET_MAX_S`
QUIET_CPU_S = 0.05
QUIET_MAX_S = 60.0


class OpenClawMissing(Exception):
    """The install folder has no Node 24 or no openclaw package."""


def programs(install_dir: Path) -> tuple[Path, Path]:
    """(node, openclaw.mjs) under `install_dir`; `OpenClawMissing` if either is absent."""
    node = install_dir / "node_modules" / "node" / "bin" / "node"
    entry = install_dir / "node_modules" / "openclaw" / "openclaw.mjs"
    if not node.exists() or not entry.exists():
        raise OpenClawMissing(
            f"no OpenClaw install under {install_dir} (want {node} and {entry}): "
            "see bench/README.md, `OpenClaw beside hookwise`"
        )
    return node, entry


def installed_version(install_dir: Path) -> str:
    """The openclaw package's version in `install_dir`."""
    meta = install_dir / "node_modules" / "openclaw" / "package.json"
    return str(json.loads(meta.read_text(encoding="utf-8")).get("version", "?"))


def write_config(path: Path, port: int, token: str) -> None:
    """A gateway config: local mode on loopback at `port`, hooks enabled with `token`."""
    config = {
        "gateway": {
            "mode": "local",
            "port": port,
            "bind": "loopback",
            "auth": {"mode": "token", "token": GATEWAY_TOKEN},
        },
        "hooks": {"enabled": True, "token": token, "path": "/hooks"},
    }
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")


def start(
    install_dir: Path, workdir: Path, port: int, token: str
) -> tuple[subprocess.Popen[bytes], str]:
    """Start the gateway (stdout and stderr to `workdir/openclaw.log`); returns the process
    and its base URL once `/hooks/wake` answers 200. `RuntimeError` (with the log's tail) if it
    exits or does not answer within `START_TIMEOUT_S`."""
    node, entry = programs(install_dir)
    config = workdir / "openclaw.json"
    write_config(config, port, token)
    env = {
        **os.environ,
        "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "OPENCLAW_HOME": str(workdir),
        "OPENCLAW_STATE_DIR": str(workdir / "state"),
        "OPENCLAW_CONFIG_PATH": str(config),
        "OPENCLAW_SKIP_CHANNELS": "1",
    }
    log_path = workdir / "openclaw.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(node), str(entry), "gateway", "run", "--port", str(port)],
            cwd=workdir,
            stdout=log,
            stderr=log,
            env=env,
            start_new_session=True,  # its helpers (spawn broker, SQLite readers) go with it
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if wake_ok(url, token):
            return proc, url
        time.sleep(0.5)
    tail = log_path.read_text(errors="replace")[-3000:]
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    raise RuntimeError(f"OpenClaw's gateway did not answer /hooks/wake:\n{tail}")


def wake_ok(url: str, token: str) -> bool:
    """`POST /hooks/wake` answers 200."""
    req = urllib.request.Request(
        url + "/hooks/wake",
        data=b'{"text":"bench ready","mode":"next-heartbeat"}',
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=2.0) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError):
        return False
