r"""Logging: one format for the service, and a filter that keeps secrets out of every line.

The code never logs payloads or tokens; the filter is a second line of defence that redacts
`token=...` query parameters and `Bearer ...` credentials from any message, including ones from
third-party libraries (the ASGI server's own logs). It also escapes control characters (CR, LF,
ESC, the Unicode line separators, ...) in every message as `\xNN`/`\uNNNN`, so that nothing a
request carries (a path, a name) can end a log line and start one of its own; `escape_control`
does the same for what is stored from a request (the request log's path).
"""

from __future__ import annotations

import logging
import re
import sys

_SECRETS = re.compile(r"(?i)(token=|password=|bearer\s+|x-service-token:\s*|/bot)[^\s&\"'/]+")


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def redact(text: str) -> str:
    return _SECRETS.sub(lambda m: m.group(1) + "[redacted]", text)


def _escaped(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_control(text: str) -> str:
    """`text` with every control character written as an escape (one line, no terminal codes)."""
    return _CONTROL.sub(_escaped, text)


class RedactingFilter(logging.Filter):
    """Rewrites a record's message with secrets redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = escape_control(redact(message))
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
