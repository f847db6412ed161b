"""What the audit log costs an operator action: the latency of audited admin requests beside an
unaudited one, on a real gateway (indicative only on a busy machine).

    .venv/bin/python bench/audit.py                  # SQLite, 300 requests of each kind
    .venv/bin/python bench/audit.py --postgres --reps 300   # on a fresh PostgreSQL database

Kinds: `GET /api/agents` (a read: not audited, no store access: the floor of an admin request),
`POST /api/reload` with a `read` token (refused by the guard: the answer is one audit insert,
committed before the last byte is sent), `POST /api/pause` + `/api/resume` by an `operate` token
(the action's own writes plus one audit insert each). p50 and p99 in ms per kind, and the audit
entries counted afterwards. Last line: `BENCH_JSON {...}`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.gateway import HOOK_TOKEN, GatewayProcess  # noqa: E402
from tests.support.postgres import fresh_database  # noqa: E402

READ = "bench-read-token-0123456789abcdef"
OPERATE = "bench-operate-token-0123456789abcdef"
ADMIN = "bench-admin-token-0123456789abcdef"


def _config() -> dict[str, Any]:
    return {
        "hooks": {
            "enabled": True,
            "token": HOOK_TOKEN,
            "mappings": [
                {"id": "m", "match": {"path": "m"}, "action": "wake", "textTemplate": "x"}
            ],
        },
        "gateway": {
            "auth": {
                "token": ADMIN,
                "tokens": [
                    {"name": "reader", "token": READ, "scopes": ["read"]},
                    {"name": "operator", "token": OPERATE, "scopes": ["operate"]},
                ],
            }
        },
        "agents": {"defaults": {"heartbeat": {"every": 0}}},
    }


def _times(call: Any, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        call()
        out.append((time.perf_counter() - t) * 1000)
    return out


def _summary(ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    return {"p50": round(statistics.median(ms), 2), "p99": round(ms[int(len(ms) * 0.99) - 1], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="a fresh database on 127.0.0.1:5432 (default: SQLite)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        extra = ["--store", stack.enter_context(fresh_database())] if args.postgres else []
        gw = GatewayProcess(_config(), Path(tmp), extra_args=extra).start(timeout=60)
        try:
            c = gw.client
            assert c is not None
            read = {"Authorization": f"Bearer {READ}"}
            operate = {"Authorization": f"Bearer {OPERATE}"}
            target = {"kind": "mapping", "name": "m"}

            def pause_resume() -> None:
                assert c.post("/api/pause", json=target, headers=operate).status_code == 200
                assert c.post("/api/resume", json=target, headers=operate).status_code == 200

            for _ in range(20):  # warm up
                c.get("/api/agents", headers=read)
            results = {
                "read (not audited)": _summary(
                    _times(lambda: c.get("/api/agents", headers=read), args.reps)
                ),
                "refused (1 audit insert)": _summary(
                    _times(lambda: c.post("/api/reload", headers=read), args.reps)
                ),
                "pause+resume (2 actions, 2 inserts)": _summary(
                    _times(pause_resume, args.reps // 2)
                ),
            }
            entries = len(list(_all(c, {"Authorization": f"Bearer {ADMIN}"})))
        finally:
            gw.stop()
    store = "postgres" if args.postgres else "sqlite"
    print(f"store: {store}; {args.reps} requests of each kind (indicative: a shared, busy machine)")
    for kind, figures in results.items():
        print(f"  {kind:40s} p50 {figures['p50']:7.2f} ms   p99 {figures['p99']:7.2f} ms")
    print(f"  audit entries recorded: {entries}")
    print("BENCH_JSON " + json.dumps({"store": store, "results": results, "entries": entries}))


def _all(c: Any, headers: dict[str, str]) -> Any:
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 500}
        if cursor:
            params["cursor"] = cursor
        page = c.get("/api/audit", params=params, headers=headers).json()
        yield from page["items"]
        cursor = page["nextCursor"]
        if not cursor:
            return


if __name__ == "__main__":
    main()
