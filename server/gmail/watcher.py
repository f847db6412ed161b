"""The mail watcher loop: IMAP IDLE on one folder, each new message POSTed to the gateway.

    connect + log in -> EXAMINE the folder -> catch up since the checkpoint
      -> IDLE (re-issued every `idleSeconds`, before the server's 29-minute limit)
      -> on news (or at each re-issue): catch up again -> IDLE ...

Catching up fetches every UID above the checkpoint in ascending order, parses it, POSTs it (one
message per POST, see `hookwise.server.gmail.poster`) and advances the checkpoint once the gateway took
it. Drafts (the \\Draft flag) and, on Gmail, messages labelled Spam/Trash/Draft/Sent are skipped;
so are folders that are spam, trash, drafts or sent mail (by name or special-use flag).

On first start (no checkpoint) the watcher begins after the newest message: it announces new
mail, it does not replay the mailbox.

When the connection drops, it reconnects with exponential backoff (`reconnectMinSeconds` ..
`reconnectMaxSeconds`). A refused login or a folder that cannot be watched ends the watcher at
the first connection (the configuration is wrong); later, they are retried like any failure.

The blocking IMAP client runs on one worker thread owned by the watcher; the HTTP side runs on
the event loop. Logs carry counts and message ids, never bodies, addresses or credentials.
`stop` (or cancelling the task) ends the loop cleanly: the IMAP connection is closed and a message
in flight stays un-checkpointed, to be re-sent (same Idempotency-Key) at the next start.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from ...engine.config.gmail import GmailConfig
from ..retry import Retries
from .checkpoint import Checkpoint, CheckpointError, CheckpointStore, utcnow
from .imap import (
    FetchedMessage,
    FolderState,
    ImapAuthError,
    ImapConnectionLost,
    ImapError,
    ImapFolderError,
    Mailbox,
)
from .parse import idempotency_key, message_id_of, parse_message
from .poster import Poster, Stopped, reconnect_retries, sleep_or_stop
from .secrets import SecretError, resolve_credential

log = logging.getLogger("hookwise.gmail")

T = TypeVar("T")
IDLE_SLICE_SECONDS = 1.0
"""How long one IDLE wait lasts before the loop looks at `stop` again."""


class WatcherError(Exception):
    """The watcher cannot start: wrong credential, folder that cannot be watched, bad secret."""


async def run_watcher(
    config: GmailConfig,
    *,
    hook_url: str,
    hook_token: str,
    state_dir: Path,
    stop: asyncio.Event | None = None,
    base_dir: Path | None = None,
) -> None:
    """Watch `config.label` and POST new mail to `hook_url` until `stop` is set or cancelled.

    `base_dir` is where relative `passwordFile`/`oauth2TokenFile` paths (and commands) are
    resolved: the config file's folder. Raises `WatcherError` when the first connection shows
    the configuration cannot work.
    """
    watcher = _Watcher(
        config, hook_url, hook_token, Path(state_dir), base_dir, stop or asyncio.Event()
    )
    await watcher.run()


class _Watcher:
    def __init__(
        self,
        config: GmailConfig,
        hook_url: str,
        hook_token: str,
        state_dir: Path,
        base_dir: Path | None,
        stop: asyncio.Event,
    ) -> None:
        self.config = config
        self.stop = stop
        self.base_dir = base_dir
        self.store = CheckpointStore(state_dir, config.account, config.label)
        self.poster = Poster(
            hook_url,
            hook_token,
            retry_min=float(config.retry_min_seconds),
            retry_max=float(config.retry_max_seconds),
            timeout=float(config.timeout_seconds),
        )
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hookwise-gmail-imap")
        self.connected_once = False
        self.posted = 0

    async def _call(self, fn: Callable[..., T], *args: object) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(fn, *args))

    async def run(self) -> None:
        log.info(
            "gmail: watching %s on %s:%d, folder %r",
            _mask(self.config.account),
            self.config.imap_host,
            self.config.port,
            self.config.label,
        )
        backoff = reconnect_retries(
            float(self.config.reconnect_min_seconds), float(self.config.reconnect_max_seconds)
        )
        try:
            while not self.stop.is_set():
                try:
                    await self._session(backoff)
                    return
                except Stopped:
                    return
                except CheckpointError as e:
                    raise WatcherError(str(e)) from None
                except (ImapAuthError, ImapFolderError, SecretError) as e:
                    if not self.connected_once:
                        raise WatcherError(str(e)) from None
                    log.error("gmail: %s", e)
                except (ImapError, OSError) as e:
                    log.warning("gmail: %s", e)
                delay = backoff.next()
                log.info("gmail: reconnecting in %.1f s", delay)
                if await sleep_or_stop(self.stop, delay):
                    return
        finally:
            await self.poster.aclose()
            self.executor.shutdown(wait=False)
            log.info("gmail: watcher stopped; %d messages posted", self.posted)

    async def _session(self, backoff: Retries) -> None:
        credential = await asyncio.to_thread(
            resolve_credential, self.config, base_dir=self.base_dir
        )
        box = await self._call(Mailbox.open, self.config, credential)
        try:
            state = await self._call(box.select, self.config.label, self.config.skip_folders)
            self.connected_once = True
            log.info("gmail: connected; folder has %d messages", state.exists)
            await self._catch_up(box, state)
            backoff.reset()
            idle = await self._call(lambda: box.supports_idle)
            while not self.stop.is_set():
                if idle:
                    await self._idle(box)
                else:
                    if await sleep_or_stop(self.stop, float(self.config.poll_seconds)):
                        return
                    await self._call(box.noop)
                if self.stop.is_set():
                    return
                await self._catch_up(box, state)
        finally:
            # Runs after any call still in flight on the worker thread (one thread, in order).
            await asyncio.shield(self._call(box.close))

    async def _idle(self, box: Mailbox) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(self.config.idle_seconds)
        await self._call(box.idle_start)
        event = "timeout"
        while not self.stop.is_set():
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            event = await self._call(box.idle_wait, min(IDLE_SLICE_SECONDS, remaining))
            if event != "timeout":
                break
        if event == "closed":
            raise ImapConnectionLost("the IMAP server closed the connection")
        await self._call(box.idle_stop)
        log.debug("gmail: IDLE ended (%s)", "new mail" if event == "changed" else "renewal")

    async def _catch_up(self, box: Mailbox, state: FolderState) -> None:
        cp = self.store.load()
        now = utcnow()
        if cp is None:
            last = (state.uid_next - 1) if state.uid_next else await self._call(box.last_uid)
            cp = Checkpoint(state.uid_validity, last, now)
            self.store.save(cp)
            log.info(
                "gmail: no checkpoint yet; starting after UID %d (older mail is not sent)", last
            )
            return
        if cp.uid_validity != state.uid_validity:
            cp = await self._reset(box, cp, state)
        uids = await self._call(box.uids_after, cp.last_uid)
        if not uids:
            if cp.not_before is not None:
                self.store.save(Checkpoint(cp.uid_validity, cp.last_uid, now, None, cp.recent))
            return
        log.info("gmail: %d new messages", len(uids))
        for uid in uids:
            if self.stop.is_set():
                raise Stopped
            cp = await self._deliver(box, cp, uid, state.uid_validity)

    async def _reset(self, box: Mailbox, cp: Checkpoint, state: FolderState) -> Checkpoint:
        candidate = cp.reset(state.uid_validity, 0, utcnow())
        assert candidate.not_before is not None
        uids = await self._call(box.uids_since, candidate.not_before)
        last = (min(uids) - 1) if uids else ((state.uid_next or 1) - 1)
        new = cp.reset(state.uid_validity, last, utcnow())
        self.store.save(new)
        log.warning(
            "gmail: UIDVALIDITY changed (%d -> %d); re-checking %d messages since %s",
            cp.uid_validity,
            state.uid_validity,
            len(uids),
            new.not_before,
        )
        return new

    async def _deliver(self, box: Mailbox, cp: Checkpoint, uid: int, validity: int) -> Checkpoint:
        msg = await self._call(box.fetch, uid)
        now = utcnow()
        if msg is None:
            log.info("gmail: UID %d vanished before it was fetched", uid)
            cp = cp.advanced(uid, None, now)
            self.store.save(cp)
            return cp
        mid = message_id_of(msg.raw)
        key = idempotency_key(mid, f"{self.config.account}:{validity}:{uid}")
        item_id = _item_id(msg, validity)
        reason = self._skip_reason(msg, cp, key)
        if reason is not None:
            log.info("gmail: message %s skipped (%s)", item_id, reason)
        else:
            item = parse_message(
                msg.raw,
                id=item_id,
                thread_id=format(msg.gmail_thrid, "x") if msg.gmail_thrid is not None else None,
                max_bytes=self.config.max_bytes,
                snippet_chars=self.config.snippet_chars,
                internal_date=msg.internal_date,
            )
            outcome = await self.poster.post(item, key=key, stop=self.stop)
            if outcome == "accepted":
                self.posted += 1
                log.info("gmail: message %s posted", item_id)
        cp = cp.advanced(uid, key, now)
        self.store.save(cp)
        return cp

    def _skip_reason(self, msg: FetchedMessage, cp: Checkpoint, key: str) -> str | None:
        if key in cp.recent:
            return "already posted"
        if msg.is_draft:
            return "draft"
        label = msg.skipped_label
        if label is not None:
            return f"labelled {label}"
        date = msg.internal_date
        if cp.not_before is not None and date is not None and date.date() < cp.not_before:
            return "older than the folder's reset"
        return None


def _item_id(msg: FetchedMessage, validity: int) -> str:
    """Gmail's message id (hex, as in its web URLs) or `<uidvalidity>-<uid>` elsewhere."""
    if msg.gmail_msgid is not None:
        return format(msg.gmail_msgid, "x")
    return f"{validity}-{msg.uid}"


def _mask(account: str) -> str:
    name, at, domain = account.partition("@")
    return (name[:1] + "***" + at + domain) if at else name[:1] + "***"


__all__ = ["WatcherError", "run_watcher"]
