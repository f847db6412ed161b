"""Ingest benchmark: hookwise's durable `/hooks/wake` and `/hooks/agent` against the ceiling.

Run from the repository root:

    .venv/bin/python bench/ingest.py [--duration 15] [--connections 32] [--threads 2]
                                     [--warmup 3] [--store URL] [--workers N]
    .venv/bin/python bench/ingest.py --matrix [--pg-url URL] [--duration 15] ...

What it does, all on loopback and bounded in time:

1. installs `wrk` (Debian package) if it is missing; exit 2 if that is not possible;
2. measures the ceiling: `bench/ceiling_app.py` (a raw ASGI app that reads the body and answers
   200) served as hookwise serves (the same uvicorn options and HTTP protocol class, 1 process);
3. measures hookwise on a fresh temporary state dir and config (hooks enabled, default durable
   SQLite store) for `/hooks/wake`, then for `/hooks/agent`, each on its own fresh server: a
   warm-up, then the measured `wrk --latency` run; afterwards checks through the admin API that
   events/runs were stored, and counts the stored rows against the acknowledged responses;
4. prints a table (requests/s, p50, p99, peak RSS, machine and server CPU per acknowledged
   request, ratio to the ceiling, targets), the machine, and a final machine-readable line
   `BENCH_JSON {...}`.

Without `--matrix` it also measures `mapped` (`/hooks/ping`, a templated mapping that makes an
event), and `--rounds N` repeats ceiling, `/wake`, `/agent`, `mapped` N times in turn (each
measurement waits for the machine to settle first: see `settle`): issue 18's
ratios (`/wake` to the ceiling, `/agent` and `mapped` to `/wake`) are taken within each round and
summed up as ranges, with the server's CPU per accepted request, the figure a busy machine
disturbs least.

`--store` and `--workers` are passed to `hookwise serve` only when given (exit 2 if the CLI does
not know them yet). Every configuration is one call of `measure(endpoint, server, load)`, so
comparing several side by side is a loop over specs. Every process started is stopped on exit,
error, Ctrl-C or SIGTERM.

`--matrix` (issue 7) measures `/wake` and `/agent` for SQLite and PostgreSQL with 1 and 2
processes (`--workers`) in one run, each endpoint of each configuration on a fresh store (for
PostgreSQL a fresh database `hookwise_bench_<hex>` on the `--pg-url` server, dropped afterwards,
also on error or Ctrl-C), and reports PostgreSQL 2 processes vs 1 process `/agent` acceptance
against the issue-7 target (>= 1.5x).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.pgstore import (  # noqa: E402
    DEFAULT_PG_URL,
    PgError,
    PgQuery,
    count_rows,
    drop_leftovers,
    fresh_database,
    is_postgres,
)

BIN = Path(sys.executable).parent
HOOK_TOKEN = "bench-hook-token-0123456789abcdef-0123"
ADMIN_TOKEN = "bench-admin-token-0123456789abcdef-0123"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0

# Targets from issue 18: /wake as a ratio to the ceiling (p99 in milliseconds); /agent and the
# templated mapped hook as a ratio to /wake, each taken within one round.
TARGETS: dict[str, dict[str, float]] = {
    "wake": {"ratio": 0.25, "p99_ms": 20.0},
    "agent": {"vs_wake": 0.8},
    "mapped": {"vs_wake": 0.9},
}
# Target from issue 7: PostgreSQL, 2 processes vs 1 process, `/agent` acceptance rate.
SCALING_TARGET = 1.5

_STARTED: list[subprocess.Popen[bytes]] = []


class BenchError(Exception):
    """A condition that stops the benchmark with exit code 2 and a message."""


# --------------------------------------------------------------------------------------- specs


@dataclass(frozen=True)
class EndpointSpec:
    """What wrk sends: one POST with a fixed JSON body and the hook token."""

    name: str
    path: str
    body: dict[str, Any]
    expect_table: str | None = None  # store table that should gain one row per 2xx


@dataclass(frozen=True)
class ServerSpec:
    """Which server to start: the raw ceiling app or hookwise (with optional pass-through flags).

    With `fresh_database_on` (a PostgreSQL URL), each start gets a new database on that server,
    passed as `--store`, and dropped when the server has stopped.
    """

    name: str
    #: `floor`: bench/floor_app.py, `/hooks/wake` kept in memory (the no-durability floor);
    #: `openclaw`: the peer's gateway from the npm install in `install_dir` (bench/openclaw.py)
    kind: Literal["ceiling", "floor", "hookwise", "openclaw"]
    store: str | None = None
    workers: int | None = None
    fresh_database_on: str | None = None
    #: an OpenAI-compatible server to use as the default model (see bench/remote_model.py)
    model_url: str | None = None
    #: more top-level config keys for hookwise (e.g. metrics off, short retention)
    config: tuple[tuple[str, Any], ...] = ()
    #: files to write beside the config first, (path relative to its folder, text): transforms
    #: go under hooks/transforms/, where hookwise looks for them
    files: tuple[tuple[str, str], ...] = ()
    #: keep each request's payload for replay (`hooks.retainPayloads`, on by default)
    retain_payloads: bool = True

    #: import `hookwise` from this folder instead of the installed one (another version of the
    #: code, measured beside this one: see bench/durability.py `--before`)
    pythonpath: str | None = None
    #: where OpenClaw and Node 24 are installed (`kind="openclaw"`, see bench/openclaw.py)
    install_dir: str | None = None
    #: this server's warm-up in seconds, instead of the load's (a JIT-compiled peer needs more)
    warmup_s: int | None = None

    @property
    def store_kind(self) -> str:
        postgres = is_postgres(self.store) or self.fresh_database_on is not None
        return "postgresql" if postgres else "sqlite"


@dataclass(frozen=True)
class LoadSpec:
    duration_s: int = 15
    warmup_s: int = 3
    connections: int = 32
    threads: int = 2


WAKE = EndpointSpec("wake", "/hooks/wake", {"text": "bench wake", "mode": "now"}, "events")
AGENT = EndpointSpec("agent", "/hooks/agent", {"message": "bench agent run"}, "runs")
#: a templated mapped hook that makes an event (the mapping `ping` of `_hookwise_config`)
MAPPED = EndpointSpec(
    "mapped", "/hooks/ping", {"host": "db-1", "check": "disk", "value": 91}, "events"
)
PING_MAPPING = {
    "id": "ping",
    "match": {"path": "ping"},
    "action": "wake",
    "textTemplate": "{{check}} on {{host}} at {{value}}%",
}
CEILING_ENDPOINT = EndpointSpec("ceiling", WAKE.path, WAKE.body)


# ------------------------------------------------------------------------------------- results


@dataclass
class WrkStats:
    requests: int = 0
    rps: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None
    non_2xx: int = 0
    socket_errors: int = 0

    @property
    def acknowledged(self) -> int:
        return self.requests - self.non_2xx


@dataclass
class Result:
    server: str
    endpoint: str
    stats: WrkStats
    warmup: WrkStats
    peak_rss_kib: int | None
    server_cpu_pct: float | None
    admin_check: str | None = None
    #: the whole machine's busy share during the measured run (server, store, wrk, kernel)
    machine_busy_pct: float | None = None
    stored_rows: int | None = None
    expect_table: str | None = None
    store: str | None = None  # "sqlite" or "postgresql" (hookwise only)
    workers: int | None = None
    notes: list[str] = field(default_factory=list)
    #: CPU seconds of the server's process tree during the measured run, and the run's length
    server_cpu_s: float | None = None
    elapsed_s: float | None = None
    round: int = 1


# ------------------------------------------------------------------------------------ processes


def _track(proc: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
    _STARTED.append(proc)
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, wait, then SIGKILL: the process and its workers are gone when this returns."""
    if proc.poll() is None:
        children = child_tree(proc.pid)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        kill_survivors(children)
    if proc in _STARTED:
        _STARTED.remove(proc)


def _cmdline(pid: int) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None


def child_tree(pid: int) -> dict[int, bytes]:
    """The descendants of `pid` (not `pid` itself) with their command lines."""
    tree = {p: _cmdline(p) for p in _descendants(pid)[1:]}
    return {p: cmd for p, cmd in tree.items() if cmd}


def kill_survivors(children: dict[int, bytes]) -> None:
    """SIGKILL descendants that outlived their parent (same pid and same command line)."""
    for pid, cmd in children.items():
        if _cmdline(pid) == cmd:
            with suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def stop_all() -> None:
    for proc in list(_STARTED):
        _stop(proc)


def _raise_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _post_ok(url: str, body: bytes, timeout: float = 1.0) -> bool:
    req = urllib.request.Request(url, data=body, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def _answers(url: str) -> bool:
    """Anything answers a POST to `url` (an error status counts: the server is up)."""
    try:
        urllib.request.urlopen(urllib.request.Request(url, data=b"{}"), timeout=1.0).close()
    except urllib.error.HTTPError:
        return True
    except (OSError, urllib.error.URLError):
        return False
    return True


@dataclass
class RunningServer:
    proc: subprocess.Popen[bytes]
    url: str
    workdir: Path
    state_dir: Path | None = None
    store_url: str | None = None  # the `--store` passed, if any


def _start_ceiling(workdir: Path, app: str = "ceiling_app.py", *args: str) -> RunningServer:
    port = _free_port()
    log = open(workdir / "ceiling.log", "wb")  # noqa: SIM115 - handed to the child
    cmd = [sys.executable, str(REPO / "bench" / app), str(port), *args]
    proc = _track(subprocess.Popen(cmd, cwd=workdir, stdout=log, stderr=log))
    log.close()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if _answers(url + "/"):
            return RunningServer(proc, url, workdir)
        time.sleep(0.1)
    log_text = (workdir / "ceiling.log").read_text(errors="replace")
    raise BenchError(f"the ceiling app did not start:\n{log_text}")


def _start_openclaw(spec: ServerSpec, workdir: Path) -> RunningServer:
    from bench import openclaw

    assert spec.install_dir is not None, "an openclaw server needs its install_dir"
    try:
        proc, url = openclaw.start(Path(spec.install_dir), workdir, _free_port(), HOOK_TOKEN)
    except (openclaw.OpenClawMissing, RuntimeError) as e:
        raise BenchError(str(e)) from e
    _track(proc)
    # it goes on starting after it answers (plugins, model catalogue, cron jobs): wait for its
    # process tree to go quiet so that the warm-up and the run measure the wake alone
    deadline = time.monotonic() + openclaw.QUIET_MAX_S
    while time.monotonic() < deadline:
        before = cpu_seconds(proc.pid)
        time.sleep(1.0)
        if cpu_seconds(proc.pid) - before < openclaw.QUIET_CPU_S:
            break
    return RunningServer(proc, url, workdir)


def _hookwise_config(
    path: Path,
    model_url: str | None = None,
    extra: tuple[tuple[str, Any], ...] = (),
    retain_payloads: bool = True,
) -> None:
    config: dict[str, Any] = {
        "hooks": {
            "enabled": True,
            "token": HOOK_TOKEN,
            "path": "/hooks",
            "mappings": [PING_MAPPING],
        },
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        **dict(extra),
    }
    if not retain_payloads:
        config["hooks"]["retainPayloads"] = {"enabled": False}
    if model_url is not None:
        from remote_model import API_KEY

        config["models"] = {
            "providers": {"remote": {"api": "openai", "baseUrl": model_url, "apiKey": API_KEY}}
        }
        config["agents"] = {"defaults": {"model": "remote/bench"}}
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")


def _passthrough_args(spec: ServerSpec) -> list[str]:
    args: list[str] = []
    if spec.store is not None:
        args += ["--store", spec.store]
    if spec.workers is not None:
        args += ["--workers", str(spec.workers)]
    return args


def check_cli_flags(spec: ServerSpec) -> None:
    """Exit 2 (via BenchError) if a pass-through flag is unknown to `hookwise serve`."""
    wanted = [a for a in _passthrough_args(spec) if a.startswith("--")]
    if not wanted:
        return
    help_text = subprocess.run(
        [str(BIN / "hookwise"), "serve", "--help"], capture_output=True, text=True, timeout=30
    ).stdout
    missing = [flag for flag in wanted if flag not in help_text]
    if missing:
        raise BenchError(
            f"`hookwise serve` does not accept {', '.join(missing)} yet "
            "(see `hookwise serve --help`)"
        )


def _drain(stream: Any) -> None:
    for _ in iter(stream.readline, b""):
        pass


def _start_hookwise(spec: ServerSpec, workdir: Path) -> RunningServer:
    config_path = workdir / "hookwise.json"
    state_dir = workdir / "state"
    for name, text in spec.files:
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (workdir / name).write_text(text, encoding="utf-8")
    _hookwise_config(config_path, spec.model_url, spec.config, spec.retain_payloads)
    stderr = open(workdir / "hookwise.stderr.log", "wb")  # noqa: SIM115 - handed to the child
    cmd = [
        str(BIN / "hookwise"),
        "serve",
        "--config",
        str(config_path),
        "--port",
        "0",
        "--state-dir",
        str(state_dir),
        "--log-level",
        "warning",
        *_passthrough_args(spec),
    ]
    env = None
    if spec.pythonpath is not None:
        env = {**os.environ, "PYTHONPATH": spec.pythonpath}
        cmd[0:1] = [sys.executable, "-m", "hookwise"]
    proc = _track(
        subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=stderr, env=env)
    )
    stderr.close()
    assert proc.stdout is not None
    line = _read_ready_line(proc)
    if b"listening on" not in line:
        log_text = (workdir / "hookwise.stderr.log").read_text(errors="replace")
        raise BenchError(f"hookwise did not start (exit {proc.poll()}):\n{log_text}")
    threading.Thread(target=_drain, args=(proc.stdout,), daemon=True).start()
    url = line.split(b"listening on ", 1)[1].split()[0].decode()
    return RunningServer(proc, url, workdir, state_dir, spec.store)


def _read_ready_line(proc: subprocess.Popen[bytes]) -> bytes:
    """The stdout line announcing readiness, or b"" on exit/timeout (read in a helper thread)."""
    assert proc.stdout is not None
    found: list[bytes] = []

    def reader() -> None:
        assert proc.stdout is not None
        for line in iter(proc.stdout.readline, b""):
            if b"listening on" in line:
                found.append(line)
                return

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    thread.join(START_TIMEOUT_S)
    return found[0] if found else b""


@contextmanager
def running(spec: ServerSpec) -> Iterator[RunningServer]:
    """Start the server for `spec` in a temporary directory (and a fresh database if asked);
    stop it and clean up (directory, database) on exit."""
    with ExitStack() as stack:
        if spec.fresh_database_on is not None:
            spec = replace(spec, store=stack.enter_context(fresh_database(spec.fresh_database_on)))
        tmp = stack.enter_context(
            tempfile.TemporaryDirectory(prefix=f"hookwise-bench-{spec.name}-")
        )
        workdir = Path(tmp)
        if spec.kind == "ceiling":
            server = _start_ceiling(workdir)
        elif spec.kind == "floor":
            server = _start_ceiling(workdir, "floor_app.py", HOOK_TOKEN)
        elif spec.kind == "openclaw":
            server = _start_openclaw(spec, workdir)
        else:
            server = _start_hookwise(spec, workdir)
        try:
            yield server
        finally:
            _stop(server.proc)


# --------------------------------------------------------------------------------- /proc probes


def _descendants(pid: int) -> list[int]:
    """`pid` and every descendant (worker processes count toward the server's memory)."""
    pids = [pid]
    i = 0
    while i < len(pids):
        task_dir = Path(f"/proc/{pids[i]}/task")
        try:
            for task in task_dir.iterdir():
                children = (task / "children").read_text().split()
                pids.extend(int(c) for c in children)
        except OSError:
            pass
        i += 1
    return pids


def peak_rss_kib(pid: int) -> int | None:
    """Sum of VmHWM (peak resident set) over the process tree, in KiB."""
    total = 0
    found = False
    for p in _descendants(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        match = re.search(r"^VmHWM:\s+(\d+)\s+kB", status, re.MULTILINE)
        if match:
            total += int(match.group(1))
            found = True
    return total if found else None


def machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs so far, from /proc/stat (idle and iowait are not busy)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal (guest is in user)
    return total - fields[3] - fields[4], total


def busy_pct(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    """The machine's busy share between two `machine_ticks()` readings, in percent."""
    total = after[1] - before[1]
    return 100.0 * (after[0] - before[0]) / total if total > 0 else None


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process tree so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for p in _descendants(pid):
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


# ------------------------------------------------------------------------------------------ wrk


def ensure_wrk() -> str:
    """Path of `wrk`, installing Debian's package if needed; BenchError if impossible."""
    found = shutil.which("wrk")
    if found:
        return found
    print("wrk not found: installing it with apt-get ...", flush=True)
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise BenchError("wrk is missing and cannot be installed here: run `apt-get install wrk`")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "wrk"]):
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
        except subprocess.TimeoutExpired as e:
            raise BenchError(f"`{' '.join(cmd)}` took too long") from e
        if done.returncode != 0:
            raise BenchError(f"`{' '.join(cmd)}` failed:\n{done.stderr.strip()}")
    found = shutil.which("wrk")
    if not found:
        raise BenchError("apt-get installed wrk but it is not on PATH")
    return found


def _lua_script(endpoint: EndpointSpec) -> str:
    body = json.dumps(endpoint.body, separators=(",", ":"))
    return (
        'wrk.method = "POST"\n'
        f"wrk.body = [==[{body}]==]\n"
        'wrk.headers["Content-Type"] = "application/json"\n'
        f'wrk.headers["Authorization"] = "Bearer {HOOK_TOKEN}"\n'
    )


_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}


def _latency_ms(text: str, percentile: str) -> float | None:
    match = re.search(rf"^\s*{percentile}%\s+([\d.]+)(us|ms|s|m|h)\s*$", text, re.MULTILINE)
    return float(match.group(1)) * _UNITS_MS[match.group(2)] if match else None


def parse_wrk(text: str) -> WrkStats:
    """Extract throughput, latency percentiles and error counts from `wrk --latency` output."""
    stats = WrkStats()
    if m := re.search(r"^\s*(\d+) requests in", text, re.MULTILINE):
        stats.requests = int(m.group(1))
    if m := re.search(r"^Requests/sec:\s+([\d.]+)", text, re.MULTILINE):
        stats.rps = float(m.group(1))
    if m := re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text):
        stats.non_2xx = int(m.group(1))
    sock_re = r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)"
    if m := re.search(sock_re, text):
        stats.socket_errors = sum(int(g) for g in m.groups())
    stats.p50_ms = _latency_ms(text, "50")
    stats.p99_ms = _latency_ms(text, "99")
    return stats


def run_wrk(
    url: str, endpoint: EndpointSpec, load: LoadSpec, duration_s: int, lua: str | None = None
) -> WrkStats:
    """One wrk run against `url + endpoint.path` (with the given Lua script, or one that POSTs
    the endpoint's body); raises BenchError if wrk fails."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(lua if lua is not None else _lua_script(endpoint))
    cmd = [
        "wrk",
        f"-t{load.threads}",
        f"-c{load.connections}",
        f"-d{duration_s}s",
        "--timeout",
        "5s",
        "--latency",
        "-s",
        script.name,
        url + endpoint.path,
    ]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=duration_s + 30)
    except subprocess.TimeoutExpired as e:
        raise BenchError(f"wrk did not finish within {duration_s + 30}s") from e
    finally:
        os.unlink(script.name)
    if done.returncode != 0:
        raise BenchError(f"wrk failed ({done.returncode}):\n{done.stderr}{done.stdout}")
    stats = parse_wrk(done.stdout)
    if stats.requests == 0:
        raise BenchError(f"wrk reported no requests:\n{done.stdout}")
    return stats


# ------------------------------------------------------------------------------ verification


def _admin_get(url: str, path: str) -> dict[str, Any]:
    req = urllib.request.Request(url + path, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return dict(json.loads(resp.read()))


def admin_check(server: RunningServer, endpoint: EndpointSpec) -> str:
    """Ask the admin API for the newest event/run; a short verdict for the report."""
    path = {"events": "/api/events?limit=1", "runs": "/api/runs?limit=1"}.get(
        endpoint.expect_table or ""
    )
    if path is None:
        return "n/a"
    try:
        page = _admin_get(server.url, path)
    except (OSError, urllib.error.URLError, ValueError) as e:
        return f"admin API error: {e}"
    items = page.get("items") or []
    if not items:
        return f"EMPTY: {path} returned no items"
    newest = items[0]
    ident = newest.get("eventId") or newest.get("runId") or "?"
    state = newest.get("state")
    return f"ok ({path} newest {ident}" + (f", state {state})" if state else ")")


def check_postgres(url: str) -> None:
    """BenchError unless PostgreSQL at `url` answers."""
    try:
        PgQuery(url).close()
    except PgError as e:
        raise BenchError(str(e)) from e


def stored_rows(server: RunningServer, table: str | None) -> int | None:
    """Row count of `table` in the server's store: a query on PostgreSQL, else the SQLite file
    (None if there is no such store or table)."""
    if table is None or server.state_dir is None:
        return None
    if is_postgres(server.store_url):
        assert server.store_url is not None
        return count_rows(server.store_url, table)
    if server.store_url and server.store_url.startswith("sqlite:///"):
        db = Path(server.store_url.removeprefix("sqlite:///"))
    else:
        db = server.state_dir / "hookwise.db"
    if not db.exists():
        return None
    conn = sqlite3.connect(db, timeout=10)
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


# -------------------------------------------------------------------------------------- measure


SETTLE_BUSY_PCT = 10.0
SETTLE_MAX_S = 10.0


def settle() -> float | None:
    """Wait for the machine to go quiet before a measurement: the previous server's files are
    flushed to disk (`sync`) and the machine's busy share is sampled until it falls under
    `SETTLE_BUSY_PCT` (at most `SETTLE_MAX_S`). Without it, a measurement that follows one that
    wrote a lot (`/agent`'s backlog) paid for the other's disk writes. The last busy share."""
    os.sync()
    deadline = time.monotonic() + SETTLE_MAX_S
    busy = None
    while time.monotonic() < deadline:
        before = machine_ticks()
        time.sleep(0.5)
        busy = busy_pct(before, machine_ticks())
        if busy is not None and busy < SETTLE_BUSY_PCT:
            break
    return busy


def measure(endpoint: EndpointSpec, spec: ServerSpec, load: LoadSpec) -> Result:
    """Fresh server on a settled machine, warm-up, measured wrk run, peak RSS, admin check,
    stored-row count (rows gained during the warm-up and the run, so a store given with
    `--store` may hold older rows)."""
    settle()
    with running(spec) as server:
        rows_before = stored_rows(server, endpoint.expect_table) or 0
        warm = run_wrk(server.url, endpoint, load, spec.warmup_s or load.warmup_s)
        cpu_before = cpu_seconds(server.proc.pid)
        machine_before = machine_ticks()
        started = time.monotonic()
        stats = run_wrk(server.url, endpoint, load, load.duration_s)
        elapsed = time.monotonic() - started
        machine = busy_pct(machine_before, machine_ticks())
        cpu_pct = 100.0 * (cpu_seconds(server.proc.pid) - cpu_before) / elapsed
        rss = peak_rss_kib(server.proc.pid)
        check = admin_check(server, endpoint) if spec.kind == "hookwise" else None
        result = Result(spec.name, endpoint.name, stats, warm, rss, cpu_pct, check, machine)
        result.server_cpu_s, result.elapsed_s = cpu_pct * elapsed / 100.0, elapsed
        result.expect_table = endpoint.expect_table
        if spec.kind == "hookwise":
            result.store, result.workers = spec.store_kind, spec.workers or 1
        _stop(server.proc)  # count rows on a closed store, before the temp dir/database goes
        rows_after = stored_rows(server, endpoint.expect_table)
        result.stored_rows = None if rows_after is None else rows_after - rows_before
    result.notes = _notes(result)
    return result


def _notes(result: Result) -> list[str]:
    notes: list[str] = []
    for label, s in (("warm-up", result.warmup), ("run", result.stats)):
        if s.non_2xx:
            notes.append(f"{label}: {s.non_2xx} non-2xx responses")
        if s.socket_errors:
            notes.append(f"{label}: {s.socket_errors} socket errors")
    if result.admin_check and not result.admin_check.startswith("ok"):
        notes.append(result.admin_check)
    if result.stored_rows is not None:
        acked = result.warmup.acknowledged + result.stats.acknowledged
        if result.stored_rows < acked:
            notes.append(f"LOST: {acked} acknowledged but only {result.stored_rows} stored")
    return notes


# --------------------------------------------------------------------------------------- report


def machine_info() -> dict[str, Any]:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    wrk_version = subprocess.run(["wrk", "-v"], capture_output=True, text=True, timeout=10)
    import uvicorn

    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": model,
        "python": platform.python_version(),
        "kernel": platform.release(),
        "uvicorn": uvicorn.__version__,
        "wrk": (wrk_version.stdout or wrk_version.stderr).split(" Copyright")[0].strip(),
    }


def _fmt_ms(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else "?"


def _same_round(results: list[Result], result: Result, endpoint: str) -> Result | None:
    """The `endpoint` row of `result`'s round and server (the ceiling: of its round)."""
    for r in results:
        same = r.round == result.round and r.endpoint == endpoint
        if same and (endpoint == "ceiling" or r.server == result.server):
            return r
    return None


def _target_text(result: Result, results: list[Result], ratio: float | None) -> str:
    target = TARGETS.get(result.endpoint)
    if not target:
        return ""
    parts = []
    if "ratio" in target and ratio is not None:
        parts.append(
            f"ratio >= {target['ratio']:.2f}: {'PASS' if ratio >= target['ratio'] else 'FAIL'}"
        )
    if "p99_ms" in target:
        p99 = result.stats.p99_ms
        ok = p99 is not None and p99 < target["p99_ms"]
        parts.append(f"p99 < {target['p99_ms']:.0f} ms: {'PASS' if ok else 'FAIL'}")
    wake = _same_round(results, result, "wake")
    if "vs_wake" in target and wake is not None and wake.stats.rps:
        vs = result.stats.rps / wake.stats.rps
        verdict = "PASS" if vs >= target["vs_wake"] else "FAIL"
        parts.append(f"/wake x{vs:.2f} >= {target['vs_wake']:.2f}: {verdict}")
    return "; ".join(parts)


def issue18_summary(results: list[Result]) -> dict[str, Any]:
    """Issue 18's ratios, each taken within one round, over the rounds: per round and min-max."""
    pairs = {"wake/ceiling": ("wake", "ceiling"), "agent/wake": ("agent", "wake")}
    pairs["mapped/wake"] = ("mapped", "wake")
    targets = {
        "wake/ceiling": TARGETS["wake"]["ratio"],
        "agent/wake": TARGETS["agent"]["vs_wake"],
        "mapped/wake": TARGETS["mapped"]["vs_wake"],
    }
    out: dict[str, Any] = {}
    for name, (a, b) in pairs.items():
        ratios = []
        for r in results:
            if r.endpoint != a:
                continue
            ref = _same_round(results, r, b)
            if ref is not None and ref.stats.rps:
                ratios.append(r.stats.rps / ref.stats.rps)
        if ratios:
            out[name] = {
                "per_round": ratios,
                "min": min(ratios),
                "max": max(ratios),
                "target": targets[name],
                "rounds_passing": sum(x >= targets[name] for x in ratios),
            }
    p99 = [r.stats.p99_ms for r in results if r.endpoint == "wake" and r.stats.p99_ms is not None]
    if p99:
        out["wake_p99_ms"] = {"min": min(p99), "max": max(p99), "target_below": 20.0}
    for endpoint in ("ceiling", "wake", "agent", "mapped"):
        figures = [server_us_per_request(r) for r in results if r.endpoint == endpoint]
        known = [f for f in figures if f is not None]
        if known:
            out[f"server_us_per_request_{endpoint}"] = {"min": min(known), "max": max(known)}
    return out


def render_issue18(summary: dict[str, Any]) -> str:
    lines = ["issue 18 (ratios within one round; ranges over the rounds):"]
    for name in ("wake/ceiling", "agent/wake", "mapped/wake"):
        f = summary.get(name)
        if f is None:
            continue
        lines.append(
            f"  {name:<13} {f['min']:.3f} - {f['max']:.3f} (target >= {f['target']:.2f}: "
            f"{f['rounds_passing']} of {len(f['per_round'])} rounds pass)"
        )
    if "wake_p99_ms" in summary:
        f = summary["wake_p99_ms"]
        lines.append(f"  /wake p99     {f['min']:.1f} - {f['max']:.1f} ms (target < 20 ms)")
    for endpoint in ("ceiling", "wake", "agent", "mapped"):
        f = summary.get(f"server_us_per_request_{endpoint}")
        if f is not None:
            lines.append(
                f"  server CPU per accepted request, {endpoint:<7} {f['min']:.0f} - {f['max']:.0f} µs"
            )
    return "\n".join(lines)


def _ratio(result: Result, results: list[Result]) -> float | None:
    ceiling = _same_round(results, result, "ceiling")
    if ceiling is None or ceiling is result or not ceiling.stats.rps:
        return None
    return result.stats.rps / ceiling.stats.rps


def _accepted_per_s(result: Result) -> float:
    stats = result.stats
    return stats.rps * stats.acknowledged / stats.requests if stats.requests else 0.0


def machine_us_per_request(result: Result) -> float | None:
    """Machine CPU time per acknowledged request (every process and the kernel), in µs. On a
    machine others use too, their work counts here: compare `server_us_per_request`."""
    accepted = _accepted_per_s(result)
    if result.machine_busy_pct is None or not accepted:
        return None
    cores = os.cpu_count() or 1
    return result.machine_busy_pct / 100.0 * cores * 1e6 / accepted


def server_us_per_request(result: Result) -> float | None:
    """CPU time of the server's process tree (user + system) per acknowledged request, in µs:
    the figure that tells how many requests a core takes, undisturbed by other processes."""
    accepted = _accepted_per_s(result)
    if result.server_cpu_s is None or not result.elapsed_s or not accepted:
        return None
    return result.server_cpu_s / result.elapsed_s * 1e6 / accepted


def render_table(results: list[Result]) -> str:
    header = (
        f"{'server/endpoint':<22} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'peak RSS':>9} {'srv CPU':>8} {'machine':>8} {'µs/req':>7} {'srv µs':>7} {'non-2xx':>8} "
        f"{'ratio':>6}  target"
    )
    lines = [header, "-" * (len(header) + 30)]
    for r in results:
        ratio = _ratio(r, results)
        rss = f"{r.peak_rss_kib / 1024:.0f} MiB" if r.peak_rss_kib else "?"
        cpu = f"{r.server_cpu_pct:.0f}%" if r.server_cpu_pct is not None else "?"
        busy = f"{r.machine_busy_pct:.0f}%" if r.machine_busy_pct is not None else "?"
        per_req = machine_us_per_request(r)
        us = f"{per_req:.0f}" if per_req is not None else "?"
        srv_req = server_us_per_request(r)
        srv_us = f"{srv_req:.0f}" if srv_req is not None else "?"
        label = r.endpoint if r.endpoint == "ceiling" else f"{r.server} /{r.endpoint}"
        if r.round > 1 or len({x.round for x in results}) > 1:
            label = f"{label} #{r.round}"
        lines.append(
            f"{label:<22} {r.stats.rps:>9,.0f} {_fmt_ms(r.stats.p50_ms):>8} "
            f"{_fmt_ms(r.stats.p99_ms):>8} {rss:>9} {cpu:>8} {busy:>8} {us:>7} {srv_us:>7} "
            f"{r.stats.non_2xx:>8} "
            f"{(f'{ratio:.3f}' if ratio is not None else '1.000'):>6}  {_target_text(r, results, ratio)}"
        )
    return "\n".join(lines)


def render_checks(results: list[Result]) -> str:
    lines = []
    for r in results:
        if r.endpoint == "ceiling":
            continue
        acked = r.warmup.acknowledged + r.stats.acknowledged
        lines.append(
            f"{r.server} /{r.endpoint}: admin API {r.admin_check}; stored {r.expect_table} rows "
            f"{r.stored_rows if r.stored_rows is not None else '?'} >= acknowledged {acked} "
            f"(warm-up {r.warmup.acknowledged} + run {r.stats.acknowledged}); "
            f"non-2xx {r.warmup.non_2xx + r.stats.non_2xx}"
        )
        lines.extend(f"  ! {n}" for n in r.notes)
    return "\n".join(lines)


def scaling_figure(results: list[Result], base: str, scaled: str, endpoint: str) -> dict[str, Any]:
    """`scaled` vs `base` requests/s on `endpoint` (issue 7: PostgreSQL 2 vs 1 process /agent)."""
    by_server = {r.server: r for r in results if r.endpoint == endpoint}
    base_r, scaled_r = by_server.get(base), by_server.get(scaled)
    base_rps = base_r.stats.rps if base_r else None
    scaled_rps = scaled_r.stats.rps if scaled_r else None
    factor = scaled_rps / base_rps if base_rps and scaled_rps is not None else None
    # What the whole machine could carry at the base's machine CPU per request: the most any
    # number of processes can reach here unless a request gets cheaper.
    base_busy = base_r.machine_busy_pct if base_r else None
    machine_bound = base_rps * 100.0 / base_busy if base_rps and base_busy else None
    return {
        "base_machine_busy_pct": base_busy,
        "scaled_machine_busy_pct": scaled_r.machine_busy_pct if scaled_r else None,
        "base_us_per_request": machine_us_per_request(base_r) if base_r else None,
        "scaled_us_per_request": machine_us_per_request(scaled_r) if scaled_r else None,
        "machine_bound_rps": machine_bound,
        "endpoint": endpoint,
        "base": base,
        "scaled": scaled,
        "base_rps": base_rps,
        "scaled_rps": scaled_rps,
        "factor": factor,
        "target": SCALING_TARGET,
        "pass": factor is not None and factor >= SCALING_TARGET,
    }


def render_scaling(figure: dict[str, Any]) -> str:
    factor = figure["factor"]
    line = (
        f"issue 7: {figure['scaled']} vs {figure['base']} /{figure['endpoint']} acceptance: "
        f"{figure['scaled_rps'] or 0:,.0f} / {figure['base_rps'] or 0:,.0f} req/s = "
        f"{(f'{factor:.2f}x' if factor is not None else '?')} "
        f"(target >= {figure['target']:.1f}x): {'PASS' if figure['pass'] else 'FAIL'}"
    )
    bound, base_rps = figure["machine_bound_rps"], figure["base_rps"]
    if bound is None or not base_rps:
        return line
    return (
        f"{line}\n  machine: {figure['base']} keeps it {figure['base_machine_busy_pct']:.0f}% busy "
        f"({figure['base_us_per_request']:.0f} µs of machine CPU per request), "
        f"{figure['scaled']} {figure['scaled_machine_busy_pct']:.0f}% "
        f"({figure['scaled_us_per_request']:.0f} µs); at {figure['base']}'s cost per request the "
        f"whole machine carries at most {bound:,.0f} req/s = {bound / base_rps:.2f}x"
    )


def bench_json(
    results: list[Result],
    machine: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> str:
    payload = {
        "machine": machine,
        **(extra or {}),
        "results": [
            {
                **asdict(r),
                "ratio": _ratio(r, results),
                "server_us_per_request": server_us_per_request(r),
                "machine_us_per_request": machine_us_per_request(r),
                "target": TARGETS.get(r.endpoint),
            }
            for r in results
        ],
    }
    return "BENCH_JSON " + json.dumps(payload, separators=(",", ":"))


# ----------------------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=int, default=15, help="measured seconds per run")
    p.add_argument("--warmup", type=int, default=3, help="warm-up seconds per run")
    p.add_argument("--connections", type=int, default=32, help="wrk connections")
    p.add_argument("--threads", type=int, default=2, help="wrk threads")
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="repeat ceiling, /wake, /agent, mapped this many times, interleaved (ratios are "
        "taken within a round, so a busy machine disturbs them less)",
    )
    p.add_argument(
        "--no-retain-payloads",
        action="store_true",
        help="hooks.retainPayloads: {enabled: false} (payloads are kept for replay by default)",
    )
    p.add_argument("--store", help="passed to `hookwise serve --store` (only if given)")
    p.add_argument("--workers", type=int, help="passed to `hookwise serve --workers`")
    p.add_argument(
        "--matrix",
        action="store_true",
        help="issue 7: SQLite and PostgreSQL x 1 and 2 processes, side by side",
    )
    p.add_argument(
        "--pg-url",
        default=DEFAULT_PG_URL,
        help=f"with --matrix: PostgreSQL server for the fresh databases (default {DEFAULT_PG_URL})",
    )
    p.add_argument(
        "--model-latency",
        type=float,
        default=None,
        metavar="SECONDS",
        help="run the agent runs on a loopback OpenAI-compatible model that answers after this "
        "delay (as a remote provider does) instead of the built-in echo model, whose instant "
        "runs compete with the HTTP path for the cores",
    )
    args = p.parse_args(argv)
    if args.matrix and (args.store is not None or args.workers is not None):
        p.error("--matrix chooses the stores and workers itself: drop --store/--workers")
    return args


def matrix_specs(pg_url: str) -> list[ServerSpec]:
    """Issue 7: SQLite and PostgreSQL, 1 and 2 processes; a fresh PostgreSQL database each time."""
    return [
        ServerSpec(f"{store}-{n}p", "hookwise", workers=n, fresh_database_on=pg)
        for store, pg in (("sqlite", None), ("postgres", pg_url))
        for n in (1, 2)
    ]


def _describe(spec: ServerSpec) -> str:
    """The `hookwise serve` flags of `spec`, for the report."""
    args = " ".join(_passthrough_args(spec)) or "(defaults: SQLite, 1 worker)"
    if spec.fresh_database_on is not None:
        args += " --store <fresh database>"
    return args


def run(args: argparse.Namespace) -> int:
    if args.model_latency is None:
        return _run(args, None)
    from remote_model import RemoteModel

    with RemoteModel(args.model_latency) as model:
        return _run(args, model.base_url)


def _run(args: argparse.Namespace, model_url: str | None) -> int:
    load = LoadSpec(args.duration, args.warmup, args.connections, args.threads)
    if args.matrix:
        specs = [replace(s, model_url=model_url) for s in matrix_specs(args.pg_url)]
        check_cli_flags(ServerSpec("check", "hookwise", store=args.pg_url, workers=2))
        check_postgres(args.pg_url)
    else:
        specs = [
            ServerSpec(
                "hookwise",
                "hookwise",
                store=args.store,
                workers=args.workers,
                model_url=model_url,
                retain_payloads=not args.no_retain_payloads,
            )
        ]
        check_cli_flags(specs[0])
    ceiling_spec = ServerSpec("ceiling", "ceiling")
    ensure_wrk()
    machine = machine_info()
    if args.matrix:
        configs = "; ".join(f"{spec.name}: {_describe(spec)}" for spec in specs)
    else:
        configs = _describe(specs[0])
    model = (
        "echo (built in)"
        if model_url is None
        else f"a loopback OpenAI-compatible model answering after {args.model_latency:g} s"
    )
    print(
        f"load: wrk -t{load.threads} -c{load.connections}, {load.warmup_s}s warm-up + "
        f"{load.duration_s}s per run, loopback; hookwise args: {configs}; model: {model}",
        flush=True,
    )
    endpoints = (WAKE, AGENT) if args.matrix else (WAKE, AGENT, MAPPED)
    plan = [(CEILING_ENDPOINT, ceiling_spec)] + [(e, s) for s in specs for e in endpoints]
    results: list[Result] = []
    for n in range(1, args.rounds + 1):
        for endpoint, spec in plan:
            print(f"measuring {spec.name} {endpoint.path} (round {n}) ...", flush=True)
            result = measure(endpoint, spec, load)
            result.round = n
            results.append(result)
    print()
    print(
        f"machine: {machine['nproc']} CPUs, {machine['cpu']}; Python {machine['python']}; "
        f"uvicorn {machine['uvicorn']}; {machine['wrk']}; Linux {machine['kernel']}"
    )
    print(render_table(results))
    print(render_checks(results))
    extra: dict[str, Any] = {}
    if not args.matrix:
        extra["issue18"] = issue18_summary(results)
        print(render_issue18(extra["issue18"]))
    if args.matrix:
        extra["issue7"] = scaling_figure(results, "postgres-1p", "postgres-2p", AGENT.name)
        print(render_scaling(extra["issue7"]))
    print(bench_json(results, machine, extra))
    failed = any(r.notes for r in results)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with SIGINT ignored
    try:
        return run(args)
    except (BenchError, PgError) as e:
        print(f"bench: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
    finally:
        stop_all()
        for line in drop_leftovers():
            print(f"bench: {line}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
