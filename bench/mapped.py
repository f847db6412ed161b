"""Mapped-hook benchmark: `POST /hooks/gmail` (the gmail preset, a templated mapping) next to
`POST /hooks/wake`, over HTTP with wrk, on loopback. The in-process figures are `hookwise.engine.py`'s.

Run from the repository root:

    .venv/bin/python bench/mapped.py [--duration 10] [--warmup 2] [--connections 32]
                                     [--threads 2] [--endpoints wake,gmail,...] [--rounds N]

Each endpoint gets a fresh hookwise (same config for all: hooks enabled, `presets: [gmail]`, one
templated wake mapping `ping`; default durable SQLite store; `agents.defaults.maxConcurrentRuns`
as configured by default), a warm-up, then a measured `wrk --latency` run with one fixed body and
the `Authorization: Bearer` header (a Lua script). It prints requests/s, p50 and p99 per endpoint,
and the ratio `gmail / wake` against issue 3's target (a templated mapped hook costs at most 15%
of /wake's throughput: ratio >= 0.85), then a line `BENCH_JSON {...}`.

- `wake` and `gmail` are the pair the target is about. `/hooks/gmail` creates an agent run (202)
  where `/wake` creates an event (200), so more rows separate the mapping's cost from the
  action's: `agent` (`/hooks/agent` with a short message), `agent-gmail` (`/hooks/agent` with
  exactly the action the preset renders: gmail / agent-gmail is the mapping's own cost) and
  `mapped-wake` (`/hooks/ping`, a templated mapping that makes an event, next to /wake).
- Gmail message ids (so the preset's session keys) differ per request (`@N@` in the bodies,
  replaced by wrk's Lua script), as /agent's generated session keys do.
- `rules-1` and `rules-1000` (issue 18): `POST /hooks/route` with 1 rule on that path, and with
  1,000 such rules (each a header and a JSONPath condition, told apart by `X-System`), the
  request naming the last one. Target: rules-1000 at least 0.9 of rules-1, per round.
- `--rounds N` measures the endpoints N times, interleaved; ratios are taken within a round, and
  also per server CPU second (from the CPU each request costs the server: the figure a busy
  machine disturbs least). `srv µs` / `mach µs`: CPU of the server's process tree / of the whole
  machine per acknowledged request.
- The server's runtime executes the runs with the built-in echo model while wrk is sending; that
  work shares the CPU with the HTTP path, as it does in production.

Exit codes: 0 done, 1 done but some responses were not 2xx, 2 could not run (no wrk, hookwise
did not start), 130 interrupted. The target is reported, not enforced by the exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ingest
from ingest import (
    ADMIN_TOKEN,
    BIN,
    HOOK_TOKEN,
    BenchError,
    EndpointSpec,
    LoadSpec,
    WrkStats,
    ensure_wrk,
    machine_info,
)

START_TIMEOUT_S = 30.0
TARGET_RATIO = 0.85  # gmail / wake

GMAIL_BODY = {
    "source": "gmail",
    "messages": [
        {
            "id": "18c2f0a1-@N@",
            "from": "Ada Lovelace <ada@example.com>",
            "subject": "Quarterly report draft",
            "snippet": "Hi, attached is the draft of the quarterly report for review",
            "body": "Hi,\n\nattached is the draft of the quarterly report. Could you review "
            "the numbers in section 3 before Friday?\n\nThanks,\nAda",
        }
    ],
}

ENDPOINTS: dict[str, EndpointSpec] = {
    "wake": EndpointSpec("wake", "/hooks/wake", {"text": "bench wake", "mode": "now"}),
    "gmail": EndpointSpec("gmail", "/hooks/gmail", GMAIL_BODY),
    "agent": EndpointSpec("agent", "/hooks/agent", {"message": "bench agent run"}),
    # What the gmail preset renders, sent directly: gmail / agent-gmail is the mapping's own cost.
    "agent-gmail": EndpointSpec(
        "agent-gmail",
        "/hooks/agent",
        {
            "message": "New email from {from}\nSubject: {subject}\n{snippet}\n{body}".format(
                **GMAIL_BODY["messages"][0]
            ),
            "name": "Gmail",
            "sessionKey": "hook:gmail:18c2f0a1-@N@",
        },
    ),
    "mapped-wake": EndpointSpec(
        "mapped-wake", "/hooks/ping", {"host": "db-1", "check": "disk", "value": 91}
    ),
    # The same mapping plus a small JS transform (run in the sandbox worker processes).
    "mapped-js": EndpointSpec(
        "mapped-js", "/hooks/ping-js", {"host": "db-1", "check": "disk", "value": 91}
    ),
    # Issue 18: one path with 1 rule, and with 1,000 such rules, the last one matching.
    "rules-1": EndpointSpec("rules-1", "/hooks/route", {"kind": "alert", "host": "db-1"}),
    "rules-1000": EndpointSpec("rules-1000", "/hooks/route", {"kind": "alert", "host": "db-1"}),
}
#: endpoint -> how many rules share `/hooks/route` (each: a header and a JSONPath condition)
RULE_COUNTS = {"rules-1": 1, "rules-1000": 1000}
RULES_TARGET = 0.9  # rules-1000 / rules-1, issue 18
TARGET_JS_RATIO = 0.5  # mapped-js / mapped-wake (issue 17)
JS_TRANSFORM = """\
export default function ({ payload, action }) {
  return { text: action.text + (payload.value > 90 ? " [high]" : "") };
}
"""


def route_rules(count: int) -> list[dict[str, Any]]:
    """`count` rules on one path, told apart by the `X-System` header; a request names the last."""
    return [
        {
            "id": f"system-{i}",
            "match": {
                "path": "route",
                "when": [
                    {"header": "X-System", "equals": f"system-{i}"},
                    {"jsonpath": "$.kind", "equals": "alert"},
                ],
            },
            "action": "wake",
            "textTemplate": "{{kind}} on {{host}} from system-" + str(i),
        }
        for i in range(count)
    ]


def hookwise_config(route_rule_count: int = 0) -> dict[str, Any]:
    config: dict[str, Any] = {
        "hooks": {
            "enabled": True,
            "token": HOOK_TOKEN,
            "path": "/hooks",
            "presets": ["gmail"],
            "mappings": [
                {
                    "id": "ping",
                    "match": {"path": "ping"},
                    "action": "wake",
                    "textTemplate": "{{check}} on {{host}} at {{value}}%",
                },
                {
                    "id": "ping-js",
                    "match": {"path": "ping-js"},
                    "action": "wake",
                    "textTemplate": "{{check}} on {{host}} at {{value}}%",
                    "transform": {"module": "ping.js"},
                },
            ],
        },
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
    }
    config["hooks"]["mappings"] += route_rules(route_rule_count)
    return config


# Every request gets its own `@N@` (wrk thread and request number): Gmail message ids, and so the
# preset's session keys, are distinct in real traffic, as /agent's generated session keys are.
LUA = """\
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %(token)s"
%(headers)s
local template = [==[%(body)s]==]
local threads = 0
function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end
local n = 0
function request()
  n = n + 1
  local body = template:gsub("@N@", tid .. "-" .. n)
  return wrk.format(nil, nil, nil, body)
end
"""


def run_wrk(url: str, endpoint: EndpointSpec, load: LoadSpec, duration_s: int) -> WrkStats:
    """One `wrk --latency` run with a fresh `@N@` per request (see `LUA`)."""
    body = json.dumps(endpoint.body, separators=(",", ":"))
    count = RULE_COUNTS.get(endpoint.name)
    headers = f'wrk.headers["X-System"] = "system-{count - 1}"' if count else ""
    lua = LUA % {"token": HOOK_TOKEN, "body": body, "headers": headers}
    return ingest.run_wrk(url, endpoint, load, duration_s, lua=lua)


@dataclass
class Measured:
    endpoint: str
    stats: WrkStats
    warmup: WrkStats
    stored: str
    server_us: float | None = None  # server CPU per acknowledged request
    machine_us: float | None = None  # machine CPU per acknowledged request (others' load too)
    round: int = 1


# ------------------------------------------------------------------------------------ server


def _ready_line(proc: subprocess.Popen[bytes]) -> bytes:
    found: list[bytes] = []

    def reader() -> None:
        assert proc.stdout is not None
        for line in iter(proc.stdout.readline, b""):
            if b"listening on" in line:
                found.append(line)
                break
        for _ in iter(proc.stdout.readline, b""):  # keep draining
            pass

    threading.Thread(target=reader, daemon=True).start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not found and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return found[0] if found else b""


@contextmanager
def hookwise(route_rule_count: int = 0) -> Iterator[tuple[str, int]]:
    """A fresh hookwise on a free loopback port in a temporary directory; yields its URL and
    process id."""
    with tempfile.TemporaryDirectory(prefix="hookwise-bench-mapped-") as tmp:
        workdir = Path(tmp)
        (workdir / "hooks" / "transforms").mkdir(parents=True)  # where hookwise looks for them
        (workdir / "hooks" / "transforms" / "ping.js").write_text(JS_TRANSFORM, encoding="utf-8")
        config = workdir / "hookwise.json"
        config.write_text(json.dumps(hookwise_config(route_rule_count), indent=2), encoding="utf-8")
        log = workdir / "stderr.log"
        with open(log, "wb") as stderr:
            proc = subprocess.Popen(
                [
                    str(BIN / "hookwise"),
                    "serve",
                    "--config",
                    str(config),
                    "--port",
                    "0",
                    "--state-dir",
                    str(workdir / "state"),
                    "--log-level",
                    "warning",
                ],
                cwd=workdir,
                stdout=subprocess.PIPE,
                stderr=stderr,
            )
        try:
            line = _ready_line(proc)
            if b"listening on" not in line:
                raise BenchError(f"hookwise did not start:\n{log.read_text(errors='replace')}")
            yield line.split(b"listening on ", 1)[1].split()[0].decode(), proc.pid
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def _admin(url: str, path: str) -> dict[str, Any]:
    req = urllib.request.Request(url + path, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return dict(json.loads(resp.read()))


def _stored(url: str, endpoint: str) -> str:
    """What the newest stored row says, as a check that the requests did what they should."""
    if endpoint in ("wake", "mapped-wake", "mapped-js", *RULE_COUNTS):
        items = _admin(url, "/api/events?limit=1")["items"]
        return f"newest event: {items[0]['source']}" if items else "NO EVENTS"
    items = _admin(url, "/api/runs?limit=1")["items"]
    if not items:
        return "NO RUNS"
    run = items[0]
    return f"newest run: rule {run['rule']}, {run['sessionKey']}, {run['state']}"


def measure(endpoint: EndpointSpec, load: LoadSpec) -> Measured:
    with hookwise(RULE_COUNTS.get(endpoint.name, 0)) as (url, pid):
        warm = run_wrk(url, endpoint, load, load.warmup_s)
        cpu_before, ticks_before = ingest.cpu_seconds(pid), ingest.machine_ticks()
        started = time.monotonic()
        stats = run_wrk(url, endpoint, load, load.duration_s)
        elapsed = time.monotonic() - started
        busy = ingest.busy_pct(ticks_before, ingest.machine_ticks())
        server_cpu = ingest.cpu_seconds(pid) - cpu_before
        measured = Measured(endpoint.name, stats, warm, _stored(url, endpoint.name))
        accepted = stats.acknowledged
        if accepted:
            measured.server_us = server_cpu * 1e6 / accepted
            if busy is not None:
                cores = os.cpu_count() or 1
                measured.machine_us = busy / 100.0 * cores * elapsed * 1e6 / accepted
        return measured


# ------------------------------------------------------------------------------------ report


def _ms(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else "?"


PAIRS = (
    ("gmail", "wake", TARGET_RATIO, "issue 3"),
    ("mapped-wake", "wake", None, "same kind of action"),
    ("gmail", "agent", None, "same kind of action"),
    ("gmail", "agent-gmail", None, "the mapping's own cost"),
    ("rules-1000", "rules-1", RULES_TARGET, "issue 18: 1,000 rules on one path vs 1"),
    ("mapped-js", "mapped-wake", TARGET_JS_RATIO, "issue 17: a small JS transform vs none"),
)


def ratios(results: list[Measured], cpu: bool = False) -> dict[str, list[float]]:
    """`a : b` for each pair in `PAIRS`, one figure per round in which both were measured: of
    requests/s, or (`cpu`) of requests per server CPU second (b's CPU per request / a's), the
    figure a busy machine disturbs least."""
    out: dict[str, list[float]] = {}
    rounds = sorted({m.round for m in results})
    for a, b, _, _ in PAIRS:
        for n in rounds:
            ma = next((m for m in results if m.endpoint == a and m.round == n), None)
            mb = next((m for m in results if m.endpoint == b and m.round == n), None)
            if ma is None or mb is None:
                continue
            if cpu and ma.server_us and mb.server_us:
                out.setdefault(f"{a} : {b}", []).append(mb.server_us / ma.server_us)
            elif not cpu and mb.stats.rps:
                out.setdefault(f"{a} : {b}", []).append(ma.stats.rps / mb.stats.rps)
    return out


def _us(value: float | None) -> str:
    return f"{value:.0f}" if value is not None else "?"


def report(results: list[Measured]) -> tuple[str, dict[str, list[float]]]:
    lines = [
        f"{'endpoint':<36} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'srv µs':>7} "
        f"{'mach µs':>7} {'non-2xx':>8}  stored"
    ]
    lines.append("-" * 110)
    several = len({m.round for m in results}) > 1
    for m in results:
        label = f"{m.endpoint} ({ENDPOINTS[m.endpoint].path})" + (f" #{m.round}" if several else "")
        lines.append(
            f"{label:<36} {m.stats.rps:>9,.0f} {_ms(m.stats.p50_ms):>8} {_ms(m.stats.p99_ms):>8} "
            f"{_us(m.server_us):>7} {_us(m.machine_us):>7} "
            f"{m.stats.non_2xx + m.warmup.non_2xx:>8}  {m.stored}"
        )
    lines.append(
        "srv µs / mach µs: CPU of the server process tree / of the whole machine per acknowledged "
        "request (the machine's figure counts every other process on it too)"
    )
    found = ratios(results)
    for a, b, target, what in PAIRS:
        figures = found.get(f"{a} : {b}")
        if not figures:
            continue
        shown = ", ".join(f"{x:.3f}" for x in figures)
        verdict = ""
        if target is not None:
            passing = sum(x >= target for x in figures)
            verdict = f"; target >= {target}: {passing} of {len(figures)} rounds pass"
        lines.append(f"ratio {a} : {b} = {shown} ({what}{verdict})")
        per_cpu = ratios(results, cpu=True).get(f"{a} : {b}")
        if per_cpu:
            shown = ", ".join(f"{x:.3f}" for x in per_cpu)
            lines.append(f"  per server CPU second: {shown}")
    return "\n".join(lines), found


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=int, default=10, help="measured seconds per endpoint")
    p.add_argument("--warmup", type=int, default=2, help="warm-up seconds per endpoint")
    p.add_argument("--connections", type=int, default=32, help="wrk connections")
    p.add_argument("--threads", type=int, default=2, help="wrk threads")
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure the endpoints this many times, interleaved (ratios are taken per round)",
    )
    p.add_argument(
        "--endpoints",
        default=",".join(ENDPOINTS),
        help=f"comma-separated, from {', '.join(ENDPOINTS)} (default: all)",
    )
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> int:
    names = [n.strip() for n in args.endpoints.split(",") if n.strip()]
    unknown = [n for n in names if n not in ENDPOINTS]
    if unknown:
        raise BenchError(f"unknown endpoint(s): {', '.join(unknown)}")
    load = LoadSpec(args.duration, args.warmup, args.connections, args.threads)
    ensure_wrk()
    machine = machine_info()
    print(
        f"load: wrk -t{load.threads} -c{load.connections}, {load.warmup_s}s warm-up + "
        f"{load.duration_s}s per endpoint, loopback, a fresh server each",
        flush=True,
    )
    results: list[Measured] = []
    for n in range(1, args.rounds + 1):
        for name in names:
            print(f"measuring {name} ({ENDPOINTS[name].path}), round {n} ...", flush=True)
            measured = measure(ENDPOINTS[name], load)
            measured.round = n
            results.append(measured)
    table, found = report(results)
    print()
    print(
        f"machine: {machine['nproc']} CPUs, {machine['cpu']}; Python {machine['python']}; "
        f"{machine['wrk']}"
    )
    print(table)
    summary = {
        "machine": machine,
        "load": {
            "duration_s": load.duration_s,
            "warmup_s": load.warmup_s,
            "connections": load.connections,
        },
        "results": [
            {
                "endpoint": m.endpoint,
                "round": m.round,
                "rps": m.stats.rps,
                "p50_ms": m.stats.p50_ms,
                "p99_ms": m.stats.p99_ms,
                "non_2xx": m.stats.non_2xx,
                "server_us_per_request": m.server_us,
                "machine_us_per_request": m.machine_us,
            }
            for m in results
        ],
        "ratios": found,
        "ratios_per_cpu_second": ratios(results, cpu=True),
        "targets": {
            "gmail : wake": TARGET_RATIO,
            "rules-1000 : rules-1": RULES_TARGET,
            "mapped-js : mapped-wake": TARGET_JS_RATIO,
        },
    }
    print("BENCH_JSON " + json.dumps(summary, separators=(",", ":")))
    bad = any(m.stats.non_2xx or m.warmup.non_2xx for m in results)
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    try:
        return run(args)
    except BenchError as e:
        print(f"bench: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
