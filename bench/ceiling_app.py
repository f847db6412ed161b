"""The machine's ceiling for bench/ingest.py: the smallest useful raw ASGI app.

It reads the request body and answers 200 with a tiny JSON body on POST (405 otherwise); nothing
else. Run as `python bench/ceiling_app.py PORT`, it is served exactly as hookwise serves (uvicorn
with `hookwise.server.lifecycle.serve.uvicorn_options` for the default gateway settings: uvloop, httptools
through hookwise's protocol class, no access log), so it bounds what any Python service can
answer on this machine with hookwise's HTTP server.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_OK = b'{"ok":true}'
_HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(_OK)).encode())]


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """200 `{"ok":true}` on POST after reading the whole body; 405 on anything else."""
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    status = 200 if scope["method"] == "POST" else 405
    await send({"type": "http.response.start", "status": status, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": _OK})


def main(port: int) -> None:
    import uvicorn

    from hookwise.engine.config.models import GatewayConfig
    from hookwise.server.lifecycle.serve import uvicorn_options

    options = uvicorn_options(GatewayConfig()) | {"log_level": "warning"}
    uvicorn.run(app, host="127.0.0.1", port=port, **options)


if __name__ == "__main__":
    import sys

    main(int(sys.argv[1]))
