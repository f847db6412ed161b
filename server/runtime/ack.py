"""Heartbeat acknowledgments: replies that only say "nothing needs attention".

A reply is an acknowledgment when `HEARTBEAT_OK` stands at its start or its end (markup such as
`**HEARTBEAT_OK**` or `` `HEARTBEAT_OK` `` tolerated) and at most `max_chars` other characters
remain. Such replies are recorded but never delivered.
"""

from __future__ import annotations

import re

TOKEN = "HEARTBEAT_OK"
_MARKUP = r"[\s*_`~>#\[\]().!:-]*"
_AT_START = re.compile(rf"^{_MARKUP}{TOKEN}{_MARKUP}")
_AT_END = re.compile(rf"{_MARKUP}{TOKEN}{_MARKUP}$")


def is_ack(reply: str, *, max_chars: int = 300) -> bool:
    text = reply.strip()
    for pattern in (_AT_START, _AT_END):
        m = pattern.search(text)
        if m:
            rest = text[: m.start()] + text[m.end() :]
            if len(rest.strip()) <= max_chars:
                return True
    return False
