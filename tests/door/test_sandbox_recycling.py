"""Sandbox workers are recycled (issue 26): a worker that has taken its share of calls is
replaced by a fresh one, and no request fails during the swap."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from pathlib import Path

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.processes import sandbox_workers
from tests.support.wait import eventually

TRANSFORM = """
export default function ({ payload, action }) {
  return { text: action.text + " #" + payload.i };
}
"""
RECYCLE_CALLS = 40
REQUESTS = 400


def _sandbox(gw: GatewayProcess) -> set[int]:
    assert gw.proc is not None
    return sandbox_workers(gw.proc.pid)


def test_a_worker_is_replaced_after_its_calls_and_no_request_fails(
    tmp_path: Path, start_gateway: Callable[..., GatewayProcess]
) -> None:
    tdir = tmp_path / "gw" / "hooks" / "transforms"  # inside <config dir>/hooks/transforms
    tdir.mkdir(parents=True)
    (tdir / "tag.js").write_text(TRANSFORM, encoding="utf-8")
    config = {
        "hooks": {
            "enabled": True,
            "token": HOOK_TOKEN,
            "transformLimits": {"workers": 2, "workerRecycleCalls": RECYCLE_CALLS},
            "mappings": [
                {
                    "id": "tag",
                    "match": {"path": "tag"},
                    "action": "wake",
                    "wakeMode": "next-heartbeat",
                    "textTemplate": "tagged",
                    "transform": {"module": "tag.js"},
                }
            ],
        },
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
    }
    gw = start_gateway(config, extra_args=["--log-level", "info"], workdir=tmp_path / "gw")
    first = _sandbox(gw)
    assert len(first) == 2
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(gw.hook, "tag", {"i": i}) for i in range(REQUESTS)]
        statuses = [f.result().status_code for f in futures]
    assert statuses == [200] * REQUESTS
    # every event has the transform's text: each request ran in some worker, none failed
    texts = {e["text"] for e in gw.admin("/api/events", limit=500)["items"]}
    assert texts == {f"tagged #{i}" for i in range(REQUESTS)}
    recycled = eventually(
        lambda: gw.stderr().count("recycled after") >= 2 and gw.stderr(),
        what="workers recycled",
    )
    assert "died" not in recycled and "killed" not in recycled
    # the pool holds two workers again, none of them the first ones
    now = eventually(lambda: len(s := _sandbox(gw)) == 2 and s, what="two workers")
    assert not now & first
