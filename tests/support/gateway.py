"""A real hookwise process for tests: written config, own state dir, loopback port, real HTTP.

`GatewayProcess` runs `python -m hookwise.server.cli.main serve` on 127.0.0.1 with port 0, reads the port from
the ready line, and offers small helpers for hook and admin requests. Its stderr goes to a file
so tests can assert what was (and was not) logged.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

HOOK_TOKEN = "test-hook-token-0123456789abcdef"
ADMIN_TOKEN = "test-admin-token-0123456789abcdef"
REPO = Path(__file__).resolve().parents[2]


def base_config(**hooks: Any) -> dict[str, Any]:
    """A minimal enabled configuration with test tokens; keyword arguments go under `hooks`."""
    return {
        "hooks": {"enabled": True, "token": HOOK_TOKEN, **hooks},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
    }


class GatewayProcess:
    """One hookwise server process."""

    def __init__(
        self,
        config: dict[str, Any],
        workdir: Path,
        *,
        env: dict[str, str] | None = None,
        extra_args: list[str] | None = None,
    ) -> None:
        self.config = config
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path = self.workdir / "hookwise.yaml"
        self.state_dir = self.workdir / "state"
        self.stderr_path = self.workdir / "stderr.log"
        self.env = env or {}
        self.extra_args = list(extra_args or [])  # more `hookwise serve` flags, e.g. --watch
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.ready_line = ""  # the start-up banner, as written on stdout
        self.client: httpx.Client | None = None

    def write_config(self) -> None:
        self.config_path.write_text(yaml.safe_dump(self.config), encoding="utf-8")

    def start(self, timeout: float = 60.0) -> GatewayProcess:
        self.write_config()
        stderr = open(self.stderr_path, "ab")  # noqa: SIM115 - owned by the process
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "hookwise.server.cli.main",
                "serve",
                "--config",
                str(self.config_path),
                "--port",
                "0",
                "--state-dir",
                str(self.state_dir),
                *self.extra_args,
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env={**os.environ, **self.env},
        )
        stderr.close()
        deadline = time.monotonic() + timeout
        line = b""
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                line = self.proc.stdout.readline()
                if b"listening on" in line or not line:
                    break
            if self.proc.poll() is not None:
                break
        if b"listening on" not in line:
            self.stop()
            raise RuntimeError(f"hookwise did not start:\n{self.stderr()}")
        self.ready_line = line.decode()
        self.url = line.split(b"listening on ", 1)[1].split()[0].decode()
        self.client = httpx.Client(base_url=self.url, timeout=10)
        return self

    def stderr(self) -> str:
        return (
            self.stderr_path.read_text(encoding="utf-8", errors="replace")
            if self.stderr_path.exists()
            else ""
        )

    def hook(
        self,
        name: str,
        payload: Any = None,
        *,
        token: str | None = HOOK_TOKEN,
        headers: dict[str, str] | None = None,
        content: bytes | None = None,
        params: dict[str, str] | None = None,
    ) -> httpx.Response:
        """POST `{hook_path}/{name}` with the payload as JSON and the token as a Bearer header."""
        assert self.client is not None
        hdrs = dict(headers or {})
        if token is not None:
            hdrs.setdefault("Authorization", f"Bearer {token}")
        path = f"{self.config['hooks'].get('path', '/hooks').rstrip('/')}/{name}"
        if content is not None:
            return self.client.post(path, content=content, headers=hdrs, params=params)
        return self.client.post(path, json=payload, headers=hdrs, params=params)

    def admin(self, path: str, **params: Any) -> Any:
        """GET an admin API path with the gateway token; returns the JSON body (asserting 200)."""
        assert self.client is not None
        r = self.client.get(path, params=params, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert r.status_code == 200, r.text
        return r.json()

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush; what is durable stays."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def restart(self) -> GatewayProcess:
        self.stop()
        return self.start()
