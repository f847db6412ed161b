r"""Logging: one format for the service, and a filter that keeps secrets out of every line.

The code never logs payloads or tokens; the filter is a second line of defence that redacts
`token=...` query parameters and `Bearer ...` credentials from any message, including ones from
third-party libraries (the ASGI server's own logs). It also escapes control characters (CR, LF,
ESC, the Unicode line separators, ...) in every message as `\xNN`/`\uNNNN`, so that nothing a
request carries (a path, a name) can end a log line and start one of its own; `escape_control`
does the same for what is stored from a request (the request log's path).

Two formats (`--log-format`, `logging.format`): `text` (`<time> <LEVEL> <logger>: <message>`) and
`json`, one object per line with `ts` (ISO-8601 UTC), `level`, `logger`, `msg` and the ids a
line carries as fields of their own (`log.info(..., extra=fields(runId=...))`). In JSON every
line the process writes is an object: `say()` writes the lines that are not log records (the
start-up banner, configuration problems) in the configured format too.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from typing import Any, Literal, TextIO

from ..engine.times import iso_utc

Format = Literal["text", "json"]
FORMATS: tuple[Format, ...] = ("text", "json")
_format: Format = "text"

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


def fields(**ids: Any) -> dict[str, Any]:
    """`extra=` for a log call: the ids and figures a JSON line carries as its own fields (None
    values are left out). The text format shows only the message, which names them too."""
    return {"fields": {k: v for k, v in ids.items() if v is not None}}


def _json_line(ts: float, level: str, logger: str, msg: str, extra: dict[str, Any]) -> str:
    out: dict[str, Any] = {"ts": iso_utc(ts), "level": level, "logger": logger, "msg": redact(msg)}
    for key, value in extra.items():
        if key not in out:
            out[key] = redact(value) if isinstance(value, str) else value
    return json.dumps(out, ensure_ascii=False, default=str)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, msg, the record's fields, and `exc`."""

    def format(self, record: logging.LogRecord) -> str:
        extra = dict(getattr(record, "fields", None) or {})
        if record.exc_info:
            extra["exc"] = self.formatException(record.exc_info)
        return _json_line(record.created, record.levelname, record.name, record.getMessage(), extra)


def say(text: str, *, stream: TextIO | None = None, level: str = "INFO", **extra: Any) -> None:
    """Write a line that is not a log record (the banner, a configuration problem) to `stream`
    (default stdout), as a JSON object when the format is `json`."""
    import time

    out = stream or sys.stdout
    if _format == "json":
        text = _json_line(time.time(), level, "hookwise", text, extra)
    print(text, file=out, flush=True)


def configure(level: str = "info", fmt: Format = "text") -> None:
    global _format
    _format = fmt
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
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
