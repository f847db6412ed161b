"""The mail watcher against a real Dovecot: what the gateway receives, and when."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from pathlib import Path

import pytest

from hookwise.server.gmail.watcher import WatcherError, run_watcher
from tests.gmail import gmail_mails as mails
from tests.gmail.conftest import (
    HOOK_TOKEN,
    Dovecot,
    Receiver,
    read_checkpoint,
    requires_dovecot,
    wait_for,
)

pytestmark = [requires_dovecot, pytest.mark.timeout(90)]

HOOK = "/hooks/gmail"


def key_of(message_id: str) -> str:
    return "gmail-" + hashlib.sha256(message_id.encode()).hexdigest()


def message_ids(received: list) -> list[str]:
    return [r.body["messages"][0]["messageId"] for r in received]


def test_plain_message_is_posted_with_token_and_idempotency_key(dovecot, receiver, start_watcher):
    start_watcher(dovecot.gmail_config(), receiver.url + HOOK)
    validity, uid = dovecot.append(mails.plain(1))

    [got] = receiver.wait_accepted(1)

    assert got.path == HOOK
    assert got.headers["authorization"] == f"Bearer {HOOK_TOKEN}"
    assert got.headers["idempotency-key"] == key_of("<plain-1@example.org>")
    assert got.headers["content-type"] == "application/json"
    assert got.body == {
        "source": "gmail",
        "messages": [
            {
                "id": f"{validity}-{uid}",
                "from": "Bob Sender <bob@example.org>",
                "to": "alice@example.com",
                "subject": "Plain message 1",
                "snippet": "Hello Alice, this is message 1.",
                "body": "Hello Alice,\n\nthis is message 1.",
                "date": "2026-03-14T09:26:53+00:00",
                "messageId": "<plain-1@example.org>",
            }
        ],
    }


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            mails.multipart_alternative(),
            {
                "from": "Carol <carol@example.org>",
                "to": "Alice <alice@example.com>, dave@example.net",
                "subject": "Quarterly report",
                "snippet": "Plain part: revenue is up.",
                "body": "Plain part: revenue is up.",
            },
            id="multipart-alternative-prefers-plain",
        ),
        pytest.param(
            mails.html_only(),
            {
                "from": "News <news@example.org>",
                "subject": "Newsletter",
                "snippet": "Big news Fish & chips tonight one two",
                "body": "Big news\n\nFish & chips\ntonight\n\none\ntwo",
            },
            id="html-only-becomes-text",
        ),
        pytest.param(
            mails.latin1(),
            {
                "from": "Jürgen Müller <juergen@example.de>",
                "subject": "Änderung der Preise",
                "snippet": "Grüße aus Köln, à bientôt.",
                "body": "Grüße aus Köln, à bientôt.",
            },
            id="iso-8859-1-and-encoded-words",
        ),
    ],
)
def test_message_kinds_are_decoded(dovecot, receiver, start_watcher, raw, expected):
    start_watcher(dovecot.gmail_config(), receiver.url + HOOK)
    dovecot.append(raw)

    [got] = receiver.wait_accepted(1)
    item = got.body["messages"][0]
    assert {k: item[k] for k in expected} == expected


def test_huge_body_is_cut_at_max_bytes_on_a_character_boundary(dovecot, receiver, start_watcher):
    start_watcher(dovecot.gmail_config(maxBytes=1001), receiver.url + HOOK)
    dovecot.append(mails.huge(50_000))

    [got] = receiver.wait_accepted(1)
    body = got.body["messages"][0]["body"]
    assert body == "é" * 500  # 1000 bytes: the 1001st byte would split an "é"
    assert len(got.body["messages"][0]["snippet"]) == 201  # 200 characters and an ellipsis


def test_restart_resumes_from_checkpoint_without_duplicates_or_gaps(
    dovecot, receiver, start_watcher
):
    config = dovecot.gmail_config()
    first = start_watcher(config, receiver.url + HOOK)
    dovecot.append(mails.plain(1))
    receiver.wait_accepted(1)
    first.stop()

    dovecot.append(mails.plain(2))
    _, uid3 = dovecot.append(mails.plain(3))
    start_watcher(config, receiver.url + HOOK)
    receiver.wait_accepted(3)
    dovecot.append(mails.plain(4))
    got = receiver.wait_accepted(4)

    assert message_ids(got) == [f"<plain-{n}@example.org>" for n in (1, 2, 3, 4)]
    assert len(receiver.all()) == 4
    state = Path(first.state_dir)
    wait_for(lambda: read_checkpoint(state)["lastUid"] == uid3 + 1, what="the checkpoint")


def test_first_start_does_not_replay_existing_mail(dovecot, receiver, start_watcher):
    dovecot.append(mails.plain(1))
    start_watcher(dovecot.gmail_config(), receiver.url + HOOK)
    dovecot.append(mails.plain(2))

    got = receiver.wait_accepted(1)
    assert message_ids(got) == ["<plain-2@example.org>"]


def test_reconnects_after_the_imap_server_restarts(dovecot: Dovecot, receiver, start_watcher):
    start_watcher(dovecot.gmail_config(), receiver.url + HOOK)
    dovecot.append(mails.plain(1))
    receiver.wait_accepted(1)

    dovecot.restart()
    dovecot.append(mails.plain(2))
    dovecot.append(mails.plain(3))

    got = receiver.wait_accepted(3)
    assert message_ids(got) == [f"<plain-{n}@example.org>" for n in (1, 2, 3)]
    assert len(receiver.all()) == 3


def test_retries_while_the_gateway_answers_503_then_posts_once(dovecot, receiver, start_watcher):
    answers = iter([503, 503, 429, 502])
    receiver.respond = lambda _r: next(answers, 202)
    start_watcher(dovecot.gmail_config(), receiver.url + HOOK)
    dovecot.append(mails.plain(1))
    dovecot.append(mails.plain(2))

    got = receiver.wait_accepted(2)
    attempts = receiver.all()
    assert [r.status for r in attempts] == [503, 503, 429, 502, 202, 202]
    assert {r.headers["idempotency-key"] for r in attempts[:5]} == {key_of("<plain-1@example.org>")}
    assert message_ids(got) == ["<plain-1@example.org>", "<plain-2@example.org>"]


def test_checkpoint_does_not_advance_until_the_gateway_accepts(
    dovecot, receiver, start_watcher, tmp_path
):
    receiver.respond = lambda _r: 503
    watcher = start_watcher(dovecot.gmail_config(), receiver.url + HOOK)
    before = read_checkpoint(tmp_path / "state")["lastUid"]
    _, uid = dovecot.append(mails.plain(1))
    wait_for(lambda: len(receiver.all()) >= 2, what="two refused attempts")
    watcher.stop()
    assert read_checkpoint(tmp_path / "state")["lastUid"] == before

    receiver.respond = lambda _r: 202
    start_watcher(dovecot.gmail_config(), receiver.url + HOOK)
    got = receiver.wait_accepted(1)
    assert message_ids(got) == ["<plain-1@example.org>"]
    assert len({r.headers["idempotency-key"] for r in receiver.all()}) == 1
    wait_for(lambda: read_checkpoint(tmp_path / "state")["lastUid"] == uid, what="checkpoint")


def test_retries_while_the_gateway_refuses_connections(dovecot, start_watcher, caplog):
    caplog.set_level(logging.WARNING, logger="hookwise.gmail")
    late = Receiver()  # its port is chosen but nothing listens yet
    start_watcher(dovecot.gmail_config(), late.url + HOOK)
    dovecot.append(mails.plain(1))
    wait_for(
        lambda: sum("no answer" in r.getMessage() for r in caplog.records) >= 2,
        what="two failed connection attempts",
    )

    late.start()
    try:
        got = late.wait_accepted(1)
        assert message_ids(got) == ["<plain-1@example.org>"]
        assert len(late.all()) == 1
    finally:
        late.stop()


def test_a_refused_message_is_skipped_and_the_next_one_posted(dovecot, receiver, start_watcher):
    receiver.respond = lambda r: 400 if r.body["messages"][0]["subject"] == "bad" else 202
    start_watcher(dovecot.gmail_config(), receiver.url + HOOK)
    dovecot.append(mails.plain(1, subject="bad"))
    dovecot.append(mails.plain(2))

    got = receiver.wait_accepted(1)
    assert message_ids(got) == ["<plain-2@example.org>"]
    assert [r.status for r in receiver.all()] == [400, 202]


def test_uidvalidity_change_resends_nothing_old_and_misses_nothing_new(
    dovecot, receiver, start_watcher, tmp_path
):
    dovecot.create_folder("Agent")
    config = dovecot.gmail_config(label="Agent")
    watcher = start_watcher(config, receiver.url + HOOK)
    old_validity, _ = dovecot.append(mails.plain(1), folder="Agent")
    receiver.wait_accepted(1)
    watcher.stop()

    # The folder is rebuilt: same old message, new UIDs and UIDVALIDITY, plus one new message.
    dovecot.delete_folder("Agent")
    dovecot.create_folder("Agent")
    dovecot.append(mails.plain(1), folder="Agent")
    new_validity, uid2 = dovecot.append(mails.plain(2), folder="Agent")
    assert new_validity != old_validity

    start_watcher(config, receiver.url + HOOK)
    got = receiver.wait_accepted(2)
    wait_for(
        lambda: read_checkpoint(tmp_path / "state")["uidValidity"] == new_validity,
        what="new UIDVALIDITY in the checkpoint",
    )
    dovecot.append(mails.plain(3), folder="Agent")
    got = receiver.wait_accepted(3)

    assert message_ids(got) == [f"<plain-{n}@example.org>" for n in (1, 2, 3)]
    assert got[1].body["messages"][0]["id"] == f"{new_validity}-{uid2}"
    assert len(receiver.all()) == 3


def _append_while_posting(dovecot: Dovecot, subject: str, raw: bytes):
    """A `respond` that APPENDs `raw` while the watcher waits for the answer to the POST of the
    message `subject`: after the watcher's SEARCH, before its next command."""
    appended = False

    def respond(r) -> int:
        nonlocal appended
        if not appended and r.body["messages"][0]["subject"] == subject:
            appended = True
            dovecot.append(raw)
        return 202

    return respond


def test_a_message_that_arrives_just_before_idle_is_posted_at_once(
    dovecot, receiver, start_watcher
):
    # Dovecot announces it (`* 2 EXISTS`) right after IDLE's `+ idling`, in the same read: the
    # socket poll never sees it, and the server does not say it again until the IDLE renewal.
    receiver.respond = _append_while_posting(dovecot, "Plain message 1", mails.plain(2))
    start_watcher(dovecot.gmail_config(), receiver.url + HOOK)
    dovecot.append(mails.plain(1))

    got = receiver.wait_accepted(2)
    assert message_ids(got) == ["<plain-1@example.org>", "<plain-2@example.org>"]


def test_a_message_announced_with_a_fetch_answer_is_posted_at_once(
    dovecot, receiver, start_watcher
):
    # Appended while the watcher posts message 1 of a catch-up of two: Dovecot announces it with
    # the answer to the FETCH of message 2 (imaplib keeps that aside), and not again in IDLE.
    first = start_watcher(dovecot.gmail_config(), receiver.url + HOOK)
    first.stop()
    dovecot.append(mails.plain(1))
    dovecot.append(mails.plain(2))
    receiver.respond = _append_while_posting(dovecot, "Plain message 1", mails.plain(3))
    start_watcher(dovecot.gmail_config(), receiver.url + HOOK)

    got = receiver.wait_accepted(3)
    assert message_ids(got) == [f"<plain-{n}@example.org>" for n in (1, 2, 3)]


@pytest.mark.parametrize(
    ("label", "reason"),
    [("Papierkorb", "\\Trash"), ("Sent", "skipFolders"), ("Spam", "skipFolders")],
)
def test_spam_trash_drafts_and_sent_folders_are_never_watched(
    dovecot, receiver, tmp_path, label, reason
):
    if label == "Spam":
        dovecot.create_folder("Spam")
    config = dovecot.gmail_config(label=label)

    with pytest.raises(WatcherError) as err:
        asyncio.run(
            run_watcher(
                config,
                hook_url=receiver.url + HOOK,
                hook_token=HOOK_TOKEN,
                state_dir=tmp_path / "state",
            )
        )
    assert reason in str(err.value)
    assert receiver.all() == []


def test_mail_in_other_folders_and_drafts_is_not_posted(dovecot, receiver, start_watcher):
    start_watcher(dovecot.gmail_config(), receiver.url + HOOK)
    dovecot.append(mails.plain(1), folder="Junk")
    dovecot.append(mails.plain(2), folder="Sent")
    dovecot.append(mails.plain(3), flags=("\\Draft",))
    dovecot.append(mails.plain(4))

    got = receiver.wait_accepted(1)
    assert message_ids(got) == ["<plain-4@example.org>"]
    assert len(receiver.all()) == 1


def test_idle_is_renewed_before_the_server_timeout(dovecot, receiver, start_watcher, caplog):
    caplog.set_level(logging.DEBUG, logger="hookwise.gmail")
    start_watcher(dovecot.gmail_config(idleSeconds=0.3), receiver.url + HOOK)
    wait_for(
        lambda: sum("IDLE ended (renewal)" in r.getMessage() for r in caplog.records) >= 3,
        what="three IDLE renewals",
    )
    dovecot.append(mails.plain(1))
    got = receiver.wait_accepted(1)
    assert message_ids(got) == ["<plain-1@example.org>"]


def test_xoauth2_login_is_used_for_an_oauth2_token(dovecot, receiver, start_watcher, tmp_path):
    # Dovecot checks an XOAUTH2 token against the passdb password when no oauth2 passdb is set.
    token_file = tmp_path / "token"
    from tests.gmail.conftest import PASSWORD

    token_file.write_text(PASSWORD + "\n")
    config = dovecot.gmail_config(password=None, oauth2TokenFile=str(token_file))
    start_watcher(config, receiver.url + HOOK)
    dovecot.append(mails.plain(1))

    receiver.wait_accepted(1)
    assert "method=XOAUTH2" in dovecot.log()


def test_a_wrong_password_stops_the_watcher_with_a_clear_error(dovecot, receiver, tmp_path):
    config = dovecot.gmail_config(password="wrong")

    with pytest.raises(WatcherError) as err:
        asyncio.run(
            run_watcher(
                config,
                hook_url=receiver.url + HOOK,
                hook_token=HOOK_TOKEN,
                state_dir=tmp_path / "state",
            )
        )
    assert "LOGIN as alice@example.com" in str(err.value)
    assert "refused" in str(err.value)
    assert "wrong" not in str(err.value)


def test_cancelling_the_watcher_task_shuts_it_down(dovecot, receiver, tmp_path):
    async def main() -> None:
        task = asyncio.create_task(
            run_watcher(
                dovecot.gmail_config(),
                hook_url=receiver.url + HOOK,
                hook_token=HOOK_TOKEN,
                state_dir=tmp_path / "state",
            )
        )
        while not (tmp_path / "state" / "gmail").exists():
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    wait_for(lambda: "Disconnected" in dovecot.log(), what="the IMAP session to end")
