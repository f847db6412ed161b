"""Accepted means persisted: SIGKILL right after acknowledgements loses nothing."""

from __future__ import annotations

import threading

import httpx

from tests.support.gateway import HOOK_TOKEN


def test_every_acknowledged_request_survives_sigkill(start_gateway) -> None:
    gw = start_gateway()
    acked_events: set[str] = set()
    acked_runs: set[str] = set()
    lock = threading.Lock()
    stop = threading.Event()
    enough = threading.Event()

    def client(n: int) -> None:
        with httpx.Client(base_url=gw.url, timeout=5) as c:
            i = 0
            while not stop.is_set() and i < 2000:
                i += 1
                kind = "wake" if (i + n) % 2 else "agent"
                body = {"text": f"e{n}-{i}"} if kind == "wake" else {"message": f"m{n}-{i}"}
                try:
                    r = c.post(
                        f"/hooks/{kind}",
                        json=body,
                        headers={"Authorization": f"Bearer {HOOK_TOKEN}"},
                    )
                except httpx.HTTPError:
                    return
                if r.status_code in (200, 202):
                    with lock:
                        if kind == "wake":
                            acked_events.add(r.json()["eventId"])
                        else:
                            acked_runs.add(r.json()["runId"])
                        if len(acked_events) + len(acked_runs) >= 300:
                            enough.set()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    assert enough.wait(30), "the gateway did not acknowledge 300 requests in 30 s"
    gw.kill()  # mid-stream: requests are in flight
    stop.set()
    for t in threads:
        t.join()

    gw.start()
    events = {e["eventId"] for e in gw.admin("/api/events", limit=500)["items"]}
    cursor = None
    while True:
        page = gw.admin("/api/events", limit=500, **({"cursor": cursor} if cursor else {}))
        events |= {e["eventId"] for e in page["items"]}
        cursor = page["nextCursor"]
        if not cursor:
            break
    runs: set[str] = set()
    cursor = None
    while True:
        page = gw.admin("/api/runs", limit=500, **({"cursor": cursor} if cursor else {}))
        runs |= {r["runId"] for r in page["items"]}
        cursor = page["nextCursor"]
        if not cursor:
            break
    assert acked_events <= events
    assert acked_runs <= runs
    assert len(acked_events) + len(acked_runs) >= 300
