"""What a model sees of an MCP tool result: text, capped in bytes with a visible marker.

Text blocks are joined; `structuredContent` is written as JSON when no text block carries it;
images, audio and resources become a short description (the providers' tool results take text).
A result longer than the cap is cut at a character boundary and ends with
`[hookwise: result truncated: N of M bytes shown]`, so the model knows it saw part of it.
"""

from __future__ import annotations

import json
from typing import Any

#: the JSON-RPC error with which the stdio transport answers a message it cut
#: (`hookwise.server.tools.stdio`), and its data's key for the message's full size
CUT_CODE = -32099
CUT_KEY = "hookwise/cut"


def result_text(result: Any) -> str:
    """The text of an MCP `CallToolResult`."""
    parts: list[str] = []
    for block in getattr(result, "content", None) or ():
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {getattr(block, 'mime_type', '') or ''}, not shown]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}: {getattr(block, 'name', '') or ''}]")
        elif kind == "resource":
            inner = block.resource
            text = getattr(inner, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource {inner.uri}, binary]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    return "\n".join(parts)


def cap(text: str, max_bytes: int, cut_from: int | None = None) -> tuple[str, int, bool]:
    """`text` cut to `max_bytes` (UTF-8) with a marker; its full size; whether it was cut.
    `cut_from`: the text is the start of a message of that many bytes that the transport cut
    (`hookwise.server.tools.stdio`), so it is marked cut whatever its length."""
    data = text.encode("utf-8")
    total = len(data) if cut_from is None else max(cut_from, len(data))
    if len(data) <= max_bytes and cut_from is None:
        return text, len(data), False
    shown = data[:max_bytes].decode("utf-8", errors="ignore")
    kept = len(shown.encode("utf-8"))
    marker = f"\n[hookwise: result truncated: {kept} of {total} bytes shown]"
    return shown + marker, total, True
