"""The deployment recipes: the systemd unit is valid and hardened, the compose file wires
hookwise to PostgreSQL safely and its config checks clean, and the container image (when this
machine can build one) runs as a non-root user, answers hooks, and stops cleanly on SIGTERM.

The image test needs podman and a base image without a registry: set HOOKWISE_PODMAN_BASE to a
local Debian image with python3 and python3-venv, e.g. one made with
`mmdebstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm base.tar &&
podman import base.tar localhost/debian-python:bookworm` (and CONTAINERS_CONF if podman needs
settings on this machine). Without it, the test is skipped with that reason.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import yaml

from hookwise.engine.config.store_url import encode_password
from tests.cli.support import run
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess, base_config
from tests.support.postgres import fresh_database

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "deploy" / "systemd" / "hookwise.service"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_the_systemd_unit_is_valid_and_hardened(tmp_path: Path) -> None:
    unit = tmp_path / "hookwise.service"
    # verify checks that ExecStart exists: point it at a binary this machine has
    unit.write_text(UNIT.read_text().replace("/opt/hookwise/bin/hookwise", "/bin/true"))
    r = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and "hookwise.service" not in r.stderr, r.stderr
    r = subprocess.run(
        ["systemd-analyze", "security", "--offline=yes", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    exposure = float(r.stdout.split("Overall exposure level for hookwise.service:")[1].split()[0])
    assert exposure <= 2.0, r.stdout


def test_compose_wires_hookwise_to_postgres_behind_loopback() -> None:
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    pg, hw = compose["services"]["postgres"], compose["services"]["hookwise"]
    assert "pg_isready" in pg["healthcheck"]["test"]
    assert hw["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert all(p.startswith("127.0.0.1:") for p in hw["ports"])
    assert hw["read_only"] is True and hw["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in hw["security_opt"]
    assert hw["environment"]["HOOKWISE_STORE_URL"].startswith("postgresql://")


def test_compose_keeps_the_generated_password_out_of_the_url() -> None:
    # `openssl rand -base64 32` makes '/', '+' and '=' about half the time: in a URL unencoded,
    # the driver read part of it as the port and `serve` died; PGPASSWORD takes any character
    env = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]["hookwise"]["environment"]
    assert "POSTGRES_PASSWORD" not in env["HOOKWISE_STORE_URL"]
    assert env["PGPASSWORD"].startswith("${POSTGRES_PASSWORD")


GENERATED = "k/9+Zq8=@#?:%"  # every character a URL reserves that a password may hold


def test_a_generated_password_reaches_postgres_beside_the_url_as_compose_passes_it(
    tmp_path: Path,
) -> None:
    config = yaml.safe_load((REPO / "deploy" / "hookwise.yaml").read_text())
    with fresh_database() as url:  # the local server trusts 127.0.0.1: any password is taken
        env = {
            "HOOKWISE_HOOK_TOKEN": HOOK_TOKEN,
            "HOOKWISE_ADMIN_TOKEN": ADMIN_TOKEN,
            "HOOKWISE_STORE_URL": url,  # postgresql://postgres@127.0.0.1:5432/<db>, no password
            "PGPASSWORD": GENERATED,
        }
        gw = GatewayProcess(config, tmp_path, env=env).start()
        try:
            assert gw.hook("wake", {"text": "hi"}).status_code == 200
        finally:
            gw.stop()


def test_a_password_in_the_url_works_percent_encoded_and_is_refused_at_check_unencoded(
    tmp_path: Path,
) -> None:
    config = tmp_path / "hookwise.yaml"
    config.write_text(yaml.safe_dump({**base_config(), "store": {"url": "${STORE}"}}))
    with fresh_database() as url:
        user, host = url.removeprefix("postgresql://").split("@", 1)
        encoded = f"postgresql://{user}:{encode_password(GENERATED)}@{host}"
        r = run("config", "check", "-c", str(config), cwd=tmp_path, env={"STORE": encoded})
        assert r.returncode == 0, r.stderr
        gw = GatewayProcess(
            yaml.safe_load(config.read_text()), tmp_path / "gw", env={"STORE": encoded}
        )
        try:
            assert gw.start().hook("wake", {"text": "hi"}).status_code == 200
        finally:
            gw.stop()
    for password in ("k/9+Zq8=", "a#b", "a?b", "a@b"):
        raw = f"postgresql://hookwise:{password}@postgres/hookwise"
        r = run("config", "check", "-c", str(config), cwd=tmp_path, env={"STORE": raw})
        assert r.returncode == 1, (password, r.stdout)
        assert "store.url" in r.stderr and "percent-encode" in r.stderr, r.stderr
        assert password not in r.stderr  # the password is not repeated
        # `serve --store` (the URL not from the config) says the same, in one line, no traceback
        served = run("serve", "-c", str(config), "--port", "0", "--state-dir", str(tmp_path),
                     "--store", raw, cwd=tmp_path, env={"STORE": "sqlite:///x.db"})  # fmt: skip
        assert served.returncode == 1 and "Traceback" not in served.stderr, served.stderr
        assert "store.url" in served.stderr and "percent-encode" in served.stderr


def test_the_compose_config_checks_clean(tmp_path: Path) -> None:
    env = {
        "HOOKWISE_HOOK_TOKEN": "h" * 43,
        "HOOKWISE_ADMIN_TOKEN": "a" * 43,
        "HOOKWISE_STORE_URL": "postgresql://hookwise:pw@postgres/hookwise",
    }
    r = run("config", "check", "-c", str(REPO / "deploy" / "hookwise.yaml"), cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _podman(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.skipif(
    not (shutil.which("podman") and os.environ.get("HOOKWISE_PODMAN_BASE")),
    reason="needs podman and HOOKWISE_PODMAN_BASE (a local Debian base image; see the docstring)",
)
@pytest.mark.timeout(1800)  # a first build installs Debian and PyPI packages
def test_the_image_runs_as_non_root_answers_hooks_and_stops_on_sigterm(tmp_path: Path) -> None:
    base = os.environ["HOOKWISE_PODMAN_BASE"]
    image = "localhost/hookwise:test"
    trust: list[str] = []
    bundle = Path("/etc/ssl/certs/ca-certificates.crt")
    if bundle.is_file():  # this host's CAs (a TLS-inspecting proxy's too) for pip in the build
        (tmp_path / "pip.conf").write_text(f"[global]\ncert = {bundle}\n")
        trust = ["-v", f"{bundle}:{bundle}:ro", "-v", f"{tmp_path / 'pip.conf'}:/etc/pip.conf:ro"]
    b = _podman(
        "build", "--format", "docker", "--network", "host", *trust, "--build-arg", f"BASE={base}", "-t", image, str(REPO)
    )  # fmt: skip
    assert b.returncode == 0, b.stderr[-3000:]
    inspect = _podman("image", "inspect", image, "--format", "{{json .Config.Healthcheck}}")
    assert "/readyz" in inspect.stdout
    port = _free_port()
    cfg = tmp_path / "hookwise.yaml"
    cfg.write_text(
        "hooks: {enabled: true, token: a-hook-token-that-is-long-enough-123}\n"
        "gateway: {auth: {token: an-admin-token-that-is-long-enough-456}}\n"
    )
    cfg.chmod(0o644)
    name = f"hookwise-test-{port}"
    started = _podman(
        "run", "-d", "--name", name, "--network", "host",
        "-v", f"{cfg}:/etc/hookwise/hookwise.yaml:ro",
        image, "serve", "--host", "127.0.0.1", "--port", str(port),
        "--state-dir", "/var/lib/hookwise",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        r = httpx.post(
            f"{url}/hooks/wake",
            json={"text": "from the container"},
            headers={"Authorization": "Bearer a-hook-token-that-is-long-enough-123"},
        )
        assert r.status_code == 200, r.text
        uid = _podman("exec", name, "id", "-u")
        assert uid.stdout.strip() == "10001"
        assert _podman("exec", name, "test", "-f", "/var/lib/hookwise/hookwise.db").returncode == 0
        if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
            assert _podman("healthcheck", "run", name).returncode == 0
        t0 = time.monotonic()
        stop = _podman("stop", "-t", "20", name)
        assert stop.returncode == 0, stop.stderr
        assert time.monotonic() - t0 < 15  # SIGTERM reached hookwise; no SIGKILL after 20 s
        code = _podman("inspect", name, "--format", "{{.State.ExitCode}}").stdout.strip()
        assert code in (
            "0",
            "143",
        )  # 143: exited on the SIGTERM itself (uvicorn re-raises it); not 137 (SIGKILL)
    finally:
        _podman("rm", "-f", name)
