"""Metrics and retention under `--workers 2`, on SQLite and PostgreSQL: one scrape, whichever
worker answers it, sees the whole service; retention prunes one store shared by both."""

from __future__ import annotations

import json
import re

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.multi.test_workers import all_runs, config, post_many
from tests.support.gateway import ADMIN_TOKEN
from tests.support.wait import eventually

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def scrape(url: str) -> dict[tuple, float]:
    with httpx.Client(base_url=url, timeout=10) as c:  # a new connection: any worker answers
        r = c.get("/metrics", headers=ADMIN)
    assert r.status_code == 200, r.text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def test_one_scrape_sees_every_worker(start_gateway, backend) -> None:
    gw = start_gateway(config(), extra_args=[*backend, "--workers", "2", "--log-format", "json"])
    assert "2 workers" in json.loads(gw.ready_line)["msg"]
    ids = post_many(gw.url, 60)
    eventually(
        lambda: len(rs := all_runs(gw)) == 60 and all(r["state"] == "succeeded" for r in rs),
        timeout=60,
        what="60 runs to succeed",
    )
    accepted = ("hookwise_http_requests_total", (("route", "/hooks/agent"), ("status", "202")))
    succeeded = ("hookwise_runs_total", (("agent", "main"), ("state", "succeeded")))
    for _ in range(6):
        samples = scrape(gw.url)
        assert samples[accepted] == len(ids) == 60
        assert samples[succeeded] == 60
    [metrics_dir] = (gw.state_dir / "metrics").iterdir()
    pids = {re.sub(r"\D", "", f.name) for f in metrics_dir.glob("counter_*.db")}
    assert len(pids) >= 2  # both workers counted; the scrape summed them
    gw.stop()
    assert not metrics_dir.exists()  # the supervisor removes its workers' files
    lines = [json.loads(line) for line in gw.stderr().splitlines()]  # every line, all workers
    started = {x["msg"] for x in lines if x["msg"].startswith("Started server process")}
    assert len(started) == 2
    assert len([x for x in lines if x.get("state") == "succeeded" and "runId" in x]) == 60


def test_retention_prunes_the_shared_store(start_gateway, backend) -> None:
    cfg = config()
    cfg["retention"] = {"runs": "1s", "events": "1s", "transcripts": "1s", "interval": "1s"}
    gw = start_gateway(cfg, extra_args=[*backend, "--workers", "2"])
    post_many(gw.url, 40)
    eventually(lambda: all_runs(gw) == [], timeout=30, what="every finished run pruned")
    assert "retention: pruned" in gw.stderr()
