"""The no-durability floor for bench/durability.py: `/hooks/wake` of the same shape, in memory.

A raw ASGI app that does what a wake endpoint must do before anything is stored, and keeps the
event in memory as the best-known peer does: check the bearer token (constant time), read the
whole body (bounded), parse it as JSON, validate `text` (a non-empty string) and `mode` (`now`
or `next-heartbeat`), make an event id, append the event to a bounded in-memory queue, and
answer 200 `{"ok":true,"eventId":...}`; a refusal is the JSON error shape. No store, no sync, no
request log. Run as `python bench/floor_app.py PORT TOKEN`, it is served exactly as hookwise
serves (see `ceiling_app.py`), so durable `/wake` over this floor is the cost of durability (and
of hookwise's own bookkeeping) as a ratio within one run.
"""

from __future__ import annotations

import collections
import hmac
import json
import sys
import time
import uuid
from typing import Any

from ceiling_app import Receive, Scope, Send, _lifespan

MAX_BODY = 256 * 1024
#: events kept (the peer keeps its queue in memory; bounded so a long run does not grow)
EVENTS: collections.deque[dict[str, Any]] = collections.deque(maxlen=100_000)
_TOKEN = b""
_JSON = [(b"content-type", b"application/json")]


async def _answer(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body, separators=(",", ":")).encode()
    headers = [*_JSON, (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def _refusal(error: str, code: str) -> dict[str, Any]:
    return {"ok": False, "error": error, "code": code}


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """`POST /hooks/wake` with the bearer token: the event queued in memory, 200."""
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    if scope["type"] != "http":
        return
    if scope["method"] != "POST" or scope["path"] != "/hooks/wake":
        await _answer(send, 404, _refusal("no such hook", "not_found"))
        return
    auth = dict(scope["headers"]).get(b"authorization", b"")
    if not hmac.compare_digest(auth, b"Bearer " + _TOKEN):
        await _answer(send, 401, _refusal("missing or wrong token", "unauthorized"))
        return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
        if len(body) > MAX_BODY:
            await _answer(send, 413, _refusal("body too large", "payload_too_large"))
            return
    try:
        payload = json.loads(body)
    except ValueError:
        await _answer(send, 400, _refusal("the body is not JSON", "invalid_json"))
        return
    text = payload.get("text") if isinstance(payload, dict) else None
    mode = payload.get("mode", "now") if isinstance(payload, dict) else None
    if not isinstance(text, str) or not text.strip() or mode not in ("now", "next-heartbeat"):
        await _answer(send, 400, _refusal("text and mode are required", "invalid_payload"))
        return
    event_id = str(uuid.uuid4())
    EVENTS.append({"id": event_id, "text": text, "mode": mode, "at": time.time()})
    await _answer(send, 200, {"ok": True, "eventId": event_id})


def main(port: int, token: str) -> None:
    global _TOKEN
    import uvicorn

    from hookwise.engine.config.models import GatewayConfig
    from hookwise.server.lifecycle.serve import uvicorn_options

    _TOKEN = token.encode()
    options = uvicorn_options(GatewayConfig()) | {"log_level": "warning"}
    uvicorn.run(app, host="127.0.0.1", port=port, **options)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
