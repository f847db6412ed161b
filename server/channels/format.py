"""Message text for channels: splitting under a length limit, and markdown per channel dialect.

Agents answer in common markdown. `split_text` cuts a long reply into parts no longer than a
channel's limit, preferring paragraph breaks, then line breaks, then spaces, and keeping fenced
code blocks intact across parts (a block cut in two is closed and reopened). Splitting works on the
markdown source, before conversion: every converter here yields text whose visible length is at
most the source's, and each channel's limit is on the visible text (Telegram counts after entity
parsing) or far above the limit we choose (Slack).

Converters, one per dialect:
- `markdown_to_telegram_html`: Telegram `parse_mode=HTML` (escaping `& < >`; chosen over
  MarkdownV2, whose escaping rules are easy to get wrong and reject the whole message).
- `markdown_to_slack`: Slack mrkdwn (`**b**` -> `*b*`, `[t](u)` -> `<u|t>`, `& < >` escaped).
- `markdown_to_whatsapp`: WhatsApp formatting (`*b*`, `_i_`, `~s~`, links as `text (url)`).
- `markdown_to_plain`: plain text, for Signal and iMessage.
Discord, Microsoft Teams and Mattermost render markdown themselves and get the source unchanged.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

import attrs

# --- splitting -------------------------------------------------------------------------------

_CLOSE_FENCE = "\n```"


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
    reserve = len(_CLOSE_FENCE) if "```" in rest else 0
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
        body = prefix + piece + (_CLOSE_FENCE if fence else "")
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


def _fence_after(piece: str, fence: str | None) -> str | None:
    for line in piece.split("\n"):
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = None if fence is not None else stripped
    return fence


# --- markdown --------------------------------------------------------------------------------


@attrs.frozen
class _Dialect:
    escape: Callable[[str], str]
    bold: Callable[[str], str]
    italic: Callable[[str], str]
    strike: Callable[[str], str]
    code: Callable[[str], str]  # receives raw code text
    pre: Callable[[str, str], str]  # (language, raw code text)
    link: Callable[[str, str], str]  # (escaped label, raw url)
    heading: Callable[[str], str]
    bullet: str | None = None  # replacement for a "- " list marker, or None to keep it


_FENCE = re.compile(r"^[ \t]*```([^\n`]*)\n(.*?)(?:\n[ \t]*```[ \t]*$|\Z)", re.M | re.S)
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^\s)]+|mailto:[^\s)]+)\)")
_URL = re.compile(r"\b(?:https?://|mailto:)[^\s<>]+[^\s<>.,;:!?)\]'\"]")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_ITALIC_STAR = re.compile(r"(?<![*\w])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![*\w])")
_ITALIC_UNDER = re.compile(r"(?<![_\w])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![_\w])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_BULLET = re.compile(r"^([ \t]*)[-*+][ \t]+(?=\S)", re.M)
_SLOT = re.compile("\x00(\\d+)\x00")


def _convert(text: str, d: _Dialect) -> str:
    slots: list[str] = []

    def keep(rendered: str) -> str:
        slots.append(rendered)
        return f"\x00{len(slots) - 1}\x00"

    text = text.replace("\x00", "")
    text = _FENCE.sub(lambda m: keep(d.pre(m.group(1).strip(), m.group(2))), text)
    text = _INLINE_CODE.sub(lambda m: keep(d.code(m.group(1))), text)
    text = _LINK.sub(lambda m: keep(d.link(_inline(m.group(1), d), m.group(2))), text)
    text = _URL.sub(lambda m: keep(d.escape(m.group(0))), text)
    text = _HEADING.sub(lambda m: keep(d.heading(_inline(_unbold(m.group(1)), d))), text)
    text = _inline(text, d, bullets=True)
    while _SLOT.search(text):  # links hold slots of their own (code in a label)
        text = _SLOT.sub(lambda m: slots[int(m.group(1))], text)
    return text


def _unbold(text: str) -> str:
    return _BOLD.sub(lambda m: m.group(2), text)


def _inline(text: str, d: _Dialect, *, bullets: bool = False) -> str:
    text = d.escape(text)
    if bullets and d.bullet is not None:
        bullet = d.bullet
        text = _BULLET.sub(lambda m: m.group(1) + bullet, text)
    # Italic before bold: the italic patterns never match `**`, and the bold replacements of
    # some dialects (`*b*`) would otherwise be read as italic.
    text = _ITALIC_STAR.sub(lambda m: d.italic(m.group(1)), text)
    text = _ITALIC_UNDER.sub(lambda m: d.italic(m.group(1)), text)
    text = _BOLD.sub(lambda m: d.bold(m.group(2)), text)
    return _STRIKE.sub(lambda m: d.strike(m.group(1)), text)


def _same(s: str) -> str:
    return s


def _html(s: str) -> str:
    return html.escape(s, quote=False)


def _slack_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _label_link(label: str, url: str) -> str:
    bare = url.removeprefix("mailto:")
    return url if label in (url, bare) else f"{label} ({url})"


def _telegram_pre(lang: str, code: str) -> str:
    attr = f' class="language-{html.escape(lang)}"' if re.fullmatch(r"[\w+#.-]+", lang) else ""
    return f"<pre><code{attr}>{_html(code)}</code></pre>"


_TELEGRAM = _Dialect(
    escape=_html,
    bold=lambda s: f"<b>{s}</b>",
    italic=lambda s: f"<i>{s}</i>",
    strike=lambda s: f"<s>{s}</s>",
    code=lambda s: f"<code>{_html(s)}</code>",
    pre=_telegram_pre,
    link=lambda label, url: f'<a href="{html.escape(url, quote=True)}">{label}</a>',
    heading=lambda s: f"<b>{s}</b>",
)

_SLACK = _Dialect(
    escape=_slack_escape,
    bold=lambda s: f"*{s}*",
    italic=lambda s: f"_{s}_",
    strike=lambda s: f"~{s}~",
    code=lambda s: f"`{_slack_escape(s)}`",
    pre=lambda _lang, s: f"```\n{_slack_escape(s)}\n```",
    link=lambda label, url: f"<{_slack_escape(url)}|{label.replace('|', '¦')}>",
    heading=lambda s: f"*{s}*",
    bullet="• ",
)

_WHATSAPP = _Dialect(
    escape=_same,
    bold=lambda s: f"*{s}*",
    italic=lambda s: f"_{s}_",
    strike=lambda s: f"~{s}~",
    code=lambda s: f"`{s}`",
    pre=lambda _lang, s: f"```{s}```",
    link=_label_link,
    heading=lambda s: f"*{s}*",
)

_PLAIN = _Dialect(
    escape=_same,
    bold=_same,
    italic=_same,
    strike=_same,
    code=_same,
    pre=lambda _lang, s: s,
    link=_label_link,
    heading=_same,
)


def markdown_to_telegram_html(text: str) -> str:
    """Markdown as Telegram HTML (`parse_mode=HTML`): b, i, s, code, pre, a; `& < >` escaped."""
    return _convert(text, _TELEGRAM)


def markdown_to_slack(text: str) -> str:
    """Markdown as Slack mrkdwn: `*b*`, `_i_`, `~s~`, `<url|label>`, bullets, `& < >` escaped."""
    return _convert(text, _SLACK)


def markdown_to_whatsapp(text: str) -> str:
    """Markdown as WhatsApp formatting: `*b*`, `_i_`, `~s~`, monospace; links as `label (url)`."""
    return _convert(text, _WHATSAPP)


def markdown_to_plain(text: str) -> str:
    """Markdown with its markup removed; links as `label (url)`."""
    return _convert(text, _PLAIN)


__all__ = [
    "markdown_to_plain",
    "markdown_to_slack",
    "markdown_to_telegram_html",
    "markdown_to_whatsapp",
    "split_text",
]
