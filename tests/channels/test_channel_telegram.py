"""Telegram adapter against the Bot API fake: exact requests, topics, HTML, plain-text fallback."""

from __future__ import annotations

import pytest

from hookwise.server.channels import load_channels
from tests.fakes.channel_servers import Reply, telegram_visible_text


def telegram(server):
    return load_channels({"telegram": server.config()})["telegram"]


def test_send_posts_html_text_to_send_message_with_the_token_in_the_path(channel_server, deliver):
    server = channel_server("telegram")
    result = deliver(telegram(server), "-1001234567890", "Build **42** passed & deployed")
    (req,) = server.requests
    assert req.method == "POST"
    assert req.path == f"/bot{server.token}/sendMessage"
    assert req.headers["content-type"] == "application/json"
    assert req.json == {
        "chat_id": "-1001234567890",
        "text": "Build <b>42</b> passed &amp; deployed",
        "parse_mode": "HTML",
    }
    assert result.message_ids == ("1",)


def test_a_forum_topic_is_sent_as_message_thread_id(channel_server, deliver):
    server = channel_server("telegram")
    deliver(telegram(server), "-1001234567890:topic:42", "hi")
    assert server.requests[0].json["chat_id"] == "-1001234567890"
    assert server.requests[0].json["message_thread_id"] == 42


def test_a_public_username_is_a_chat_id(channel_server, deliver):
    server = channel_server("telegram")
    deliver(telegram(server), "@hookwise_alerts", "hi")
    assert server.requests[0].json["chat_id"] == "@hookwise_alerts"
    assert "message_thread_id" not in server.requests[0].json


def test_when_telegram_cannot_parse_the_entities_the_part_is_sent_as_plain_text(
    channel_server, deliver
):
    server = channel_server("telegram")
    server.script(
        Reply(400, {"ok": False, "error_code": 400, "description": "Bad Request: can't parse "
                    "entities: Can't find end tag corresponding to start tag \"b\""})
    )  # fmt: skip
    result = deliver(telegram(server), "123456789", "a **bold** [link](https://example.com)")
    first, second = server.requests
    assert first.json["parse_mode"] == "HTML"
    assert second.json == {"chat_id": "123456789", "text": "a bold link (https://example.com)"}
    assert result.message_ids == ("1",)


def test_rich_markdown_is_valid_telegram_html(channel_server, deliver):
    server = channel_server("telegram")
    text = (
        "# Report\n\n**Status:** *green* ~~red~~ `x<y`\n\n```python\nif a < b and c > d:\n"
        "    pass\n```\n\nSee [the <run>](https://ci.example.com/run?id=1&x=2)."
    )
    deliver(telegram(server), "123456789", text)  # the fake refuses unbalanced or unknown tags
    sent = server.requests[0].json["text"]
    assert sent == (
        "<b>Report</b>\n\n<b>Status:</b> <i>green</i> <s>red</s> <code>x&lt;y</code>\n\n"
        '<pre><code class="language-python">if a &lt; b and c &gt; d:\n    pass</code></pre>\n\n'
        'See <a href="https://ci.example.com/run?id=1&amp;x=2">the &lt;run&gt;</a>.'
    )


def test_a_long_code_block_is_split_into_parts_that_each_render(channel_server, deliver):
    server = channel_server("telegram")
    code = "\n".join(f"line {i:04d} " + "z" * 40 for i in range(200))  # ~10 KB
    result = deliver(telegram(server), "123456789", f"Log:\n```\n{code}\n```\nEnd.")
    assert len(result.message_ids) == 3
    visible = []
    for req in server.requests:
        text, error = telegram_visible_text(req.json["text"])
        assert error is None and len(text) <= 4096
        assert req.json["text"].count("<pre>") == 1
        visible.append(text)
    assert "".join(visible).count("line 0199") == 1
    assert visible[-1].endswith("End.")


@pytest.mark.parametrize(
    "to, ok",
    [
        ("123456789", True),
        ("-1001234567890", True),
        ("-1001234567890:topic:7", True),
        ("@hookwise_alerts", True),
        ("channel:123", False),
        ("-100123:topic:", False),
        ("@ab", False),
        ("", False),
    ],
)
def test_recipient_forms(to, ok, channel_server):
    channel = telegram(channel_server("telegram"))
    assert (channel.validate_recipient(to) is None) is ok


def test_code_in_a_link_label_stays_within_telegrams_nesting_rules(channel_server, deliver):
    server = channel_server("telegram")
    text = "Edit [`config.yaml`](https://e.com/c) and see [t](https://x.y/a_(b)).\n\n> quoted [l](https://q.io) `c`"
    deliver(telegram(server), "123456789", text)
    (req,) = server.requests  # accepted at once: no plain-text fallback was needed
    assert req.json["parse_mode"] == "HTML"
    assert req.json["text"] == (
        'Edit <a href="https://e.com/c">config.yaml</a> and see '
        '<a href="https://x.y/a_(b)">t</a>.\n\n'
        "<blockquote>quoted l (https://q.io) c</blockquote>"
    )


def test_parts_are_split_by_the_length_telegram_counts(channel_server, deliver):
    server = channel_server("telegram")
    text = " ".join(["a&b"] * 1000)  # 3,999 characters, 7,999 once escaped as HTML
    result = deliver(telegram(server), "123456789", text)
    assert len(result.message_ids) == 1
    assert len(server.requests[0].json["text"]) > 4096
