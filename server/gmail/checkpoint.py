"""The watcher's checkpoint: where it is in the folder, kept in the state dir across restarts.

One JSON file per account and folder, `<state_dir>/gmail/<account>--<folder>-<hash>.json`:

    {"version": 1, "account", "label", "uidValidity", "lastUid", "updatedAt", "notBefore",
     "recent": [<idempotency keys of the last messages handed over>]}

`lastUid` moves only after the gateway accepted (or refused for good) the message with that UID,
so a crash re-sends at most the message in flight, with the same Idempotency-Key. Writes are
atomic (temporary file, fsync, rename, fsync of the folder).

UIDs mean nothing once UIDVALIDITY changes (the folder was rebuilt). Then `reset` restarts at
the messages whose internal date is on or after the day before the last checkpoint write
(`notBefore`), and `recent` (hashes only, no content) keeps the messages already sent from being
sent again: nothing is missed and nothing is repeated.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import attrs

RECENT_KEYS = 500
_UNSAFE = re.compile(r"[^A-Za-z0-9._@+-]+")


@attrs.frozen
class Checkpoint:
    """The last UID handed over in a folder generation (UIDVALIDITY), and recent keys."""

    uid_validity: int
    last_uid: int
    updated_at: datetime
    not_before: date | None = None
    recent: tuple[str, ...] = ()

    def advanced(self, uid: int, key: str | None, now: datetime) -> Checkpoint:
        recent = self.recent
        if key is not None and key not in recent:
            recent = (*recent, key)[-RECENT_KEYS:]
        return attrs.evolve(self, last_uid=max(self.last_uid, uid), recent=recent, updated_at=now)

    def reset(self, uid_validity: int, last_uid: int, now: datetime) -> Checkpoint:
        """A new folder generation: start after `last_uid`, skip mail older than `not_before`."""
        not_before = (self.updated_at - timedelta(days=1)).date()
        return Checkpoint(uid_validity, last_uid, now, not_before, self.recent)


class CheckpointStore:
    """Loads and atomically saves the checkpoint of one account and folder."""

    def __init__(self, state_dir: Path, account: str, label: str) -> None:
        self.account = account
        self.label = label
        digest = hashlib.sha256(f"{account}\0{label}".encode()).hexdigest()[:8]
        name = f"{_slug(account)}--{_slug(label)}-{digest}.json"
        self.path = Path(state_dir) / "gmail" / name

    def load(self) -> Checkpoint | None:
        """The saved checkpoint, or None when there is none. Raises `CheckpointError`."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise CheckpointError(f"cannot read checkpoint {self.path}: {e}") from None
        try:
            not_before = data.get("notBefore")
            return Checkpoint(
                uid_validity=int(data["uidValidity"]),
                last_uid=int(data["lastUid"]),
                updated_at=datetime.fromisoformat(data["updatedAt"]),
                not_before=date.fromisoformat(not_before) if not_before else None,
                recent=tuple(str(k) for k in data.get("recent", ())),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise CheckpointError(f"checkpoint {self.path} is malformed: {e!r}") from None

    def save(self, cp: Checkpoint) -> None:
        data = {
            "version": 1,
            "account": self.account,
            "label": self.label,
            "uidValidity": cp.uid_validity,
            "lastUid": cp.last_uid,
            "updatedAt": cp.updated_at.isoformat(),
            "notBefore": cp.not_before.isoformat() if cp.not_before else None,
            "recent": list(cp.recent),
        }
        folder = self.path.parent
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".checkpoint-", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=2)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        try:
            dir_fd = os.open(folder, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(dir_fd)
        except OSError:
            pass
        finally:
            os.close(dir_fd)


class CheckpointError(Exception):
    """The checkpoint file exists but cannot be used."""


def utcnow() -> datetime:
    return datetime.now(UTC)


def _slug(text: str) -> str:
    return _UNSAFE.sub("_", text).strip("._") or "_"


__all__ = ["Checkpoint", "CheckpointError", "CheckpointStore", "utcnow"]
