"""The IMAP side of the mail watcher: one blocking connection to one folder, with IDLE.

Library choice: `imapclient` (sync, maintained since 2014, built on the stdlib's `imaplib`). It
parses FETCH/SELECT/LIST answers into Python values, has LOGIN, AUTHENTICATE XOAUTH2, STARTTLS
and RFC 2177 IDLE, and knows Gmail's X-GM-* attributes. The async alternative, `aioimaplib`,
hands back raw response lines that we would have to parse ourselves. A blocking client is fine
here: the watcher holds one connection and drives it from one dedicated worker thread, so every
call below is made from that thread, one at a time (`hookwise.server.gmail.watcher` owns the thread).

IDLE waits are taken in short slices (`idle_wait(timeout)`), so the watcher can stop, and so a
connection the server closed is noticed at once: `imapclient.idle_check` swallows EOF, which we
detect as "still readable, but nothing to read".

News the server gave before IDLE began is not lost. A message that arrives after the watcher's
last SEARCH is announced (`* n EXISTS`) either with the answer to a later command (a FETCH), where
imaplib keeps it aside, or, when it arrived before IDLE, right after IDLE's `+ idling`, in the
same read, so it sits in the client's buffer where the socket poll of `idle_check` never sees it.
The server does not announce it again; so the first `idle_wait` after `idle_start` reports
"changed" when either holds, and the watcher catches up at once instead of at the IDLE renewal.

Nothing here logs credentials or message content.
"""

from __future__ import annotations

import contextlib
import select
import ssl
from collections.abc import Iterable
from datetime import date, datetime
from typing import Any, Literal

import attrs
from imapclient import IMAPClient
from imapclient.exceptions import IMAPClientAbortError, IMAPClientError, LoginError

from ...engine.config.gmail import GmailConfig
from .secrets import Credential

SKIPPED_SPECIAL_USE = (b"\\Junk", b"\\Trash", b"\\Drafts", b"\\Sent")
"""RFC 6154 special-use flags of folders the watcher never watches."""

SKIPPED_GMAIL_LABELS = ("\\Spam", "\\Trash", "\\Draft", "\\Sent")
"""Gmail's X-GM-LABELS of messages the watcher never posts (seen in e.g. All Mail)."""

IdleEvent = Literal["changed", "timeout", "closed"]


class ImapError(Exception):
    """A problem talking to the IMAP server; the message names what failed, never a secret."""


class ImapAuthError(ImapError):
    """The server refused the credential."""


class ImapFolderError(ImapError):
    """The configured folder does not exist or must not be watched."""


class ImapConnectionLost(ImapError):
    """The server closed the connection (BYE, EOF) or it broke."""


@attrs.frozen
class FolderState:
    """What SELECT (EXAMINE) told us about the watched folder."""

    uid_validity: int
    uid_next: int | None
    exists: int


@attrs.frozen
class FetchedMessage:
    """One message as fetched: its UID, raw RFC 5322 bytes and the attributes we act on."""

    uid: int
    raw: bytes = attrs.field(repr=False)
    flags: tuple[str, ...] = ()
    internal_date: datetime | None = None
    gmail_msgid: int | None = None
    gmail_thrid: int | None = None
    gmail_labels: tuple[str, ...] = ()

    @property
    def is_draft(self) -> bool:
        return "\\Draft" in self.flags

    @property
    def skipped_label(self) -> str | None:
        """The Gmail label that excludes this message (spam, trash, drafts, sent), if any."""
        for label in self.gmail_labels:
            if label in SKIPPED_GMAIL_LABELS:
                return label
        return None


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _describe(exc: BaseException) -> str:
    text = _text(exc.args[0]) if exc.args else type(exc).__name__
    return text.strip() or type(exc).__name__


class Mailbox:
    """A logged-in IMAP connection with one folder selected read-only (EXAMINE).

    Read-only selection means the watcher never changes flags: it fetches with BODY.PEEK, so
    messages stay unread for the person who owns the mailbox.
    """

    def __init__(self, client: IMAPClient, host: str) -> None:
        self._client = client
        self._host = host
        self._idling = False
        self._gmail = False
        self._selected: str | None = None
        self._heard_news = False

    # -- connecting ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        config: GmailConfig,
        credential: Credential,
        *,
        ssl_context: ssl.SSLContext | None = None,
    ) -> Mailbox:
        """Connect, negotiate TLS as configured, and log in. Raises `ImapError` subclasses."""
        where = f"{config.imap_host}:{config.port}"
        try:
            client = IMAPClient(
                config.imap_host,
                port=config.port,
                ssl=config.tls == "implicit",
                ssl_context=ssl_context,
                timeout=float(config.timeout_seconds),
            )
        except (OSError, IMAPClientError) as e:
            raise ImapError(f"cannot connect to IMAP server {where}: {_describe(e)}") from None
        box = cls(client, where)
        try:
            if config.tls == "starttls":
                try:
                    client.starttls(ssl_context)
                except (OSError, IMAPClientError) as e:
                    raise ImapError(f"STARTTLS with {where} failed: {_describe(e)}") from None
            box._login(config.account, credential)
            box._gmail = b"X-GM-EXT-1" in client.capabilities()
        except BaseException:
            box.close()
            raise
        return box

    def _login(self, account: str, credential: Credential) -> None:
        try:
            if credential.kind == "oauth2":
                self._client.oauth2_login(account, credential.secret)
            else:
                self._client.login(account, credential.secret)
        except LoginError as e:
            how = "AUTHENTICATE XOAUTH2" if credential.kind == "oauth2" else "LOGIN"
            raise ImapAuthError(
                f"IMAP {how} as {account} at {self._host} was refused: {_describe(e)}"
            ) from None
        except (OSError, IMAPClientError) as e:
            raise ImapConnectionLost(f"login at {self._host} failed: {_describe(e)}") from None

    # -- the folder ---------------------------------------------------------------------------

    def select(self, label: str, skip_folders: Iterable[str]) -> FolderState:
        """EXAMINE `label`, refusing folders the watcher must skip."""
        skip = {f.casefold() for f in skip_folders}
        if label.casefold() in skip:
            raise ImapFolderError(
                f"folder {label!r} is in hooks.gmail.skipFolders; it is never watched"
            )
        folders = self._call(lambda: self._client.list_folders())
        for flags, _delim, name in folders:
            if name == label:
                special = [f for f in flags if f in SKIPPED_SPECIAL_USE]
                if special:
                    raise ImapFolderError(
                        f"folder {label!r} is a {_text(special[0])} folder; spam, trash, "
                        "drafts and sent mail are never watched"
                    )
                break
        else:
            if label.upper() != "INBOX":
                names = ", ".join(sorted(name for _f, _d, name in folders)[:20])
                raise ImapFolderError(f"folder {label!r} does not exist (found: {names})")
        try:
            info = self._client.select_folder(label, readonly=True)
        except IMAPClientAbortError as e:
            raise ImapConnectionLost(f"SELECT {label!r} failed: {_describe(e)}") from None
        except IMAPClientError as e:
            raise ImapFolderError(f"cannot open folder {label!r}: {_describe(e)}") from None
        except OSError as e:
            raise ImapConnectionLost(f"SELECT {label!r} failed: {_describe(e)}") from None
        self._selected = label
        self._take_news()  # what SELECT told is the baseline, not news
        uid_next = info.get(b"UIDNEXT")
        return FolderState(
            uid_validity=int(info[b"UIDVALIDITY"]),
            uid_next=int(uid_next) if uid_next is not None else None,
            exists=int(info.get(b"EXISTS", 0)),
        )

    def last_uid(self) -> int:
        """The highest UID in the folder, 0 when it is empty."""
        uids = self._call(lambda: self._client.search(["ALL"]))
        return max(uids, default=0)

    def uids_after(self, last_uid: int) -> list[int]:
        """UIDs above `last_uid`, ascending. (`UID n:*` also matches the last message: filtered.)"""
        self._take_news()  # this SEARCH sees all that was announced before it
        uids = self._call(lambda: self._client.search(["UID", f"{last_uid + 1}:*"]))
        return sorted(u for u in uids if u > last_uid)

    def uids_since(self, day: date) -> list[int]:
        """UIDs of messages whose internal date is on or after `day`, ascending."""
        return sorted(self._call(lambda: self._client.search(["SINCE", day])))

    def fetch(self, uid: int) -> FetchedMessage | None:
        """The whole message (BODY.PEEK[]), or None when it was expunged meanwhile."""
        items = ["BODY.PEEK[]", "FLAGS", "INTERNALDATE"]
        if self._gmail:
            items += ["X-GM-MSGID", "X-GM-THRID", "X-GM-LABELS"]
        data = self._call(lambda: self._client.fetch([uid], items))
        row = data.get(uid)
        if row is None or b"BODY[]" not in row:
            return None
        labels = row.get(b"X-GM-LABELS") or ()
        return FetchedMessage(
            uid=uid,
            raw=row[b"BODY[]"] or b"",
            flags=tuple(_text(f) for f in row.get(b"FLAGS", ())),
            internal_date=row.get(b"INTERNALDATE"),
            gmail_msgid=row.get(b"X-GM-MSGID"),
            gmail_thrid=row.get(b"X-GM-THRID"),
            gmail_labels=tuple(_text(label) for label in labels),
        )

    @property
    def is_gmail(self) -> bool:
        return self._gmail

    # -- waiting ------------------------------------------------------------------------------

    @property
    def supports_idle(self) -> bool:
        return b"IDLE" in self._call(lambda: self._client.capabilities())

    def idle_start(self) -> None:
        heard = self._take_news()
        self._call(lambda: self._client.idle())
        self._idling = True
        self._heard_news = heard or self._buffered()

    def idle_wait(self, timeout: float) -> IdleEvent:
        """Wait up to `timeout` seconds in IDLE for news about the folder ("changed" at once when
        the server announced news before IDLE began, see the module's docstring)."""
        if self._heard_news:
            self._heard_news = False
            return "changed"
        responses = self._call(lambda: self._client.idle_check(timeout=timeout))
        if not responses and self._readable():
            # idle_check hides EOF: a readable socket with nothing to read twice is a closed one.
            responses = self._call(lambda: self._client.idle_check(timeout=0))
            if not responses and self._readable():
                self._idling = False
                return "closed"
        event: IdleEvent = "timeout"
        for resp in responses:
            if len(resp) >= 1 and resp[0] == b"BYE":
                self._idling = False
                return "closed"
            if len(resp) >= 2 and resp[1] in (b"EXISTS", b"RECENT"):
                event = "changed"
        return event

    def idle_stop(self) -> None:
        if self._idling:
            self._idling = False
            self._call(lambda: self._client.idle_done())

    def noop(self) -> None:
        self._call(lambda: self._client.noop())

    def _take_news(self) -> bool:
        """Whether a command's answer announced new messages (`EXISTS`, `RECENT`) since the last
        call; imaplib keeps such unsolicited responses aside, and they are dropped here."""
        stash = self._client._imap.untagged_responses
        heard = [stash.pop(name, None) for name in ("EXISTS", "RECENT")]
        return any(heard)

    def _buffered(self) -> bool:
        """Whether the client's reader already holds bytes from the server (read along with an
        earlier line), which a poll of the socket cannot see. Never waits."""
        peek = getattr(getattr(self._client._imap, "file", None), "peek", None)
        if peek is None:
            return False
        sock = self._client.socket()
        before = sock.gettimeout()
        try:
            sock.settimeout(0.0)  # an empty buffer makes peek read the socket: must not block
            return bool(peek(1))
        except (OSError, ValueError):
            return False
        finally:
            with contextlib.suppress(OSError):
                sock.settimeout(before)

    def _readable(self) -> bool:
        try:
            ready, _, _ = select.select([self._client.socket()], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(ready)

    # -- closing ------------------------------------------------------------------------------

    def close(self) -> None:
        """Log out politely when possible; always release the socket. Never raises."""
        try:
            if not self._idling:
                self._client.logout()
                return
        except Exception:
            pass
        with contextlib.suppress(Exception):
            self._client.shutdown()

    def _call(self, fn: Any) -> Any:
        try:
            return fn()
        except (IMAPClientAbortError, OSError) as e:
            self._idling = False
            raise ImapConnectionLost(f"connection to {self._host} lost: {_describe(e)}") from None
        except IMAPClientError as e:
            raise ImapError(f"IMAP command failed at {self._host}: {_describe(e)}") from None


__all__ = [
    "FetchedMessage",
    "FolderState",
    "IdleEvent",
    "ImapAuthError",
    "ImapConnectionLost",
    "ImapError",
    "ImapFolderError",
    "Mailbox",
]
