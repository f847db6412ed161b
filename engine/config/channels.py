"""Channel identifiers: the eleven known ids, their aliases, and the `last` pseudo-channel.

How each channel is reached lives in `hookwise.server.channels`; the engine only needs to know which
names are channels, so that a payload naming an unknown one is refused at the door.
"""

from __future__ import annotations

import difflib

LAST = "last"
CHANNEL_IDS: tuple[str, ...] = (
    "whatsapp",
    "telegram",
    "discord",
    "slack",
    "mattermost",
    "signal",
    "imessage",
    "msteams",
    "webhook",
    "github",
    "gitlab",
)
ALIASES: dict[str, str] = {"imsg": "imessage", "teams": "msteams"}
#: Phone-based messengers in the order the spec lists them; a mapping's `last` falls back to the first.
PHONE_BASED: tuple[str, ...] = ("whatsapp", "signal", "imessage")


def canonical_channel(name: str) -> str | None:
    """The canonical id for a channel name or alias (case-insensitive), `last`, or None if unknown."""
    key = name.strip().lower()
    if key == LAST or key in CHANNEL_IDS:
        return key
    return ALIASES.get(key)


def unknown_channel_hint(name: str) -> str:
    """What to append to "unknown channel": `; did you mean 'telegram'?` for a close name, else
    the list of known ones."""
    known = (LAST, *CHANNEL_IDS, *ALIASES)
    close = difflib.get_close_matches(name.strip().lower(), known, n=1, cutoff=0.6)
    return (
        f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join((LAST, *CHANNEL_IDS))})"
    )
