"""What the model sees: the system prompts, the heartbeat prompt, and the summary lines.

Kept in one place so that the wording (and the `HEARTBEAT_OK` contract the acknowledgment filter
relies on) is easy to find and to change.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...engine.times import iso_utc
from ..store.base import EventRecord
from .ack import TOKEN
from .digest import digest

RUN_SYSTEM = (
    "You are an AI agent handling an event that arrived through a webhook, in an isolated "
    "session. Answer concisely; your reply may be delivered to a person on a messaging channel."
)
MAIN_SYSTEM = (
    "You are the agent's main session. System events (webhooks, summaries of isolated runs) are "
    "queued for you and shown at each heartbeat."
)
SUMMARY_MAX_CHARS = 2000
_WS = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def safe_name(name: str) -> str:
    """A hook name fit for the start of a summary line: one line, no control characters."""
    cleaned = _WS.sub(" ", _CONTROL.sub(" ", name)).strip()[:80]
    return cleaned or "Hook"


def summary_line(name: str, state: str, text: str) -> str:
    """`Hook <name>: <summary>` on success, `Hook <name> (<state>): <error>` otherwise; a run
    without a name (the default, `Hook`) is `Hook: <summary>`, not `Hook Hook: ...`."""
    body = text.strip()
    if len(body) > SUMMARY_MAX_CHARS:
        body = body[: SUMMARY_MAX_CHARS - 1] + "…"
    shown = safe_name(name)
    label = "Hook" if shown == "Hook" else f"Hook {shown}"
    if state != "succeeded":
        label += f" ({state})"
    return f"{label}: {body}"


def heartbeat_prompt(events: Sequence[EventRecord], reason: str, now: float) -> str:
    """What a heartbeat asks: its reason and time, the digest of the pending events (bounded:
    see `digest`), and the acknowledgment contract."""
    when = iso_utc(now, sep=" ", timespec="seconds", suffix=" UTC")
    return "\n".join(
        [
            f"Heartbeat check ({reason}, {when}).",
            *digest(events),
            f"If nothing needs your attention, reply with exactly {TOKEN}.",
        ]
    )
