"""Message text for channels: splitting under a length limit, and markdown per channel dialect.

Agents answer in common markdown. `split_text` cuts a long reply into parts no longer than a
limit, preferring paragraph breaks, then line breaks, then spaces, and keeping fenced code blocks
(backtick or tilde fences) intact across parts (a block cut in two is closed and reopened).
`render_parts` splits the markdown source, renders each part in a channel's dialect, and splits
again any part whose rendering is over the limit, so limits hold after escaping.

The converters render from markdown-it-py's token tree (`hookwise.server.channels.markdown`):
Telegram HTML, Slack mrkdwn, WhatsApp, Discord/Teams markdown, Mattermost markdown, plain text.
"""

from __future__ import annotations

from collections.abc import Callable

from .markdown import (
    SIGNAL_CONTROLS,
    Markdown,
    Plain,
    Renderer,
    SignalStyled,
    SlackMrkdwn,
    TelegramHTML,
    WhatsApp,
    telegram_visible_text,
)

# --- splitting -------------------------------------------------------------------------------


def split_text(text: str, limit: int) -> list[str]:
    """Split `text` into parts of at most `limit` characters, in order; blank text gives [].

    Cuts at the last paragraph break that fits, else the last line break, else the last space,
    else hard at the limit. A fenced code block open at a cut is closed in that part and reopened
    (with its language) at the start of the next.
    """
    if limit < 16:
        raise ValueError("limit must be at least 16 characters")
    rest = text.strip("\n").rstrip()
    parts: list[str] = []
    fence: str | None = None  # the opening line of a code block the previous part left open
    reserve = 4 if "```" in rest or "~~~" in rest else 0
    while rest:
        prefix = fence + "\n" if fence else ""
        if len(prefix) + len(rest) <= limit:
            parts.append(prefix + rest)
            break
        budget = limit - len(prefix) - reserve
        if budget < limit // 2:  # an absurdly long fence line: give up reopening it
            prefix, fence, budget = "", None, limit - reserve
        cut = _cut(rest, budget)
        piece, rest = rest[:cut].rstrip(), rest[cut:]
        rest = rest.lstrip("\n") if rest.startswith("\n") else rest.lstrip(" ")
        fence = _fence_after(piece, fence)
        body = prefix + piece + ("\n" + _marker(fence) if fence else "")
        if body.strip():
            parts.append(body)
    return [p for p in parts if p.strip()]


def _cut(text: str, budget: int) -> int:
    window = text[: budget + 1]
    for sep in ("\n\n", "\n", " "):
        at = window.rfind(sep)
        if at > 0 and window[:at].strip():
            return at
    return budget


def _marker(fence: str) -> str:
    return fence[:3]


def _fence_after(piece: str, fence: str | None) -> str | None:
    for line in piece.split("\n"):
        stripped = line.strip()
        if fence is None and stripped.startswith(("```", "~~~")):
            fence = stripped
        elif fence is not None and stripped.startswith(_marker(fence)) and not stripped[3:].strip():
            fence = None
    return fence


# --- rendering ---


def render_parts(
    text: str,
    limit: int,
    render: Callable[[str], str],
    measure: Callable[[str], int] = len,
) -> list[str]:
    """`text` split and rendered so that every rendered part measures at most `limit`.

    The markdown source is split (so fences and paragraphs stay whole), each part rendered, and
    a part whose rendering is still too long (escaping lengthens text: `&` is `&amp;`) is split
    again with a proportionally smaller budget: the split happens after escaping, as it counts.
    """
    out: list[str] = []
    for piece in split_text(text, limit):
        out.extend(_render_within(piece, limit, render, measure))
    return out


def _render_within(
    piece: str, limit: int, render: Callable[[str], str], measure: Callable[[str], int]
) -> list[str]:
    rendered = render(piece)
    size = measure(rendered)
    if size <= limit:
        return [rendered] if rendered.strip() else []
    budget = max(16, min(len(piece) - 1, int(len(piece) * limit / size) - 8))
    if budget >= len(piece):  # cannot shrink: cut the rendering itself (plain dialects only)
        return [rendered[i : i + limit] for i in range(0, len(rendered), limit)]
    parts: list[str] = []
    for sub in split_text(piece, budget):
        parts.extend(_render_within(sub, limit, render, measure))
    return parts


_TELEGRAM = Renderer(TelegramHTML())
_SLACK = Renderer(SlackMrkdwn())
_WHATSAPP = Renderer(WhatsApp())
_PLAIN = Renderer(Plain())
_SIGNAL = Renderer(SignalStyled())
_DISCORD = Renderer(Markdown())
_MATTERMOST = Renderer(Markdown(tables=True))


def markdown_to_telegram_html(text: str) -> str:
    """Markdown as Telegram HTML (`parse_mode=HTML`) within Telegram's nesting rules."""
    return _TELEGRAM(text)


def markdown_to_slack(text: str) -> str:
    """Markdown as Slack mrkdwn: `*b*`, `_i_`, `~s~`, `<url|label>`, bullets, `& < >` escaped."""
    return _SLACK(text)


def markdown_to_whatsapp(text: str) -> str:
    """Markdown as WhatsApp formatting: `*b*`, `_i_`, `~s~`, monospace; links as `label (url)`."""
    return _WHATSAPP(text)


def markdown_to_plain(text: str) -> str:
    """Markdown with its markup removed; links as `label (url)`."""
    return _PLAIN(text)


def signal_styled(text: str) -> bool:
    """Whether `text` can go in Signal's styled mode: only when its plain rendering holds none of
    the characters the styled mode takes for markup (they would vanish from the message)."""
    return SIGNAL_CONTROLS.isdisjoint(_PLAIN(text))


def markdown_to_signal(text: str) -> str:
    """Markdown as Signal's styled text (`text_mode: styled`); see `signal_styled`."""
    return _SIGNAL(text)


def markdown_to_discord(text: str) -> str:
    """Markdown as Discord and Microsoft Teams read it: backtick fences, tables as code blocks."""
    return _DISCORD(text)


def markdown_to_mattermost(text: str) -> str:
    """Markdown as Mattermost reads it: like Discord's, but pipe tables stay tables."""
    return _MATTERMOST(text)


def telegram_length(rendered: str) -> int:
    """The length Telegram checks (1-4096): the text after entity parsing."""
    return len(telegram_visible_text(rendered))


__all__ = [
    "markdown_to_discord",
    "markdown_to_mattermost",
    "markdown_to_plain",
    "markdown_to_slack",
    "markdown_to_telegram_html",
    "markdown_to_whatsapp",
    "render_parts",
    "split_text",
    "telegram_length",
    "telegram_visible_text",
]
