"""Splitting long messages and converting markdown for each channel's dialect."""

from __future__ import annotations

import httpx
import pytest

from hookwise.server.channels.base import retry_after_header
from hookwise.server.channels.format import (
    markdown_to_discord,
    markdown_to_mattermost,
    markdown_to_plain,
    markdown_to_slack,
    markdown_to_telegram_html,
    markdown_to_whatsapp,
    render_parts,
    split_text,
)


def test_text_under_the_limit_is_one_part():
    assert split_text("hello\n\nworld", 100) == ["hello\n\nworld"]


def test_blank_text_is_no_parts():
    assert split_text(" \n\n  ", 100) == []


def test_splits_at_the_last_paragraph_break_that_fits():
    text = "a" * 30 + "\n\n" + "b" * 30 + "\n" + "c" * 30
    assert split_text(text, 70) == ["a" * 30, "b" * 30 + "\n" + "c" * 30]


def test_splits_at_a_line_break_when_no_paragraph_fits():
    text = "a" * 30 + "\n" + "b" * 30 + "\n" + "c" * 30
    assert split_text(text, 70) == ["a" * 30 + "\n" + "b" * 30, "c" * 30]


def test_splits_at_a_space_when_no_line_fits():
    assert split_text("alpha beta gamma delta", 16) == ["alpha beta gamma", "delta"]


def test_a_word_longer_than_the_limit_is_cut_hard():
    assert split_text("x" * 40, 16) == ["x" * 16, "x" * 16, "x" * 8]


def test_a_code_block_cut_in_two_is_closed_and_reopened_with_its_language():
    lines = "\n".join(f"line {i}" for i in range(12))
    parts = split_text(f"```py\n{lines}\n```\nafter", 40)
    assert all(len(p) <= 40 for p in parts)
    assert all(p.startswith("```py\n") for p in parts)
    assert all(p.count("```") == 2 for p in parts)
    assert parts[-1].endswith("```\nafter")
    body = [ln for p in parts for ln in p.split("\n") if ln.startswith("line ")]
    assert body == [f"line {i}" for i in range(12)]


@pytest.mark.parametrize("limit", [16, 50, 333, 2000])
def test_parts_respect_the_limit_and_keep_every_word_in_order(limit):
    words = [f"w{i}" for i in range(3000)]
    text = "\n\n".join(" ".join(words[i : i + 37]) for i in range(0, 3000, 37))
    parts = split_text(text, limit)
    assert all(len(p) <= limit for p in parts)
    assert " ".join(parts).split() == words


@pytest.mark.parametrize(
    "md, expected",
    [
        ("**b** *i* _i_ ~~s~~", "<b>b</b> <i>i</i> <i>i</i> <s>s</s>"),
        ("a < b & c > d", "a &lt; b &amp; c &gt; d"),
        ("`<tag>` and snake_case_name", "<code>&lt;tag&gt;</code> and snake_case_name"),
        ("[site](https://e.com/?a=1&b=\"2\")", '<a href="https://e.com/?a=1&amp;b=%222%22">site</a>'),
        ("## Heading **x**", "<b>Heading x</b>"),
        ("```\n**not bold**\n```", "<pre><code>**not bold**</code></pre>"),
        ("https://e.com/_a_b_", "https://e.com/_a_b_"),
    ],
)  # fmt: skip
def test_markdown_to_telegram_html(md, expected):
    assert markdown_to_telegram_html(md) == expected


@pytest.mark.parametrize(
    "md, expected",
    [
        ("**bold** and *it*", "*bold* and _it_"),
        ("~~gone~~", "~gone~"),
        ("[docs](https://e.com/a?x=1&y=2)", "<https://e.com/a?x=1&amp;y=2|docs>"),
        ("<!channel> & co", "&lt;!channel&gt; &amp; co"),
        ("# Title", "*Title*"),
        ("- one\n  * two", "• one\n  • two"),
        ("`a*b*c`", "`a*b*c`"),
    ],
)
def test_markdown_to_slack(md, expected):
    assert markdown_to_slack(md) == expected


@pytest.mark.parametrize(
    "md, expected",
    [
        ("**bold** _it_ ~~s~~", "*bold* _it_ ~s~"),
        ("[docs](https://e.com)", "docs (https://e.com)"),
        ("[https://e.com](https://e.com)", "https://e.com"),
        ("```\ncode\n```", "```code```"),
    ],
)
def test_markdown_to_whatsapp(md, expected):
    assert markdown_to_whatsapp(md) == expected


def test_markdown_to_plain():
    md = "# Report\n**Done**: see [logs](https://e.com) and `x`.\n```sh\nls -l\n```"
    assert markdown_to_plain(md) == "Report\nDone: see logs (https://e.com) and x.\nls -l"


@pytest.mark.parametrize(
    "value, expected",
    [
        ("2", 2.0),
        ("0.5", 0.5),
        ("-3", 0.0),
        ("soon", None),
        ("Thu, 01 Jan 2026 00:00:30 GMT", 30.0),
    ],
)
def test_retry_after_header_reads_seconds_and_http_dates(value, expected):
    response = httpx.Response(429, headers={"Retry-After": value})
    assert retry_after_header(response, now=lambda: 1767225600.0) == expected


ISSUE_CASES = "[t](https://x.y/a_(b)) ***both***\n\n~~~js\nlet a = 1;\n~~~\n\n> quoted\n\n| h1 | h2 |\n|----|----|\n| a  | b  |"


@pytest.mark.parametrize(
    "convert, expected",
    [
        (markdown_to_telegram_html,
         '<a href="https://x.y/a_(b)">t</a> <i><b>both</b></i>\n\n'
         '<pre><code class="language-js">let a = 1;</code></pre>\n\n'
         "<blockquote>quoted</blockquote>\n\n<pre><code>h1 | h2\n---+---\na  | b</code></pre>"),
        (markdown_to_slack,
         "<https://x.y/a_(b)|t> _*both*_\n\n```\nlet a = 1;\n```\n\n&gt; quoted\n\n"
         "```\nh1 | h2\n---+---\na  | b\n```"),
        (markdown_to_whatsapp,
         "t (https://x.y/a_(b)) _*both*_\n\n```let a = 1;```\n\n> quoted\n\n"
         "```h1 | h2\n---+---\na  | b```"),
        (markdown_to_plain,
         "t (https://x.y/a_(b)) both\n\nlet a = 1;\n\nquoted\n\nh1 | h2\n---+---\na  | b"),
        (markdown_to_discord,
         "[t](https://x.y/a_(b)) ***both***\n\n```js\nlet a = 1;\n```\n\n> quoted\n\n"
         "```\nh1 | h2\n---+---\na  | b\n```"),
        (markdown_to_mattermost,
         "[t](https://x.y/a_(b)) ***both***\n\n```js\nlet a = 1;\n```\n\n> quoted\n\n"
         "| h1 | h2 |\n|---|---|\n| a | b |"),
    ],
    ids=["telegram", "slack", "whatsapp", "plain", "discord", "mattermost"],
)  # fmt: skip
def test_the_issues_cases_in_every_dialect(convert, expected):
    assert convert(ISSUE_CASES) == expected


@pytest.mark.parametrize(
    "md, expected",
    [
        ("[`config.yaml`](https://e.com)", '<a href="https://e.com">config.yaml</a>'),
        ("> see [x](https://e.com) and `y`", "<blockquote>see x (https://e.com) and y</blockquote>"),
        ("> > nested", "<blockquote>nested</blockquote>"),
        ("<b>raw</b> & co", "&lt;b&gt;raw&lt;/b&gt; &amp; co"),
        ("[x](javascript:alert(1))", "[x](javascript:alert(1))"),
        ("1. one\n2. two", "1. one\n2. two"),
    ],
)  # fmt: skip
def test_telegram_html_keeps_its_nesting_rules(md, expected):
    assert markdown_to_telegram_html(md) == expected


def test_a_tilde_fence_cut_in_two_is_closed_and_reopened_with_tildes():
    lines = "\n".join(f"line {i}" for i in range(12))
    parts = split_text(f"~~~py\n{lines}\n~~~\nafter", 40)
    assert all(len(p) <= 40 for p in parts)
    assert all(p.startswith("~~~py\n") and p.count("~~~") == 2 for p in parts)
    assert parts[-1].endswith("~~~\nafter")


def test_render_parts_splits_again_when_escaping_lengthens_a_part():
    text = "&" * 100  # one word: 500 characters once escaped
    parts = render_parts(text, 100, markdown_to_slack)
    assert all(len(p) <= 100 for p in parts)
    assert "".join(parts) == "&amp;" * 100


def test_markdown_special_characters_in_text_are_escaped_for_discord():
    assert markdown_to_discord("a\\*b\\* and snake_case") == "a\\*b\\* and snake\\_case"
    assert markdown_to_discord("see https://e.com/_a_b_") == "see https://e.com/_a_b_"


@pytest.mark.parametrize(
    ("convert", "expected"),
    [
        (markdown_to_telegram_html, 'see <a href="http://x/y.png">a diagram</a> here'),
        (markdown_to_slack, "see <http://x/y.png|a diagram> here"),
        (markdown_to_plain, "see a diagram (http://x/y.png) here"),
    ],
)
def test_an_image_becomes_a_link_labelled_with_its_alt_text_in_plain_words(convert, expected):
    # a model's reply with an image (its alt text styled) crashed every dialect's renderer
    assert convert("see ![a **diagram**](http://x/y.png) here") == expected


@pytest.mark.parametrize(
    "convert",
    [markdown_to_discord, markdown_to_mattermost, markdown_to_whatsapp, markdown_to_plain],
)
def test_an_image_keeps_its_address_in_every_dialect(convert):
    assert "http://x/y.png" in convert("![chart](http://x/y.png)")
