"""From raw RFC 5322 bytes to the `messages[]` item the `gmail` preset reads.

The standard library's `email` package with `policy.default` decodes MIME encoded-words in
headers and the charset and transfer encoding of bodies. The body is the text/plain part when
there is one, else text extracted from the text/html part (links written `text (url)`); it is
cut to `max_bytes` of UTF-8 without splitting a character. The item:

    {"id", "threadId" (Gmail only), "from", "to", "subject", "snippet", "body", "date",
     "messageId"}

`snippet` is the start of the body with whitespace collapsed (like Gmail's), `date` is ISO 8601
(from the Date header, else the server's internal date, else null).
"""

from __future__ import annotations

import email
import email.parser
import hashlib
import re
from datetime import datetime
from email import policy
from email.message import EmailMessage, Message
from email.utils import parsedate_to_datetime
from html.parser import HTMLParser
from typing import Any

IDEMPOTENCY_PREFIX = "gmail-"
_WS = re.compile(r"\s+")
_BLANK_LINES = re.compile(r"\n\s*\n\s*\n+")


def parse_message(
    raw: bytes,
    *,
    id: str,
    thread_id: str | None = None,
    max_bytes: int = 20000,
    snippet_chars: int = 200,
    internal_date: datetime | None = None,
) -> dict[str, Any]:
    """The payload item for one message."""
    msg = email.message_from_bytes(raw, policy=policy.default)
    assert isinstance(msg, EmailMessage)
    body = body_text(msg)
    item: dict[str, Any] = {"id": id}
    if thread_id is not None:
        item["threadId"] = thread_id
    item.update(
        {
            "from": _header(msg, "From"),
            "to": _header(msg, "To"),
            "subject": _header(msg, "Subject"),
            "snippet": snippet(body, snippet_chars),
            "body": truncate_utf8(body, max_bytes),
            "date": _date(msg, internal_date),
            "messageId": message_id(msg),
        }
    )
    return item


def message_id(msg: Message) -> str | None:
    """The Message-ID header without surrounding whitespace, or None."""
    try:
        value = msg.get("Message-ID")
    except Exception:
        return None
    text = str(value).strip() if value is not None else ""
    return text or None


def message_id_of(raw: bytes) -> str | None:
    """The Message-ID of raw message bytes (headers only are parsed)."""
    parser = email.parser.BytesHeaderParser(policy=policy.default)
    return message_id(parser.parsebytes(raw))


def idempotency_key(message_id: str | None, fallback: str) -> str:
    """`gmail-<sha256 hex>` of the Message-ID (or of `fallback` when there is none): 70 chars."""
    basis = message_id if message_id else f"no-message-id:{fallback}"
    return IDEMPOTENCY_PREFIX + hashlib.sha256(basis.encode("utf-8", "surrogatepass")).hexdigest()


def truncate_utf8(text: str, max_bytes: int) -> str:
    """`text` cut to at most `max_bytes` bytes of UTF-8, never inside a character."""
    data = text.encode("utf-8", "replace")
    if len(data) <= max_bytes:
        return text
    return data[:max_bytes].decode("utf-8", "ignore")


def snippet(body: str, chars: int) -> str:
    flat = _WS.sub(" ", body).strip()
    if len(flat) <= chars:
        return flat
    return flat[:chars].rstrip() + "…"


def body_text(msg: EmailMessage) -> str:
    """text/plain if present, else the text of text/html, else ''."""
    part = msg.get_body(preferencelist=("plain",))
    if part is not None:
        return _normalise(_content(part))
    part = msg.get_body(preferencelist=("html",))
    if part is not None:
        return _normalise(html_to_text(_content(part)))
    return ""


def _content(part: Message) -> str:
    try:
        content = part.get_content()  # type: ignore[attr-defined]
    except (LookupError, UnicodeError, AssertionError, ValueError):
        payload = part.get_payload(decode=True) or b""
        assert isinstance(payload, bytes)
        charset = part.get_content_charset() or "utf-8"
        try:
            return payload.decode(charset, "replace")
        except LookupError:  # unknown charset name
            return payload.decode("latin-1")
    if isinstance(content, bytes):
        return content.decode("utf-8", "replace")
    return str(content)


def _normalise(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = [line.rstrip() for line in text.split("\n")]
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()


def _header(msg: Message, name: str) -> str:
    try:
        value = msg.get(name)
    except Exception:  # a header too broken for the policy's parser
        value = None
    if value is None:
        return ""
    return _WS.sub(" ", str(value)).strip()


def _date(msg: Message, internal_date: datetime | None) -> str | None:
    raw = None
    try:
        raw = msg.get("Date")
    except Exception:
        raw = None
    if raw is not None:
        try:
            return parsedate_to_datetime(str(raw)).isoformat()
        except (TypeError, ValueError, IndexError):
            pass
    if internal_date is not None:
        return internal_date.isoformat()
    return None


class _HTMLText(HTMLParser):
    """Text of an HTML document: block elements become line breaks; script/style are dropped;
    a link keeps its target, written `text (url)` (only the URL when the text is the URL)."""

    _BLOCK = frozenset(
        [
            "address",
            "article",
            "aside",
            "blockquote",
            "br",
            "div",
            "dl",
            "fieldset",
            "figcaption",
            "figure",
            "footer",
            "form",
            "h1",
            "h2",
            "h3",
            "h4",
            "h5",
            "h6",
            "header",
            "hr",
            "main",
            "nav",
            "ol",
            "p",
            "pre",
            "section",
            "table",
            "ul",
        ]
    )
    _LINE = frozenset({"li", "tr", "dt", "dd"})  # a line break before, none after
    _CELL = frozenset({"td", "th"})
    _SKIP = frozenset({"script", "style", "head", "title", "template"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0
        self._link: tuple[str, int] | None = None  # (href, index of its first text part)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a" and not self._skipping:
            href = (dict(attrs).get("href") or "").strip()
            if _LINK_TARGET.match(href) and len(href) <= _MAX_HREF:
                self._link = (href, len(self.parts))
        if tag in self._SKIP:
            self._skipping += 1
        elif tag in self._BLOCK or tag in self._LINE:
            self.parts.append("\n")
        elif tag in self._CELL:
            self.parts.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._link is not None:
            href, start = self._link
            self._link = None
            label = _WS.sub(" ", "".join(self.parts[start:])).strip()
            if label != href and label != href.removeprefix("mailto:"):
                self.parts.append(f" ({href})" if label else href)
        if tag in self._SKIP:
            self._skipping = max(0, self._skipping - 1)
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


_LINK_TARGET = re.compile(r"(?:https?://|mailto:)\S", re.I)
_MAX_HREF = 2048


def html_to_text(html: str) -> str:
    """Readable text from HTML: tags dropped (links kept as `text (url)`), entities decoded,
    whitespace tidied."""
    parser = _HTMLText()
    parser.feed(html)
    parser.close()
    text = "".join(parser.parts)
    lines = [_WS.sub(" ", line).strip() for line in text.split("\n")]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()


__all__ = [
    "body_text",
    "html_to_text",
    "idempotency_key",
    "message_id",
    "message_id_of",
    "parse_message",
    "snippet",
    "truncate_utf8",
]
