"""The admin API on a large store: every query's plan checked and its latency measured.

    .venv/bin/python bench/admin.py                          # both stores, 5M events, 1M runs
    .venv/bin/python bench/admin.py --store sqlite --events 500000 --runs 100000   # quicker
    .venv/bin/python bench/admin.py --wake 10                # also /wake: empty vs filled store

For each store: a fresh store is migrated and filled (bench/admin_fill.py: events, runs,
deliveries, request log, transcript turns, heartbeats), then

1. **plans** (the proof, independent of machine load): the statement behind each admin query is
   explained; a listing must walk an index (no `USE TEMP B-TREE` on SQLite, no `Sort`,
   `Seq Scan` or bitmap scan on PostgreSQL). A failed check is printed as FAIL and the exit code
   is 1;
2. **latency** (indicative on a busy machine): a hookwise server on the filled store answers each
   query `--reps` times over one keep-alive connection; first call, p50 and p99 in ms against
   the 50 ms p99 target;
3. with `--wake S`: `/wake` requests/s with wrk for S seconds on an empty store and on the filled
   one (bench/ingest.py's measurement), and their ratio (target >= 0.90).

Last line: `BENCH_JSON {...}`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402

from bench import admin_fill  # noqa: E402
from bench.ingest import (  # noqa: E402
    ADMIN_TOKEN,
    WAKE,
    LoadSpec,
    ServerSpec,
    measure,
    running,
    stop_all,
)
from bench.pgstore import DEFAULT_PG_URL, drop_leftovers, fresh_database  # noqa: E402
from hookwise.server.store.listing import (  # noqa: E402
    LISTINGS,
    POSTGRES_WALK,
    Filters,
    listing_query,
    postgres_placeholder,
    sessions_query,
    sqlite_placeholder,
)

TARGET_P99_MS = 50.0
WAKE_TARGET = 0.90
DAY = 86400.0


def iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def queries(now: float) -> list[tuple[str, str, str, Filters | None, dict[str, Any]]]:
    """(label, HTTP path, listing, filters, listing kwargs): what the console asks for."""
    mid = now - 15 * DAY
    hour = f"since={iso(mid)}&until={iso(mid + 3600)}"
    f = Filters
    return [
        ("events main", "/api/events?session=main&limit=50", "events", f({"session": "main"}), {}),
        (
            "events other session",
            "/api/events?session=agent:ops&limit=50",
            "events",
            f({"session": "agent:ops"}),
            {},
        ),
        ("events all", "/api/events?limit=50", "events", f(), {}),
        (
            "events one hour ago-15d",
            f"/api/events?{hour}&limit=50",
            "events",
            f(since=mid, until=mid + 3600),
            {},
        ),
        (
            "events since 1 day",
            f"/api/events?session=main&since={iso(now - DAY)}",
            "events",
            f({"session": "main"}, since=now - DAY),
            {},
        ),
        ("runs", "/api/runs?limit=50", "runs", f(), {}),
        ("runs failed", "/api/runs?state=failed&limit=50", "runs", f({"state": "failed"}), {}),
        (
            "runs queued (none)",
            "/api/runs?state=queued&limit=50",
            "runs",
            f({"state": "queued"}),
            {},
        ),
        ("runs rule", "/api/runs?rule=r3&limit=50", "runs", f({"rule_id": "r3"}), {}),
        (
            "runs session",
            "/api/runs?session=hook:deploy:7",
            "runs",
            f({"session_key": "hook:deploy:7"}),
            {},
        ),
        ("runs channel", "/api/runs?channel=slack", "runs", f({"channel": "slack"}), {}),
        (
            "runs failed+rule",
            "/api/runs?state=failed&rule=r1",
            "runs",
            f({"state": "failed", "rule_id": "r1"}),
            {},
        ),
        (
            "runs failed in an hour",
            f"/api/runs?state=failed&{hour}",
            "runs",
            f({"state": "failed"}, since=mid, until=mid + 3600),
            {},
        ),
        (
            "deliveries failed",
            "/api/deliveries?state=failed",
            "deliveries",
            f({"state": "failed"}),
            {},
        ),
        (
            "deliveries channel",
            "/api/deliveries?channel=signal",
            "deliveries",
            f({"channel": "signal"}),
            {},
        ),
        (
            "deliveries of a run",
            "/api/deliveries?runId=run-400",
            "deliveries",
            f({"run_id": "run-400"}),
            {},
        ),
        ("requests", "/api/requests?limit=50", "requests", f(), {}),
        ("requests 404", "/api/requests?status=404", "requests", f({"status": 404}), {}),
        (
            "requests rule+day",
            f"/api/requests?rule=r5&since={iso(now - DAY)}",
            "requests",
            f({"rule_id": "r5"}, since=now - DAY),
            {},
        ),
        ("heartbeats", "/api/heartbeats", "heartbeats", f(), {}),
        (
            "heartbeats failed",
            "/api/heartbeats?state=failed",
            "heartbeats",
            f({"state": "failed"}),
            {},
        ),
        (
            "session transcript",
            "/api/sessions/hook:deploy:3",
            "turns",
            f({"session_key": "hook:deploy:3"}),
            {},
        ),
        ("sessions", "/api/sessions", "sessions", None, {}),
        ("sessions page 2", "/api/sessions?cursor=hook:5", "sessions", None, {"cursor": "hook:5"}),
    ]


# --- plans ---------------------------------------------------------------------------------------


def statement(
    name: str, filters: Filters | None, extra: dict[str, Any], placeholder: Callable[[int], str]
) -> tuple[str, list[Any]]:
    if name == "sessions":
        return sessions_query(cursor=extra.get("cursor"), limit=50, placeholder=placeholder)
    return listing_query(
        LISTINGS[name][0], filters or Filters(), cursor=None, limit=50, placeholder=placeholder
    )


DB_REPS = 20


def sqlite_plan(
    conn: sqlite3.Connection, sql: str, args: list[Any]
) -> tuple[list[str], bool, float]:
    """The plan, whether it walks an index, and the query's median time in the database (ms)."""
    rows = conn.execute(f"EXPLAIN QUERY PLAN {sql}", args).fetchall()
    lines = [r[3] for r in rows]
    times = []
    for _ in range(DB_REPS):
        t0 = time.perf_counter()
        conn.execute(sql, args).fetchall()
        times.append((time.perf_counter() - t0) * 1000)
    return lines, not any("TEMP B-TREE" in line for line in lines), statistics.median(times)


def _pg_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _pg_nodes(child)


BAD_PG_NODES = ("Sort", "Seq Scan", "Bitmap Heap Scan", "Incremental Sort")


async def postgres_plan(conn: Any, sql: str, args: list[Any]) -> tuple[list[str], bool, float]:
    """The plan the server uses for the statement with these values, whether it walks an
    index, and the median execution time the server reports (EXPLAIN ANALYZE, ms)."""
    times = []
    for _ in range(DB_REPS):
        async with conn.transaction(readonly=True):
            await conn.execute(POSTGRES_WALK)  # as the store runs listings
            stmt = await conn.prepare(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")
            [doc] = json.loads(await stmt.fetchval(*args))
        times.append(doc["Execution Time"])
    nodes = list(_pg_nodes(doc["Plan"]))
    lines = [
        n["Node Type"]
        + (f" using {n['Index Name']}" if "Index Name" in n else "")
        + (f" on {n['Relation Name']}" if "Relation Name" in n else "")
        for n in nodes
    ]
    ok = not any(n["Node Type"] in BAD_PG_NODES for n in nodes)
    return lines, ok, statistics.median(times)


# --- latency -------------------------------------------------------------------------------------


#: pages of the web console (the same token as a bearer header); the overview's charts count a
#: day of requests and runs, which each process caches for 10 s: its first call shows that cost
CONSOLE_PAGES = [
    ("console overview", "/ui/"),
    ("console runs", "/ui/runs"),
    ("console runs failed", "/ui/runs?state=failed&rule=r1"),
    ("console requests", "/ui/requests?status=404"),
    ("console deliveries", "/ui/deliveries?state=failed"),
    ("console sessions", "/ui/sessions"),
    ("console session", "/ui/sessions/hook:deploy:3"),
]


def latencies(url: str, path: str, reps: int) -> dict[str, float]:
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    times = []
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        for _ in range(reps + 1):
            t0 = time.perf_counter()
            r = client.get(path)
            times.append((time.perf_counter() - t0) * 1000)
            if r.status_code != 200:
                raise RuntimeError(f"{path}: {r.status_code} {r.text[:200]}")
    first, rest = times[0], sorted(times[1:])
    p99 = rest[min(len(rest) - 1, int(len(rest) * 0.99))]
    return {"first_ms": first, "p50_ms": statistics.median(rest), "p99_ms": p99}


# --- one store -----------------------------------------------------------------------------------


@contextmanager
def filled_store(kind: str, counts: dict[str, int], pg_url: str) -> Iterator[str]:
    """A migrated store filled with `counts` rows; yields its URL."""
    with ExitStack() as stack:
        if kind == "postgresql":
            url = stack.enter_context(fresh_database(pg_url))
            from hookwise.server.store.postgres import PostgresStore

            async def setup() -> None:
                store = PostgresStore(url)
                await store.open()
                await store.close()
                import asyncpg

                conn = await asyncpg.connect(url)
                try:
                    for table, total in counts.items():
                        t0 = time.monotonic()
                        start = time.time() - admin_fill.DAYS * DAY
                        for lo in range(0, total, admin_fill.BATCH):
                            await conn.execute(
                                admin_fill.postgres_statement(
                                    table, lo, min(total, lo + admin_fill.BATCH), total, start
                                )
                            )
                        print(f"  {table}: {total:,} rows in {time.monotonic() - t0:.1f} s")
                    await conn.execute("VACUUM ANALYZE")
                finally:
                    await conn.close()

            asyncio.run(setup())
            yield url
        else:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hookwise-admin-")))
            path = tmp / "hookwise.db"
            from hookwise.server.store.sqlite import SQLiteStore

            async def migrate() -> None:
                store = SQLiteStore(path)
                await store.open()
                await store.close()

            asyncio.run(migrate())
            conn = sqlite3.connect(path, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")

            def execute(sql: str) -> None:
                conn.execute("BEGIN")
                conn.execute(sql)
                conn.execute("COMMIT")

            admin_fill.fill(execute, admin_fill.sqlite_statement, counts)
            conn.execute("ANALYZE")
            conn.close()
            yield f"sqlite:///{path}"


def check_plans(kind: str, url: str, now: float) -> list[dict[str, Any]]:
    out = []
    if kind == "postgresql":
        import asyncpg

        async def run() -> None:
            conn = await asyncpg.connect(url)
            try:
                for label, _, name, filters, extra in queries(now):
                    sql, args = statement(name, filters, extra, postgres_placeholder)
                    lines, ok, ms = await postgres_plan(conn, sql, args)
                    out.append({"query": label, "ok": ok, "plan": lines, "db_ms": ms})
            finally:
                await conn.close()

        asyncio.run(run())
    else:
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            for label, _, name, filters, extra in queries(now):
                sql, args = statement(name, filters, extra, sqlite_placeholder)
                lines, ok, ms = sqlite_plan(conn, sql, args)
                out.append({"query": label, "ok": ok, "plan": lines, "db_ms": ms})
        finally:
            conn.close()
    return out


def bench_store(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    counts = admin_fill.plan(args.events, args.runs)
    print(f"\n== {kind}: filling {', '.join(f'{k} {v:,}' for k, v in counts.items())}")
    result: dict[str, Any] = {"store": kind, "rows": counts}
    with filled_store(kind, counts, args.pg_url) as url:
        now = time.time()
        plans = check_plans(kind, url, now)
        result["plans"] = plans
        print(f"\n{kind}: query plans, and the median time in the database ({DB_REPS} runs)")
        for p in plans:
            verdict = "ok  " if p["ok"] else "FAIL"
            print(f"  {verdict} {p['query']:<28} {p['db_ms']:7.2f} ms  {' | '.join(p['plan'])}")
        timings = []
        with running(ServerSpec(f"{kind}-filled", "hookwise", store=url)) as server:
            pages = [(label, path) for label, path, *_ in queries(now)] + CONSOLE_PAGES
            for label, path in pages:
                timings.append(
                    {"query": label, "path": path, **latencies(server.url, path, args.reps)}
                )
        result["latency"] = timings
        print(f"\n{kind}: latency over HTTP ({args.reps} calls each; busy machine: indicative)")
        print(f"  {'query':<28} {'first':>8} {'p50':>8} {'p99':>8}")
        for t in timings:
            flag = "" if t["p99_ms"] <= TARGET_P99_MS else f"  > {TARGET_P99_MS:g} ms"
            print(
                f"  {t['query']:<28} {t['first_ms']:8.1f} {t['p50_ms']:8.1f} {t['p99_ms']:8.1f}{flag}"
            )
        if args.wake:
            load = LoadSpec(duration_s=args.wake, warmup_s=2)
            filled = measure(WAKE, ServerSpec(f"{kind}-filled", "hookwise", store=url), load)
            empty_spec = (
                ServerSpec(f"{kind}-empty", "hookwise", fresh_database_on=args.pg_url)
                if kind == "postgresql"
                else ServerSpec(f"{kind}-empty", "hookwise")
            )
            empty = measure(WAKE, empty_spec, load)
            ratio = filled.stats.rps / empty.stats.rps if empty.stats.rps else None
            result["wake"] = {
                "empty_rps": empty.stats.rps,
                "filled_rps": filled.stats.rps,
                "ratio": ratio,
                "filled_p99_ms": filled.stats.p99_ms,
                "empty_p99_ms": empty.stats.p99_ms,
            }
            print(
                f"\n{kind}: /wake {empty.stats.rps:,.0f} req/s empty, {filled.stats.rps:,.0f}"
                f" filled: ratio {ratio:.2f} (target >= {WAKE_TARGET:.2f});"
                f" p99 {empty.stats.p99_ms} ms vs {filled.stats.p99_ms} ms"
            )
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--events", type=int, default=5_000_000)
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--wake", type=int, default=0, metavar="SECONDS")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args()
    kinds = ["sqlite", "postgresql"] if args.store == "both" else [args.store]
    results = []
    try:
        for kind in kinds:
            results.append(bench_store(kind, args))
    finally:
        stop_all()
        for line in drop_leftovers():
            print(line)
    failed = [p["query"] for r in results for p in r["plans"] if not p["ok"]]
    print(f"\nplans: {'all walk an index' if not failed else 'FAIL: ' + ', '.join(failed)}")
    print("BENCH_JSON " + json.dumps({"admin": results}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
