"""The sender of a broker source's message (budgets by sender, issue 35), against the real Redis
on 127.0.0.1:6379: a message whose signature the door checked (`auth: signature`) is of the
signature's sender (`github#<n>`), as the same request over HTTP is; `source:<name>` only when
no signature was checked."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from tests.fakes.model_server import ModelServer
from tests.runtime.conftest import model_server  # noqa: F401 (a fixture)
from tests.runtime.test_sender_budgets import SECRETS, sender_config
from tests.sources.test_redis_source import URL, r  # noqa: F401 (a fixture)
from tests.support.sources import unique
from tests.support.wait import eventually


def test_a_message_the_door_checked_is_of_its_signatures_sender(
    start_gateway,
    model_server: ModelServer,  # noqa: F811 (the fixture imported)
    r: Any,  # noqa: F811 (the fixture imported)
) -> None:
    signed_stream, plain_stream = unique("senders"), unique("plain")
    cfg = sender_config(model_server, tokens=500, per="1h")
    [shared] = cfg["hooks"]["mappings"]
    plain = {**shared, "id": "plain", "match": {"path": "plain"}}
    del plain["verify"]
    cfg["hooks"]["mappings"] = [shared, plain]
    cfg["sources"] = [
        {"name": "signed", "path": "shared", "redis": {"url": URL, "stream": signed_stream}},
        {"name": "unsigned", "path": "plain", "redis": {"url": URL, "stream": plain_stream}},
    ]
    gw = start_gateway(cfg)
    try:
        body = json.dumps({"n": 1}).encode()
        sig = hmac.new(SECRETS[1].encode(), body, hashlib.sha256).hexdigest()
        r.xadd(
            signed_stream,
            {
                "body": body,
                "content-type": "application/json",
                "x-hub-signature-256": f"sha256={sig}",
            },
        )
        r.xadd(plain_stream, {"body": body, "content-type": "application/json"})

        def senders() -> dict[str, str] | None:
            runs = gw.admin("/api/runs", limit=10)["items"]
            found = {x["rule"]: gw.admin(f"/api/runs/{x['runId']}")["run"]["sender"] for x in runs}
            return found if len(found) == 2 else None

        found = eventually(senders, what="a run of each source")
        assert found == {"shared": "github#1", "plain": "source:unsigned"}
    finally:
        r.delete(signed_stream, plain_stream)
