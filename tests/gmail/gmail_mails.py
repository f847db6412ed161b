"""Raw test messages (RFC 5322 bytes) for IMAP APPEND."""

from __future__ import annotations

from datetime import UTC, datetime
from email.message import EmailMessage
from email.mime.text import MIMEText
from email.utils import format_datetime

DATE = datetime(2026, 3, 14, 9, 26, 53, tzinfo=UTC)


def _crlf(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def plain(n: int = 1, *, body: str | None = None, subject: str | None = None) -> bytes:
    msg = EmailMessage()
    msg["From"] = "Bob Sender <bob@example.org>"
    msg["To"] = "alice@example.com"
    msg["Subject"] = subject or f"Plain message {n}"
    msg["Date"] = format_datetime(DATE)
    msg["Message-ID"] = f"<plain-{n}@example.org>"
    msg.set_content(body if body is not None else f"Hello Alice,\n\nthis is message {n}.\n")
    return _crlf(msg.as_bytes())


def multipart_alternative() -> bytes:
    msg = EmailMessage()
    msg["From"] = "Carol <carol@example.org>"
    msg["To"] = "Alice <alice@example.com>, dave@example.net"
    msg["Subject"] = "Quarterly report"
    msg["Date"] = format_datetime(DATE)
    msg["Message-ID"] = "<alt-1@example.org>"
    msg.set_content("Plain part: revenue is up.\n")
    msg.add_alternative(
        "<html><body><p>HTML part: <b>revenue</b> is up.</p></body></html>", subtype="html"
    )
    return _crlf(msg.as_bytes())


def html_only() -> bytes:
    msg = EmailMessage()
    msg["From"] = "News <news@example.org>"
    msg["To"] = "alice@example.com"
    msg["Subject"] = "Newsletter"
    msg["Date"] = format_datetime(DATE)
    msg["Message-ID"] = "<html-1@example.org>"
    msg.set_content(
        "<html><head><title>T</title><style>p {color: red}</style></head><body>"
        "<h1>Big&nbsp;news</h1><p>Fish &amp; chips<br>tonight</p>"
        "<script>alert('x')</script><ul><li>one</li><li>two</li></ul></body></html>",
        subtype="html",
    )
    return _crlf(msg.as_bytes())


def latin1() -> bytes:
    text = MIMEText("Grüße aus Köln, à bientôt.\n", "plain", "iso-8859-1")
    text["From"] = "=?iso-8859-1?q?J=FCrgen_M=FCller?= <juergen@example.de>"
    text["To"] = "alice@example.com"
    text["Subject"] = "=?iso-8859-1?q?=C4nderung_der_Preise?="
    text["Date"] = format_datetime(DATE)
    text["Message-ID"] = "<latin1-1@example.de>"
    return _crlf(text.as_bytes())


def huge(size: int) -> bytes:
    # "é" is two bytes in UTF-8: an odd cut point falls inside a character.
    return plain(99, body="é" * size, subject="Huge")
