"""A receiver of signed webhooks (callbacks, the `webhook` channel, lifecycle events) on loopback.

It records every POST and answers `200 {}`; scripted answers (`fail`, `rate_limit`, `script`)
come from `FakeServer`. Signatures are checked by the tests with the `standardwebhooks` library,
the reference implementation, never by this fake.
"""

from __future__ import annotations

from typing import Any

from tests.fakes.fake_http import FakeServer, Recorded, Reply


class WebhookReceiver(FakeServer):
    name = "webhook-receiver"

    def config(self) -> dict[str, Any]:
        return {"url": self.url}

    def is_send(self, req: Recorded) -> bool:
        return req.method == "POST"

    def handle(self, req: Recorded) -> Reply:
        return Reply(200, {})

    def rate_limited_reply(self, retry_after: float) -> Reply:
        return Reply(429, {"error": "slow down"}, {"Retry-After": str(retry_after)})

    def server_error_reply(self) -> Reply:
        return Reply(503, {"error": "unavailable"})

    def redirect(self, to: str, times: int = 1) -> None:
        self.script(Reply(307, None, {"Location": to}), times)
