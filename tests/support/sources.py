"""Pull-source tests: the rules every broker's suite routes into, and reading what they made.

`source_config(sources)` is a gateway configuration with the given `sources:` and three rules: on
path `github`, an `issues` event (by its `X-GitHub-Event` header, signed with `GITHUB_SECRET`)
becomes a wake event `issue <number> <action>` and a `push` an agent run; on path `plain`, any
message becomes the wake event `{{text}}`. Events carry their rule's source (`hook:<rule id>`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.gateway import GatewayProcess, base_config
from tests.support.postgres import fresh_database
from tests.support.wait import eventually

GITHUB_SECRET = "gh-source-secret-0123456789"
GITHUB_ENV = {"GITHUB_WEBHOOK_SECRET": GITHUB_SECRET}

RULES: list[dict[str, Any]] = [
    {
        "id": "gh-issues",
        "match": {"path": "github", "when": {"header": "x-github-event", "equals": "issues"}},
        "action": "wake",
        "textTemplate": "issue {{issue.number}} {{action}}",
        "verify": {"scheme": "github", "secret": "${GITHUB_WEBHOOK_SECRET}"},
    },
    {
        "id": "gh-push",
        "match": {"path": "github", "when": {"header": "x-github-event", "equals": "push"}},
        "sessionKey": "hook:push:{{repository.full_name}}",
        "messageTemplate": "push to {{ref}}",
        "verify": {"scheme": "github", "secret": "${GITHUB_WEBHOOK_SECRET}"},
    },
    {"id": "plain", "match": {"path": "plain"}, "action": "wake", "textTemplate": "{{text}}"},
]


def unique(prefix: str) -> str:
    """A name no other test (or earlier run) uses: each test its own stream, subject or queue."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def source_config(sources: list[dict[str, Any]], **hooks: Any) -> dict[str, Any]:
    config = base_config(mappings=RULES, **hooks)
    config["sources"] = sources
    return config


def github_message(
    event: str, payload: dict[str, Any], *, secret: str = GITHUB_SECRET
) -> tuple[bytes, dict[str, str]]:
    """A relayed GitHub delivery: its body and headers (signed with `secret`)."""
    body = json.dumps(payload, separators=(",", ":")).encode()
    signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return body, {
        "content-type": "application/json",
        "x-github-event": event,
        "x-hub-signature-256": signature,
    }


def plain(text: str) -> bytes:
    return json.dumps({"text": text}).encode()


def every(gw: GatewayProcess, path: str) -> list[dict[str, Any]]:
    """Every item of an admin listing, page by page."""
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = gw.admin(path, limit=500, **({"cursor": cursor} if cursor else {}))
        items += page["items"]
        cursor = page.get("nextCursor")
        if not cursor:
            return items


def event_texts(gw: GatewayProcess, rule: str) -> list[str]:
    return [e["text"] for e in every(gw, "/api/events") if e["source"] == f"hook:{rule}"]


def requests_of(gw: GatewayProcess, client: str) -> list[dict[str, Any]]:
    """Request-log lines of one source (client `source:<name>`), newest first."""
    return [e for e in every(gw, "/api/requests") if e.get("client") == client]


def source_state(gw: GatewayProcess, name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(
        s for s in gw.admin("/api/sources")["sources"] if s["name"] == name
    )
    return found


@contextmanager
def two_gateways(
    config: dict[str, Any], root: Path, env: dict[str, str]
) -> Iterator[list[GatewayProcess]]:
    """Two gateway processes with `config` on one fresh PostgreSQL database."""
    with fresh_database() as url:
        gws = [
            GatewayProcess(config, root / f"gw{i}", env=env, extra_args=["--store", url])
            for i in range(2)
        ]
        try:
            for gw in gws:
                gw.start()
            yield gws
        finally:
            for gw in gws:
                gw.stop()


def stored_once(gw: GatewayProcess, texts: list[str], rule: str = "plain") -> None:
    """Wait until `rule` made an event per text, then assert none is missing or twice."""
    stored = eventually(
        lambda: len(x := event_texts(gw, rule)) >= len(texts) and x,
        timeout=90,
        what="every message stored",
    )
    assert sorted(stored) == sorted(texts)  # none lost, none twice


def acked_by_all(gws: list[GatewayProcess], name: str, count: int) -> list[int]:
    """Wait until the gateways' `acked` counts of source `name` add up to `count`.

    A message is acknowledged after its store commit, so its event can be seen a moment
    before the count moves; more than `count` (a message acknowledged twice) fails at once.
    """

    def total() -> list[int] | None:
        acked = [source_state(gw, name)["acked"] for gw in gws]
        assert sum(acked) <= count, acked
        return acked if sum(acked) == count else None

    return eventually(total, what=f"{count} messages acknowledged")
