"""Reading what a mapped hook left in the store, through the admin API.

Runs carry the id of the rule that made them (`rule`), events their source (`hook:<rule id>`),
so a test can count what one rule produced on a gateway that other tests share. The run's
message itself is not in the admin API; the echo model's reply (`echo: <message>`) shows it.
"""

from __future__ import annotations

from typing import Any

from tests.support.gateway import GatewayProcess
from tests.support.wait import eventually


def get_run(gw: GatewayProcess, run_id: str) -> dict[str, Any]:
    run: dict[str, Any] = gw.admin(f"/api/runs/{run_id}")["run"]
    return run


def finished_run(gw: GatewayProcess, run_id: str) -> dict[str, Any]:
    """The run once the echo model has answered it (state `succeeded`)."""
    return eventually(
        lambda: (r := get_run(gw, run_id))["state"] == "succeeded" and r,
        what=f"run {run_id} to succeed",
    )


def runs_of(gw: GatewayProcess, rule: str) -> list[dict[str, Any]]:
    return [r for r in gw.admin("/api/runs", limit=500)["items"] if r["rule"] == rule]


def events_of(gw: GatewayProcess, rule: str) -> list[dict[str, Any]]:
    items = gw.admin("/api/events", limit=500)["items"]
    return [e for e in items if e["source"] == f"hook:{rule}"]


def logged(gw: GatewayProcess, path: str) -> list[dict[str, Any]]:
    """Request-log lines for one hook path, newest first."""
    return [e for e in gw.admin("/api/requests", limit=500)["items"] if e["path"] == path]
