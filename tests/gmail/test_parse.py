"""Message parsing, the idempotency key and the checkpoint file, without a server."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hookwise.engine.config.load import load_data
from hookwise.engine.errors import ConfigError
from hookwise.server.gmail.checkpoint import Checkpoint, CheckpointStore
from hookwise.server.gmail.parse import html_to_text, idempotency_key, parse_message, truncate_utf8
from tests.gmail import gmail_mails as mails


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [("abc", 3, "abc"), ("abcd", 3, "abc"), ("aé", 2, "a"), ("aé", 3, "aé"), ("€€", 5, "€")],
)
def test_truncate_utf8_never_splits_a_character(text, limit, expected):
    assert truncate_utf8(text, limit) == expected


def test_idempotency_key_is_a_short_hash_of_the_message_id():
    key = idempotency_key("<a@b>", "fallback")
    assert key.startswith("gmail-") and len(key) == 70 and "a@b" not in key
    assert key == idempotency_key("<a@b>", "other")
    assert idempotency_key(None, "x") != idempotency_key(None, "y")


def test_html_to_text_drops_scripts_and_decodes_entities():
    assert html_to_text("<p>a &lt;b&gt;</p><script>x()</script><p>c</p>") == "a <b>\n\nc"


def test_message_without_text_parts_has_an_empty_body():
    raw = (
        b"From: a@b\r\nSubject: s\r\nContent-Type: application/pdf\r\n"
        b"Content-Transfer-Encoding: base64\r\n\r\nJVBERi0=\r\n"
    )
    item = parse_message(raw, id="1-1")
    assert item["body"] == "" and item["snippet"] == "" and item["messageId"] is None


def test_thread_id_is_present_only_when_known():
    assert "threadId" not in parse_message(mails.plain(1), id="x")
    assert parse_message(mails.plain(1), id="x", thread_id="abc")["threadId"] == "abc"


def test_checkpoint_round_trips_and_writes_atomically(tmp_path):
    store = CheckpointStore(tmp_path, "a@b.c", "INBOX")
    assert store.load() is None
    now = datetime(2026, 1, 2, tzinfo=UTC)
    cp = Checkpoint(7, 41, now).advanced(42, "gmail-k", now)
    store.save(cp)
    assert store.load() == cp
    assert [p.name for p in store.path.parent.iterdir()] == [store.path.name]


def test_gmail_config_errors_name_the_key_path():
    with pytest.raises(ConfigError) as err:
        load_data({"hooks": {"gmail": {"account": "a@b", "password": "x", "passwordFile": "f"}}})
    assert "hooks.gmail: set only one credential, found password, passwordFile" in str(err.value)
    with pytest.raises(ConfigError, match=r"hooks\.gmail\.maxByte: unknown key; did you mean"):
        load_data({"hooks": {"gmail": {"account": "a@b", "password": "x", "maxByte": 1}}})


def test_gmail_config_never_shows_its_secrets():
    config = load_data({"hooks": {"gmail": {"account": "a@b", "password": "hunter2"}}})
    assert "hunter2" not in repr(config)


@pytest.mark.parametrize(
    ("html", "expected"),
    [
        ('<p>See <a href="https://e.com/i/7?a=1&amp;b=2">invoice 7</a>.</p>',
         "See invoice 7 (https://e.com/i/7?a=1&b=2)."),
        ('<a href="https://e.com/x">https://e.com/x</a>', "https://e.com/x"),
        ('<a href="mailto:billing@e.com">billing@e.com</a>', "billing@e.com"),
        ('<a href="https://e.com/pic"><img src="x.png"></a>', "https://e.com/pic"),
        ('<a href="javascript:alert(1)">click</a>', "click"),
        ('<a href="#top">top</a> <a>bare</a>', "top bare"),
    ],
)  # fmt: skip
def test_html_links_keep_their_targets(html, expected):
    assert html_to_text(html) == expected


def test_an_html_only_mail_keeps_its_links_in_the_body():
    raw = (
        b"From: a@b\r\nSubject: s\r\nMIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n"
        b'\r\n<p>Pay <a href="https://pay.example.com/inv/9">here</a></p>\r\n'
    )
    item = parse_message(raw, id="1-9")
    assert item["body"] == "Pay here (https://pay.example.com/inv/9)"
