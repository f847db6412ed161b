"""Per-route limits benchmark: does a flood on one limited route slow another route?

Run from the repository root:

    .venv/bin/python bench/limits.py [--duration 10] [--warmup 2] [--flood-connections 32]
                                     [--flood-delay-ms N] [--store URL | --pg] [--rounds N]

One hookwise (default durable SQLite store, or PostgreSQL with `--pg`: a fresh database on
127.0.0.1:5432, dropped afterwards) with four mappings: `ping` (the route measured, no limit),
`flood-rate` (`rateLimit: {requests: 30, per: 1m}`), `flood-cap` (`maxInFlight: 4`) and
`flood-free` (no limit: what the limits spare the other routes). Each round measures `ping`'s
latency with `wrk --latency -c2`: unloaded, then during a wrk flood of `--flood-connections`
connections on each flood route in turn (flood and probe start together, the probe 1 s shorter
inside the flood). `--flood-delay-ms N` paces each flood connection (N ms between requests);
0 floods as fast as wrk can. It prints p50 and
p99 of `ping`, the flood's requests/s and share refused (non-2xx), and the ratio of `ping`'s p99
flooded to unloaded against the issue's target (at most 2x), then a line `BENCH_JSON {...}`.

Exit codes: 0 done, 2 could not run (no wrk, hookwise did not start), 130 interrupted. The target
is reported, not enforced by the exit code.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import (
    HOOK_TOKEN,
    PING_MAPPING,
    BenchError,
    EndpointSpec,
    LoadSpec,
    ServerSpec,
    WrkStats,
    _lua_script,
    ensure_wrk,
    machine_info,
    run_wrk,
    running,
    stop_all,
)

TARGET = 2.0
PING = EndpointSpec("ping", "/hooks/ping", {"host": "db-1", "check": "disk", "value": 91})
FLOODS = {
    "rate": EndpointSpec("flood-rate", "/hooks/flood-rate", {"n": 1}),
    "cap": EndpointSpec("flood-cap", "/hooks/flood-cap", {"n": 1}),
    # the same flood on a route without limits: what the limits spare the other routes
    "free": EndpointSpec("flood-free", "/hooks/flood-free", {"n": 1}),
}
HOOKS = {
    "enabled": True,
    "token": HOOK_TOKEN,
    "path": "/hooks",
    "mappings": [
        PING_MAPPING,
        {
            "id": "flood-rate",
            "match": {"path": "flood-rate"},
            "action": "wake",
            "textTemplate": "flood",
            "rateLimit": {"requests": 30, "per": "1m"},
        },
        {
            "id": "flood-cap",
            "match": {"path": "flood-cap"},
            "action": "wake",
            "textTemplate": "flood",
            "maxInFlight": 4,
        },
        {
            "id": "flood-free",
            "match": {"path": "flood-free"},
            "action": "wake",
            "textTemplate": "flood",
        },
    ],
}


def _probe(url: str, seconds: int) -> WrkStats:
    return run_wrk(url, PING, LoadSpec(connections=2, threads=1), seconds)


def _flooded(
    url: str, flood: EndpointSpec, seconds: int, connections: int, delay_ms: int
) -> dict[str, Any]:
    out: dict[str, WrkStats] = {}
    lua = _lua_script(flood)
    if delay_ms:  # each connection waits this long between requests: a bounded flood
        lua += f"function delay()\n  return {delay_ms}\nend\n"

    def flood_run() -> None:
        load = LoadSpec(connections=connections)
        out["flood"] = run_wrk(url, flood, load, seconds + 1, lua=lua)

    thread = threading.Thread(target=flood_run)
    thread.start()
    probe = _probe(url, seconds)
    thread.join()
    f = out["flood"]
    return {
        "p50_ms": probe.p50_ms,
        "p99_ms": probe.p99_ms,
        "probe_non_2xx": probe.non_2xx,
        "flood_rps": f.rps,
        "flood_refused": (f.non_2xx or 0) / f.requests if f.requests else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--flood-connections", type=int, default=32)
    parser.add_argument(
        "--flood-delay-ms",
        type=int,
        default=0,
        help="each flood connection waits this long between requests (0: as fast as it can)",
    )
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--store", default=None, help="a store URL for `hookwise serve --store`")
    parser.add_argument(
        "--pg", action="store_true", help="a fresh database on PostgreSQL at 127.0.0.1:5432"
    )
    args = parser.parse_args()
    try:
        ensure_wrk()
        spec = ServerSpec(
            "limits",
            "hookwise",
            store=args.store,
            fresh_database_on="postgresql://postgres@127.0.0.1:5432/postgres" if args.pg else None,
            config=(("hooks", HOOKS),),
        )
        results: list[dict[str, Any]] = []
        with running(spec) as server:
            _probe(server.url, args.warmup)
            for n in range(args.rounds):
                quiet = _probe(server.url, args.duration)
                row: dict[str, Any] = {
                    "round": n + 1,
                    "unloaded": {"p50_ms": quiet.p50_ms, "p99_ms": quiet.p99_ms},
                }
                for name, flood in FLOODS.items():
                    row[name] = _flooded(
                        server.url,
                        flood,
                        args.duration,
                        args.flood_connections,
                        args.flood_delay_ms,
                    )
                    base = quiet.p99_ms or 0.0
                    got = row[name]["p99_ms"]
                    row[name]["p99_ratio"] = got / base if base and got is not None else None
                results.append(row)
    except BenchError as e:
        print(f"bench/limits.py: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        stop_all()
    store = "postgresql" if (args.pg or (args.store or "").startswith("postgres")) else "sqlite"
    pace = f", {args.flood_delay_ms} ms between requests" if args.flood_delay_ms else ""
    print(
        f"store: {store}; probe: wrk -c2 on /hooks/ping;"
        f" flood: wrk -c{args.flood_connections}{pace}"
    )
    print(
        f"{'round':>5} {'flood':>6} {'p50 ms':>8} {'p99 ms':>8} {'x p99':>6} {'flood/s':>9} "
        f"{'refused':>8} target"
    )
    for row in results:
        u = row["unloaded"]
        print(f"{row['round']:>5} {'none':>6} {u['p50_ms']:>8.2f} {u['p99_ms']:>8.2f}")
        for name in FLOODS:
            r = row[name]
            ratio = r["p99_ratio"]
            ok = "met" if ratio is not None and ratio <= TARGET else "MISSED"
            print(
                f"{row['round']:>5} {name:>6} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} "
                f"{ratio:>6.2f} {r['flood_rps']:>9.0f} {r['flood_refused']:>8.1%} "
                f"{ok} (<= {TARGET}x)"
            )
    print(
        "BENCH_JSON " + json.dumps({"store": store, "machine": machine_info(), "rounds": results})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
