"""Durability benchmark (issue 39): durable `/hooks/wake` side by side with the no-durability floor.

Run from the repository root:

    .venv/bin/python bench/durability.py [--rounds 3] [--duration 8] [--warmup 2]
                                         [--before REV] [--normal] [--openclaw DIR]
                                         [--connections 32]

Each round measures, in turn and each on a fresh server (after the machine settles, see
`ingest.settle`):

- `floor`: `bench/floor_app.py`, a raw ASGI `/hooks/wake` of the same shape that keeps events in
  memory (token, body, JSON, validation, an event id, a 200), served as hookwise serves;
- `durable`: hookwise's `/hooks/wake` on a fresh SQLite store, `store.synchronous: full` (the
  default: an acknowledged request survives a power cut);
- with `--normal`: the same with `store.synchronous: normal` (survives `kill -9`, not a power cut);
- with `--before REV`: hookwise at git revision `REV` (exported to a temporary folder and imported
  from there), `synchronous: full`: the code before a change, measured in the same rounds;
- with `--openclaw DIR`: first in each round, the best-known peer's in-memory `/hooks/wake`
  (OpenClaw's gateway installed with npm in `DIR`, see `bench/openclaw.py` and bench/README.md),
  the same wrk load and body after a longer warm-up (`--openclaw-warmup`, 10 s: V8 compiles its
  hot path in the first seconds of load): the issue's target is durable `/wake` at 2x it in
  every round.

It prints each run (requests/s, p50, p99, server CPU per request, ratio to the round's floor and
to the round's OpenClaw), the ranges over the rounds, and a last line `BENCH_JSON {...}`. Every
2xx is checked against the stored rows (accepted means persisted), as `bench/ingest.py` does.

Exit codes: 0 done, 1 done but a run refused requests or lost rows, 2 could not run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench import openclaw  # noqa: E402
from bench.ingest import (  # noqa: E402
    WAKE,
    BenchError,
    LoadSpec,
    Result,
    ServerSpec,
    ensure_wrk,
    machine_info,
    measure,
    server_us_per_request,
    stop_all,
)

#: the issue's target: durable `/wake` at least this share of the no-durability floor
FLOOR_SHARE = 0.6
#: the issue's target: durable `/wake` at least this multiple of OpenClaw's in-memory wake
OPENCLAW_MULTIPLE = 2.0
#: the top-level folders installed under the `hookwise` namespace (see `setup.py`)
ROOTS = ("plumbing", "engine", "server", "rules", "schemas", "transforms")


@contextmanager
def tree_at(rev: str) -> Iterator[Path]:
    """A folder to put on PYTHONPATH so that `hookwise` imports as it was at git revision `rev`
    (the repository's `hookwise/` with its top-level folders beside it, as `setup.py` maps
    them). Removed on exit."""
    tmp = Path(tempfile.mkdtemp(prefix="hookwise-bench-before-"))
    try:
        src = tmp / "src"
        src.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", rev], capture_output=True, check=False
        )
        if archive.returncode != 0:
            raise BenchError(f"git archive {rev}: {archive.stderr.decode(errors='replace')}")
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
        pkg = tmp / "pkg" / "hookwise"
        shutil.copytree(src / "hookwise", pkg)
        for root in ROOTS:
            (pkg / root).symlink_to(src / root, target_is_directory=True)
        yield tmp / "pkg"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def specs(args: argparse.Namespace, before: Path | None) -> list[ServerSpec]:
    found = []
    if args.openclaw is not None:
        found.append(
            ServerSpec(
                "openclaw",
                "openclaw",
                install_dir=str(args.openclaw),
                warmup_s=max(args.warmup, args.openclaw_warmup),
            )
        )
    found += [
        ServerSpec("floor", "floor"),
        ServerSpec("durable", "hookwise", config=(("store", {"synchronous": "full"}),)),
    ]
    if before is not None:
        found.append(
            ServerSpec(
                f"before:{args.before}",
                "hookwise",
                config=(("store", {"synchronous": "full"}),),
                pythonpath=str(before),
            )
        )
    if args.normal:
        found.append(
            ServerSpec("normal", "hookwise", config=(("store", {"synchronous": "normal"}),))
        )
    return found


def _row(result: Result, floor: Result | None, peer: Result | None) -> dict[str, Any]:
    ratio = result.stats.rps / floor.stats.rps if floor and floor.stats.rps else None
    vs_peer = peer.stats.rps if peer and peer.stats.rps else None
    return {
        "round": result.round,
        "server": result.server,
        "rps": round(result.stats.rps, 1),
        "p50_ms": result.stats.p50_ms,
        "p99_ms": result.stats.p99_ms,
        "server_us": _round(server_us_per_request(result)),
        "vs_floor": _round(ratio, 3),
        "vs_openclaw": _round(result.stats.rps / vs_peer, 3) if vs_peer else None,
        "notes": result.notes,
    }


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def render(rows: list[dict[str, Any]]) -> str:
    lines = [
        f"{'round':>5} {'server':<22} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'srv µs':>7} {'vs floor':>9} {'vs openclaw':>12}"
    ]
    for r in rows:
        lines.append(
            f"{r['round']:>5} {r['server']:<22} {r['rps']:>9.0f} {_ms(r['p50_ms']):>8} "
            f"{_ms(r['p99_ms']):>8} {_num(r['server_us']):>7} {_num(r['vs_floor'], 2):>9} "
            f"{_num(r['vs_openclaw'], 2):>12}"
            + (f"  ! {'; '.join(r['notes'])}" if r["notes"] else "")
        )
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per server: the ranges of requests/s, p99 and ratio to the floor over the rounds."""
    out: dict[str, Any] = {}
    for name in dict.fromkeys(r["server"] for r in rows):
        mine = [r for r in rows if r["server"] == name]
        ratios = [r["vs_floor"] for r in mine if r["vs_floor"] is not None]
        peer = [r["vs_openclaw"] for r in mine if r["vs_openclaw"] is not None]
        out[name] = {
            "rps": [min(r["rps"] for r in mine), max(r["rps"] for r in mine)],
            "p99_ms": [min(r["p99_ms"] or 0 for r in mine), max(r["p99_ms"] or 0 for r in mine)],
            "server_us": _span([r["server_us"] for r in mine]),
            "vs_floor": [min(ratios), max(ratios)] if ratios else None,
            "rounds_meeting_floor_share": sum(1 for x in ratios if x >= FLOOR_SHARE),
            "vs_openclaw": [min(peer), max(peer)] if peer else None,
            "rounds_meeting_openclaw_multiple": sum(1 for x in peer if x >= OPENCLAW_MULTIPLE),
        }
    return out


def _span(values: list[float | None]) -> list[float] | None:
    known = [v for v in values if v is not None]
    return [min(known), max(known)] if known else None


def run(args: argparse.Namespace) -> int:
    ensure_wrk()
    if args.openclaw is not None:
        try:
            openclaw.programs(args.openclaw)
        except openclaw.OpenClawMissing as e:
            raise BenchError(str(e)) from e
    load = LoadSpec(args.duration, args.warmup, args.connections, args.threads)
    with _before(args.before) as before:
        plan = specs(args, before)
        print(
            f"load: wrk -t{load.threads} -c{load.connections}, {load.warmup_s}s warm-up + "
            f"{load.duration_s}s per run, loopback; {args.rounds} rounds of "
            + ", ".join(s.name for s in plan)
            + (f" (OpenClaw warmed up {plan[0].warmup_s}s)" if args.openclaw else ""),
            flush=True,
        )
        rows: list[dict[str, Any]] = []
        for n in range(1, args.rounds + 1):
            results: list[Result] = []
            for spec in plan:
                print(f"measuring {spec.name} /hooks/wake (round {n}) ...", flush=True)
                result = measure(WAKE, spec, load)
                result.round = n
                results.append(result)
            floor = next((r for r in results if r.server == "floor"), None)
            peer = next((r for r in results if r.server == "openclaw"), None)
            rows += [_row(r, floor, peer if r.server != "openclaw" else None) for r in results]
    machine = machine_info()
    if args.openclaw is not None:
        machine["openclaw"] = openclaw.installed_version(args.openclaw)
    print()
    print(
        f"machine: {machine['nproc']} CPUs, {machine['cpu']}; Python {machine['python']}; "
        f"{machine['wrk']}; Linux {machine['kernel']}"
    )
    print(render(rows))
    totals = summary(rows)
    for name, s in totals.items():
        if name in ("floor", "openclaw"):
            continue
        ratio, peer = s["vs_floor"], s["vs_openclaw"]
        print(
            f"{name}: {s['rps'][0]:.0f}-{s['rps'][1]:.0f} req/s, p99 {s['p99_ms'][0]:.1f}-"
            f"{s['p99_ms'][1]:.1f} ms, "
            + (f"{ratio[0]:.2f}-{ratio[1]:.2f} of the floor" if ratio else "no floor")
            + f" (target >= {FLOOR_SHARE}: met in {s['rounds_meeting_floor_share']} of "
            f"{args.rounds} rounds)"
            + (
                f"; {peer[0]:.2f}-{peer[1]:.2f}x OpenClaw (target >= {OPENCLAW_MULTIPLE}x: met "
                f"in {s['rounds_meeting_openclaw_multiple']} of {args.rounds} rounds)"
                if peer
                else ""
            )
        )
    print(
        "BENCH_JSON "
        + json.dumps({"machine": machine, "runs": rows, "summary": totals}, separators=(",", ":"))
    )
    return 1 if any(r["notes"] for r in rows) else 0


@contextmanager
def _before(rev: str | None) -> Iterator[Path | None]:
    if rev is None:
        yield None
        return
    with tree_at(rev) as path:
        yield path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    p.add_argument("--duration", type=int, default=8, help="measured seconds per run")
    p.add_argument("--warmup", type=int, default=2, help="warm-up seconds per run")
    p.add_argument("--connections", type=int, default=32, help="wrk connections")
    p.add_argument("--threads", type=int, default=2, help="wrk threads")
    p.add_argument("--before", metavar="REV", help="also measure hookwise at this git revision")
    p.add_argument("--normal", action="store_true", help="also measure `store.synchronous: normal`")
    p.add_argument(
        "--openclaw",
        metavar="DIR",
        type=Path,
        help="also measure OpenClaw's /hooks/wake, installed with npm in DIR (bench/README.md)",
    )
    p.add_argument(
        "--openclaw-warmup",
        type=int,
        default=10,
        metavar="S",
        help="OpenClaw's warm-up in seconds (V8 compiles its hot path in the first seconds of "
        "load; default 10)",
    )
    return p.parse_args(argv)


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
    finally:
        stop_all()


if __name__ == "__main__":
    sys.exit(main())
