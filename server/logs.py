"""Logging: one format for the service, and a filter that keeps secrets out of every line.

The code never logs payloads or tokens; the filter is a second line of defence that redacts
`token=...` query parameters and `Bearer ...` credentials from any message, including ones from
third-party libraries (the ASGI server's own logs).
"""

from __future__ import annotations

import logging
import re
import sys

_SECRETS = re.compile(r"(?i)(token=|password=|bearer\s+|x-service-token:\s*|/bot)[^\s&\"'/]+")


def redact(text: str) -> str:
    return _SECRETS.sub(lambda m: m.group(1) + "[redacted]", text)


class RedactingFilter(logging.Filter):
    """Rewrites a record's message with secrets redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True


def configure(level: str = "info") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # httpx logs every request URL at INFO; some channel APIs carry credentials in the URL.
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        lg = logging.getLogger(name)
        lg.handlers[:] = []
        lg.propagate = True
