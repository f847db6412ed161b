"""Markdown to each channel's dialect, rendered from markdown-it-py's token tree.

Agents answer in CommonMark (with GFM tables and strikethrough); bare URLs are recognised by
linkify. `Renderer` walks the syntax tree and asks its dialect how to write each node, so a URL
with parentheses, `***both***`, `~~~` fences, block quotes and tables come out as each channel
expects. The dialects:

- `TelegramHTML`: `parse_mode=HTML` within Telegram's nesting rules: only bold, italic and
  strikethrough nest freely; links, code, pre and blockquote never contain each other (code in a
  link label is plain text, a link in a quote is written `label (url)`). Tables become `<pre>`.
- `SlackMrkdwn`: `*b*`, `_i_`, `~s~`, `<url|label>`, `>` quotes, bullets; `& < >` escaped.
- `WhatsApp`: `*b*`, `_i_`, `~s~`, monospace, `>` quotes; links written `label (url)`.
- `Markdown`: markdown again, for Discord (fences as backticks, tables as code blocks), Microsoft
  Teams (the same) and Mattermost (`tables=True`: it renders tables itself).
- `SignalStyled`: signal-cli REST's `text_mode: styled`: `**b**`, `*i*`, `~s~`, `` `mono` ``,
  never nested (its parser does not nest styles: an outer style around a styled inner part is
  left out). The parser takes every `*`, `|`, `~` and backtick for markup, so a text holding one
  of them literally is sent as `Plain` instead (see `signal_styled`).
- `Plain`: no markup at all, links `label (url)`: Signal (when styles cannot be used) and iMessage.

Raw HTML in the source is text, never markup.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import ClassVar

import attrs
from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

_PARSER = MarkdownIt("commonmark", {"linkify": True, "html": True}).enable(
    ["linkify", "table", "strikethrough"]
)
_LANG = re.compile(r"[\w+#.-]{1,32}")


@attrs.frozen
class Ctx:
    """Where a node sits: inside a link label, a quote, bold text."""

    link: bool = False
    quote: bool = False
    bold: bool = False


class Dialect:
    """How one channel writes each construct; the defaults write plain text."""

    bullet: ClassVar[str] = "- "

    def escape(self, text: str) -> str:
        return text

    def strong(self, inner: str, ctx: Ctx) -> str:
        return inner

    def em(self, inner: str, ctx: Ctx) -> str:
        return inner

    def strike(self, inner: str, ctx: Ctx) -> str:
        return inner

    def code(self, code: str, ctx: Ctx) -> str:
        return self.escape(code)

    def link(self, label: str, href: str, ctx: Ctx, *, bare: bool) -> str:
        return _labelled(label, href, self.escape)

    def heading(self, inner: str, level: int) -> str:
        return inner

    def quote(self, body: str, ctx: Ctx) -> str:
        return body

    def pre(self, lang: str, code: str, ctx: Ctx) -> str:
        return self.escape(code)

    def table(self, rows: list[list[str]], ctx: Ctx) -> str:
        return self.pre("", _grid(rows), ctx)

    def rule(self) -> str:
        return "———"


def _labelled(label: str, href: str, escape: Callable[[str], str]) -> str:
    """A link as `label (url)`, or the URL alone when the label is the URL."""
    url = escape(href)
    return url if label in (url, escape(href.removeprefix("mailto:"))) else f"{label} ({url})"


def _grid(rows: list[list[str]]) -> str:
    """Table rows as aligned columns of plain text, a rule under the header."""
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    sizes = [max(len(r[i]) for r in rows) for i in range(width)]
    lines = [" | ".join(c.ljust(sizes[i]) for i, c in enumerate(r)).rstrip() for r in rows]
    lines.insert(1, "-+-".join("-" * s for s in sizes))
    return "\n".join(lines)


class Plain(Dialect):
    """Signal and iMessage: the text without markup."""


#: what signal-cli REST's styled mode reads as markup wherever it stands
SIGNAL_CONTROLS = frozenset("*|~`")


class SignalStyled(Dialect):
    """Signal's styled text: one style per span, no nesting (see the module docstring)."""

    @staticmethod
    def _wrap(mark: str, inner: str) -> str:
        if not inner or not SIGNAL_CONTROLS.isdisjoint(inner):
            return inner  # empty, or already styled inside: the parser cannot nest
        return f"{mark}{inner}{mark}"

    def strong(self, inner: str, ctx: Ctx) -> str:
        return self._wrap("**", inner)

    def em(self, inner: str, ctx: Ctx) -> str:
        return self._wrap("*", inner)

    def strike(self, inner: str, ctx: Ctx) -> str:
        return self._wrap("~", inner)

    def code(self, code: str, ctx: Ctx) -> str:
        return self._wrap("`", code)

    def heading(self, inner: str, level: int) -> str:
        return self._wrap("**", inner)

    def pre(self, lang: str, code: str, ctx: Ctx) -> str:
        return self._wrap("`", code)


class TelegramHTML(Dialect):
    bullet = "• "

    def escape(self, text: str) -> str:
        return html.escape(text, quote=False)

    def strong(self, inner: str, ctx: Ctx) -> str:
        return inner if ctx.bold else f"<b>{inner}</b>"

    def em(self, inner: str, ctx: Ctx) -> str:
        return f"<i>{inner}</i>"

    def strike(self, inner: str, ctx: Ctx) -> str:
        return f"<s>{inner}</s>"

    def code(self, code: str, ctx: Ctx) -> str:
        if ctx.link or ctx.quote:  # code can be part of neither a link nor a quote
            return self.escape(code)
        return f"<code>{self.escape(code)}</code>"

    def link(self, label: str, href: str, ctx: Ctx, *, bare: bool) -> str:
        if bare:  # Telegram links a bare URL itself
            return self.escape(href)
        if ctx.quote:
            return _labelled(label, href, self.escape)
        return f'<a href="{html.escape(href, quote=True)}">{label}</a>'

    def heading(self, inner: str, level: int) -> str:
        return f"<b>{inner}</b>"

    def quote(self, body: str, ctx: Ctx) -> str:
        return body if ctx.quote else f"<blockquote>{body}</blockquote>"

    def pre(self, lang: str, code: str, ctx: Ctx) -> str:
        if ctx.quote:
            return self.escape(code)
        attr = f' class="language-{html.escape(lang)}"' if _LANG.fullmatch(lang) else ""
        return f"<pre><code{attr}>{self.escape(code)}</code></pre>"


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class SlackMrkdwn(Dialect):
    bullet = "• "

    def escape(self, text: str) -> str:
        return _slack_escape(text)

    def strong(self, inner: str, ctx: Ctx) -> str:
        return inner if ctx.bold else f"*{inner}*"

    def em(self, inner: str, ctx: Ctx) -> str:
        return f"_{inner}_"

    def strike(self, inner: str, ctx: Ctx) -> str:
        return f"~{inner}~"

    def code(self, code: str, ctx: Ctx) -> str:
        return f"`{self.escape(code)}`"

    def link(self, label: str, href: str, ctx: Ctx, *, bare: bool) -> str:
        url = self.escape(href)
        if bare:
            return f"<{url}>"
        return f"<{url}|{label.replace('|', '¦')}>"

    def heading(self, inner: str, level: int) -> str:
        return f"*{inner}*"

    def quote(self, body: str, ctx: Ctx) -> str:
        return "\n".join("&gt; " + line for line in body.split("\n"))

    def pre(self, lang: str, code: str, ctx: Ctx) -> str:
        return f"```\n{self.escape(code)}\n```"


class WhatsApp(Dialect):
    def strong(self, inner: str, ctx: Ctx) -> str:
        return inner if ctx.bold else f"*{inner}*"

    def em(self, inner: str, ctx: Ctx) -> str:
        return f"_{inner}_"

    def strike(self, inner: str, ctx: Ctx) -> str:
        return f"~{inner}~"

    def code(self, code: str, ctx: Ctx) -> str:
        return f"`{code}`"

    def heading(self, inner: str, level: int) -> str:
        return f"*{inner}*"

    def quote(self, body: str, ctx: Ctx) -> str:
        return "\n".join("> " + line for line in body.split("\n"))

    def pre(self, lang: str, code: str, ctx: Ctx) -> str:
        return f"```{code}```"


_MD_SPECIAL = re.compile(r"([\\`*_~|\[\]<>])")


@attrs.frozen
class Markdown(Dialect):
    """Markdown for renderers that read it themselves; `tables` keeps pipe tables as they are."""

    tables: bool = False

    def escape(self, text: str) -> str:
        return _MD_SPECIAL.sub(r"\\\1", text)

    def strong(self, inner: str, ctx: Ctx) -> str:
        return inner if ctx.bold else f"**{inner}**"

    def em(self, inner: str, ctx: Ctx) -> str:
        return f"*{inner}*"

    def strike(self, inner: str, ctx: Ctx) -> str:
        return f"~~{inner}~~"

    def code(self, code: str, ctx: Ctx) -> str:
        ticks = "``" if "`" in code else "`"
        pad = " " if code.startswith("`") or code.endswith("`") else ""
        return f"{ticks}{pad}{code}{pad}{ticks}"

    def link(self, label: str, href: str, ctx: Ctx, *, bare: bool) -> str:
        if bare:
            return href
        url = href.replace(" ", "%20")
        if url.count("(") != url.count(")"):
            url = url.replace("(", "%28").replace(")", "%29")
        return f"[{label}]({url})"

    def heading(self, inner: str, level: int) -> str:
        return f"{'#' * level} {inner}"

    def quote(self, body: str, ctx: Ctx) -> str:
        return "\n".join("> " + line for line in body.split("\n"))

    def pre(self, lang: str, code: str, ctx: Ctx) -> str:
        fence = "````" if "```" in code else "```"
        return f"{fence}{lang}\n{code}\n{fence}"

    def table(self, rows: list[list[str]], ctx: Ctx) -> str:
        if not self.tables:
            return self.pre("", _grid(rows), ctx)
        cells = [[c.replace("|", "\\|") for c in r] for r in rows]
        lines = ["| " + " | ".join(r) + " |" for r in cells]
        lines.insert(1, "|" + "|".join("---" for _ in cells[0]) + "|")
        return "\n".join(lines)


class Renderer:
    """Renders markdown source in one dialect."""

    def __init__(self, dialect: Dialect) -> None:
        self.d = dialect
        # an image's alt text is rendered as plain text, whatever the dialect
        self._plain = self if isinstance(dialect, Plain) else Renderer(Plain())

    def __call__(self, source: str) -> str:
        root = SyntaxTreeNode(_PARSER.parse(source.replace("\x00", "")))
        return self._blocks(root.children, Ctx()).strip("\n")

    # --- blocks ---

    def _blocks(self, nodes: list[SyntaxTreeNode], ctx: Ctx, tight: bool = False) -> str:
        """Blocks separated as in the source: a blank line where it had one, else a newline."""
        out: list[str] = []
        end: int | None = None
        for node in nodes:
            rendered = self._block(node, ctx)
            if rendered:
                start = node.map[0] if node.map else None
                if out:
                    out.append("\n" if tight or (start is not None and start == end) else "\n\n")
                out.append(rendered)
            end = node.map[1] if node.map else None
        return "".join(out)

    def _block(self, node: SyntaxTreeNode, ctx: Ctx) -> str:
        d, kind = self.d, node.type
        if kind == "paragraph":
            return self._inline(node.children, ctx)
        if kind == "heading":
            level = int(node.tag[1:]) if node.tag[1:].isdigit() else 1
            return d.heading(self._inline(node.children, attrs.evolve(ctx, bold=True)), level)
        if kind == "blockquote":
            return d.quote(self._blocks(node.children, attrs.evolve(ctx, quote=True)), ctx)
        if kind in ("bullet_list", "ordered_list"):
            return self._list(node, ctx)
        if kind in ("fence", "code_block"):
            lang = node.info.split()[0] if node.info.strip() else ""
            return d.pre(lang, node.content.rstrip("\n"), ctx)
        if kind == "table":
            return d.table(self._rows(node), ctx)
        if kind == "hr":
            return d.rule()
        if kind == "html_block":
            return d.escape(node.content.rstrip("\n"))
        return self._blocks(node.children, ctx)

    def _list(self, node: SyntaxTreeNode, ctx: Ctx) -> str:
        start = int(node.attrs.get("start", 1) or 1) if node.type == "ordered_list" else 0
        lines = []
        for i, item in enumerate(node.children):
            marker = f"{start + i}. " if node.type == "ordered_list" else self.d.bullet
            body = self._blocks(item.children, ctx, tight=True)
            indent = " " * len(marker)
            lines.append(marker + body.replace("\n", "\n" + indent))
        return "\n".join(lines)

    def _rows(self, table: SyntaxTreeNode) -> list[list[str]]:
        renderer = self if isinstance(self.d, Markdown) and self.d.tables else Renderer(Plain())
        rows = []
        for section in table.children:
            for tr in section.children:
                rows.append([renderer._inline(cell.children, Ctx()) for cell in tr.children])
        return rows

    # --- inline ---

    def _inline(self, nodes: list[SyntaxTreeNode], ctx: Ctx) -> str:
        out = []
        for node in nodes:
            if node.type == "inline":
                out.append(self._inline(node.children, ctx))
            else:
                out.append(self._span(node, ctx))
        return "".join(out)

    def _span(self, node: SyntaxTreeNode, ctx: Ctx) -> str:
        d, kind = self.d, node.type
        if kind == "text":
            return d.escape(node.content)
        if kind in ("softbreak", "hardbreak"):
            return "\n"
        if kind == "strong":
            return d.strong(self._inline(node.children, attrs.evolve(ctx, bold=True)), ctx)
        if kind == "em":
            return d.em(self._inline(node.children, ctx), ctx)
        if kind == "s":
            return d.strike(self._inline(node.children, ctx), ctx)
        if kind == "code_inline":
            return d.code(node.content, ctx)
        if kind == "link":
            href = str(node.attrs.get("href", ""))
            bare = node.markup in ("linkify", "autolink")
            label = self._inline(node.children, attrs.evolve(ctx, link=True))
            return d.link(label, href, ctx, bare=bare)
        if kind == "image":
            alt = self._plain._inline(node.children, ctx) or "image"
            return d.link(d.escape(alt), str(node.attrs.get("src", "")), ctx, bare=False)
        if kind == "html_inline":
            return d.escape(node.content)
        return self._inline(node.children, ctx)


def telegram_visible_text(rendered: str) -> str:
    """The text a Telegram user sees for our HTML: tags removed, entities decoded."""
    return html.unescape(re.sub(r"<[^>]*>", "", rendered))


_ANCHOR = re.compile(r'<a href="([^"]*)">(.*?)</a>', re.S)


def telegram_plain_text(rendered: str) -> str:
    """Our HTML as plain text, for when Telegram refuses its entities: links as `label (url)`."""
    return telegram_visible_text(_ANCHOR.sub(lambda m: f"{m[2]} ({m[1]})", rendered))


__all__ = [
    "Dialect",
    "Markdown",
    "Plain",
    "Renderer",
    "SlackMrkdwn",
    "TelegramHTML",
    "WhatsApp",
    "telegram_plain_text",
    "telegram_visible_text",
]
