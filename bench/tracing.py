"""Tracing benchmarks (issue 37): what OpenTelemetry traces cost on `/wake`.

Run from the repository root:

    .venv/bin/python bench/tracing.py throughput [--rounds 2] [--duration 8] [--modes on sink]
    .venv/bin/python bench/tracing.py latency [--requests 1500]
    .venv/bin/python bench/tracing.py profile [--seconds 12] [--modes on dead]

`throughput` measures `/hooks/wake` with wrk (as bench/ingest.py runs it) with tracing off, on
(sampled at 100%, exported over OTLP/HTTP to the tests' receiver, tests/support/otlp.py, which
decodes every batch in this process; the defaults: one span per request, its stages timed on
it), `stages` (the same with `stages: true`: a child span per stage), `sink` (on, exported to
an endpoint that reads each batch and answers without decoding it, nearer a collector on another
machine) and on with a dead collector (nothing listens on its port); `--modes` picks some,
off is always measured. Modes alternate, each on a fresh server and store; it prints requests/s, p50/p99, the server's CPU
time per request and the spans the receiver decoded, then the on/off ratios of the medians.
The receiver runs on the same machine and takes CPU from the server: the "on" figures include
that cost, which a real collector elsewhere would not put on the gateway's machine.

`latency` starts four servers at once (tracing off, on, stages, dead collector) and sends
`--requests` rounds of one `/hooks/wake` to each in turn, sequentially, on one keep-alive
connection each (no queueing in a server: each latency is one request's own cost; interleaved,
so the machine's noise falls on the four alike), and prints p50/p90/p99/max, each server's CPU
time per request (its process tree: the SQLite writer's share of a commit with no neighbour to
group with included, so the base is larger than under `throughput`'s load) and the differences
to off: what a dead collector adds to one hook's p99 (the issue's bound: 1 ms).

`profile` runs wrk against one server per mode while py-spy (not a dependency: `pip install
py-spy`) samples the thread holding the GIL, and prints the share of the server's Python CPU
spent in tracing (the hook path's spans, the encoding, the export's HTTP): within one process
and one run, the steadiest figure a shared machine gives.

Figures measured on a shared 2-core machine are indicative only.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.ingest import (  # noqa: E402
    ADMIN_TOKEN,
    HOOK_TOKEN,
    WAKE,
    LoadSpec,
    Result,
    ServerSpec,
    cpu_seconds,
    ensure_wrk,
    measure,
    run_wrk,
    running,
    settle,
)
from tests.support.otlp import OtlpReceiver  # noqa: E402

#: off; on (the defaults: one span per request, its stages timed on it); stages (`stages: true`:
#: every stage a child span too); sink (on, exported to a receiver that reads and acknowledges
#: without decoding: nearer a collector on another machine); dead collector (nothing listening)
MODES = ("off", "on", "stages", "sink", "dead")


class Sink:
    """An OTLP/HTTP endpoint that reads each batch and answers 200, decoding nothing (the tests'
    receiver decodes every span in Python, CPU a collector elsewhere would not take here)."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        sink = self
        self.bytes = 0

        class Handler(BaseHTTPRequestHandler):
            #: keep-alive, as a collector answers (a new connection per batch costs the
            #: exporter a connect each time)
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                sink.bytes += len(body)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


_SINK: Sink | None = None


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(mode: str, receiver: OtlpReceiver) -> tuple[tuple[str, Any], ...]:
    gateway = ("gateway", {"auth": {"token": ADMIN_TOKEN}, "metrics": {"enabled": True}})
    if mode == "off":
        return (gateway,)
    global _SINK
    if mode == "dead":
        endpoint = f"http://127.0.0.1:{_closed_port()}"
    elif mode == "sink":
        if _SINK is None:
            _SINK = Sink()
        endpoint = _SINK.url
    else:
        endpoint = receiver.url
    traces = {"enabled": True, "endpoint": endpoint, "sampleRatio": 1.0, "stages": mode == "stages"}
    return (gateway, ("telemetry", {"traces": traces}))


def _cpu_us(result: Result) -> float | None:
    if result.server_cpu_pct is None or not result.stats.rps:
        return None
    return result.server_cpu_pct / 100.0 / result.stats.rps * 1e6


def throughput(args: argparse.Namespace) -> int:
    ensure_wrk()
    load = LoadSpec(args.duration, args.warmup, args.connections, args.threads)
    base = ServerSpec("hookwise", "hookwise")
    modes = [m for m in MODES if m in args.modes or m == "off"]
    with ExitStack() as stack:
        if args.before:  # the same modes of the code at that revision, in the same rounds
            from bench.durability import tree_at

            old = stack.enter_context(tree_at(args.before))
            for mode in list(modes):
                modes.append(f"{mode}@before")
                _BEFORE[f"{mode}@before"] = (mode, str(old))
        return _throughput(args, load, base, modes)


#: a `--before` mode: its mode and the folder its code is imported from
_BEFORE: dict[str, tuple[str, str]] = {}


def _throughput(
    args: argparse.Namespace, load: LoadSpec, base: ServerSpec, modes: list[str]
) -> int:
    rows: dict[str, list[tuple[Result, int]]] = {m: [] for m in modes}
    receiver = OtlpReceiver()
    try:
        for i in range(args.rounds):
            for mode in modes:
                print(f"round {i + 1}: tracing {mode} /hooks/wake ...", flush=True)
                before = len(receiver.spans)
                plain, path = _BEFORE.get(mode, (mode, None))
                spec = replace(
                    base,
                    name=f"tracing-{mode}",
                    config=_config(plain, receiver),
                    pythonpath=path,
                )
                result = measure(WAKE, spec, load)
                rows[mode].append((result, len(receiver.spans) - before))
    finally:
        receiver.close()
    print()
    print(
        f"{'tracing':<8} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'srv µs/req':>11}"
        f" {'non-2xx':>8} {'spans received':>15}"
    )
    for mode in modes:
        for r, spans in rows[mode]:
            print(
                f"{mode:<8} {r.stats.rps:>9.0f} {r.stats.p50_ms or 0:>8.2f}"
                f" {r.stats.p99_ms or 0:>8.2f} {_cpu_us(r) or 0:>11.0f} {r.stats.non_2xx:>8}"
                f" {spans:>15}"
            )

    def median(mode: str, of: Any) -> float:
        return statistics.median(v for r, _ in rows[mode] if (v := of(r)) is not None)

    for mode in modes:
        off = "off@before" if mode.endswith("@before") else "off"
        if mode == off:
            continue
        rps = median(mode, lambda r: r.stats.rps) / median(off, lambda r: r.stats.rps)
        cpu = median(mode, _cpu_us) / median(off, _cpu_us)
        print(
            f"tracing {mode} / {off} (medians of {args.rounds}): requests/s x{rps:.3f} "
            f"({(rps - 1) * 100:+.1f}%), server CPU per request x{cpu:.3f} ({(cpu - 1) * 100:+.1f}%)"
        )
    failed = any(r.notes or r.stats.non_2xx for rs in rows.values() for r, _ in rs)
    return 1 if failed else 0


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


#: the modes `latency` compares
LATENCY_MODES = ("off", "on", "stages", "dead")


def latency(args: argparse.Namespace) -> int:
    import httpx

    receiver = OtlpReceiver()
    rows: dict[str, list[float]] = {m: [] for m in LATENCY_MODES}
    headers = {"Authorization": f"Bearer {HOOK_TOKEN}"}
    body = {"text": "bench", "mode": "now"}
    try:
        with ExitStack() as stack:
            clients = {}
            servers = {}
            for mode in LATENCY_MODES:
                print(f"starting the server with tracing {mode} ...", flush=True)
                spec = ServerSpec(f"tracing-{mode}", "hookwise", config=_config(mode, receiver))
                server = stack.enter_context(running(spec))
                servers[mode] = server
                clients[mode] = stack.enter_context(httpx.Client(base_url=server.url, timeout=10))
            settle()
            print(
                f"{args.requests} rounds of one sequential /hooks/wake to each server in turn",
                flush=True,
            )
            cpu: dict[str, float] = {}
            for i in range(args.requests + 50):
                if i == 50:  # the first ones warm the servers up
                    cpu = {m: cpu_seconds(s.proc.pid) for m, s in servers.items()}
                for mode, client in clients.items():
                    t0 = time.perf_counter()
                    r = client.post("/hooks/wake", json=body, headers=headers)
                    elapsed = (time.perf_counter() - t0) * 1000
                    if r.status_code != 200:
                        raise SystemExit(f"/hooks/wake ({mode}) answered {r.status_code}: {r.text}")
                    if i >= 50:
                        rows[mode].append(elapsed)
            cpu_us = {
                m: (cpu_seconds(s.proc.pid) - cpu[m]) / args.requests * 1e6
                for m, s in servers.items()
            }
            dropped = {m: _dropped(c) for m, c in clients.items() if m != "off"}
    finally:
        receiver.close()
    print(
        f"\n{'tracing':<8} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>8}"
        f" {'srv µs/req':>11}"
    )
    for mode, values in rows.items():
        print(
            f"{mode:<8} {statistics.median(values):>8.3f} {_pct(values, 90):>8.3f}"
            f" {_pct(values, 99):>8.3f} {max(values):>8.3f} {cpu_us[mode]:>11.0f}"
        )
    for mode in LATENCY_MODES[1:]:
        p50 = statistics.median(rows[mode]) - statistics.median(rows["off"])
        p99 = _pct(rows[mode], 99) - _pct(rows["off"], 99)
        cost = cpu_us[mode] / cpu_us["off"] - 1
        print(
            f"{mode} - off: p50 {p50:+.3f} ms, p99 {p99:+.3f} ms;"
            f" server CPU per request {cost * 100:+.1f}%"
        )
    print(f"spans dropped and counted (hookwise_trace_spans_dropped_total): {dropped}")
    return 0


def _dropped(client: Any) -> float:
    r = client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in r.text.splitlines()
        if line.startswith("hookwise_trace_spans_dropped_total{")
    )


def _share(raw: Path) -> dict[str, float]:
    """Of py-spy's samples (raw, one stack and a count per line): the share (%) in tracing,
    split into the hook path's spans, the encoding and the export's HTTP."""
    total = 0
    parts = {"spans": 0, "encode": 0, "http": 0}
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        total += n
        if "opentelemetry" not in stack and "server/telemetry/" not in stack:
            continue
        if "encode" in stack:
            parts["encode"] += n
        elif "_OTLPHTTPClient" in stack or "urllib3" in stack:
            parts["http"] += n
        else:
            parts["spans"] += n
    return {k: v / max(1, total) * 100 for k, v in parts.items()}


def profile(args: argparse.Namespace) -> int:
    """`/wake` under wrk on one server per mode while py-spy samples the thread holding the GIL
    (the server's Python CPU): the share of it spent in tracing, and what that adds to the rest."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        raise SystemExit("py-spy is not installed (.venv/bin/python -m pip install py-spy)")
    ensure_wrk()
    receiver = OtlpReceiver()
    load = LoadSpec(args.seconds + 6, 0, args.connections, args.threads)
    try:
        for mode in args.modes:
            spec = ServerSpec(f"tracing-{mode}", "hookwise", config=_config(mode, receiver))
            settle()
            with running(spec) as server, tempfile.TemporaryDirectory() as tmp:
                raw = Path(tmp) / "samples.txt"
                load_thread = threading.Thread(
                    target=run_wrk, args=(server.url, WAKE, load, load.duration_s)
                )
                load_thread.start()
                time.sleep(3)
                command = [spy, "record", "-p", str(server.proc.pid), "-d", str(args.seconds)]
                command += ["-r", "200", "-f", "raw", "-o", str(raw), "--nonblocking", "--gil"]
                subprocess.run(command, capture_output=True, check=True)
                load_thread.join()
                share = _share(raw)
            traced = sum(share.values())
            print(
                f"tracing {mode}: {traced:.1f}% of the server's Python CPU in tracing"
                f" (+{traced / (100 - traced) * 100:.1f}% over the rest): spans on the hook path"
                f" {share['spans']:.1f}%, encoding {share['encode']:.1f}%,"
                f" export HTTP {share['http']:.1f}%",
                flush=True,
            )
    finally:
        receiver.close()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    t = sub.add_parser("throughput")
    t.add_argument("--rounds", type=int, default=2)
    t.add_argument("--duration", type=int, default=8)
    t.add_argument("--before", metavar="REV", help="also measure each mode at this git revision")
    t.add_argument("--warmup", type=int, default=2)
    t.add_argument("--connections", type=int, default=32)
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    lat = sub.add_parser("latency")
    lat.add_argument("--requests", type=int, default=1500)
    prof = sub.add_parser("profile")
    prof.add_argument("--seconds", type=int, default=12)
    prof.add_argument("--connections", type=int, default=32)
    prof.add_argument("--threads", type=int, default=2)
    prof.add_argument("--modes", nargs="+", default=["on", "dead"], choices=MODES)
    args = parser.parse_args()
    if args.what == "profile":
        return profile(args)
    return throughput(args) if args.what == "throughput" else latency(args)


if __name__ == "__main__":
    sys.exit(main())
