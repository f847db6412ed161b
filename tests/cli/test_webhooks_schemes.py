"""`hookwise webhooks schemes`: the scheme table for people, and `--json` for programs."""

from __future__ import annotations

import json
from pathlib import Path

from hookwise.engine.signatures import NAMES
from tests.cli.support import run


def test_json_lists_every_scheme_name_with_headers_tolerance_and_delivery_id(
    tmp_path: Path,
) -> None:
    r = run("webhooks", "schemes", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [row["name"] for row in rows] == sorted(NAMES)
    for row in rows:
        assert {"name", "headers", "tolerance", "deliveryId"} <= row.keys()
        assert isinstance(row["headers"], list)
    by_name = {row["name"]: row for row in rows}
    stripe = by_name["stripe"]
    assert stripe["headers"] == ["Stripe-Signature"]
    assert stripe["tolerance"] == 300.0 and stripe["deliveryId"] == "$.id"
    github = by_name["github"]
    assert github["headers"] == ["X-Hub-Signature-256", "X-GitHub-Delivery"]
    assert github["tolerance"] is None and github["deliveryId"] == "X-GitHub-Delivery"
    assert by_name["whatsapp"]["aliasOf"] == "meta"
    assert by_name["standard-webhooks"]["headers"] == [
        "webhook-signature",
        "webhook-timestamp",
        "webhook-id",
    ]


def test_the_table_has_a_row_per_scheme(tmp_path: Path) -> None:
    r = run("webhooks", "schemes", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:3] == ["NAME", "HEADERS", "SIGNED"]
    assert len(lines) == 1 + len(NAMES)
    slack = next(line for line in lines if line.startswith("slack "))
    assert "X-Slack-Signature" in slack and "300s" in slack and "$.event_id" in slack
