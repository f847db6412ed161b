"""Fakes of the chat services: Telegram Bot API, Discord REST v10, Slack Web API, Mattermost v4.

Each checks requests against the service's published description (`tests/fakes/specs.py`) and
its documented rules beyond the schema (Telegram's HTML nesting and 4,096 visible characters,
Discord's 2,000-character bot limit and snowflakes, Slack's id formats and charset warning,
Mattermost's 16,383 characters), and answers in the service's own shapes.
"""

from __future__ import annotations

import html.parser
import itertools
import json
import re
import time
from typing import Any
from urllib.parse import urlencode

from tests.fakes.fake_http import FakeServer, Recorded, Reply, bearer, json_of
from tests.fakes.specs import problems, spec

# --- Telegram Bot API ------------------------------------------------------------------------

# Formatting options, HTML style: bold, italic, underline, strikethrough and spoiler nest freely;
# "all other entities can't contain each other"; code may sit in pre (with a language class).
_FREE = frozenset(["b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "tg-spoiler"])
_ALLOWED = _FREE | {"span", "a", "tg-emoji", "code", "pre", "blockquote"}
_NAMED_ENTITIES = frozenset(["lt", "gt", "amp", "quot"])
_ENTITY = re.compile(r"&(#x[0-9a-fA-F]+|#\d+|[A-Za-z][A-Za-z0-9]*);?")


class _TelegramEntities(html.parser.HTMLParser):
    """Telegram's HTML parse mode: allowed tags and attributes, nesting rules, visible text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.text: list[str] = []
        self.error: str | None = None

    def _fail(self, message: str) -> None:
        self.error = self.error or message

    def handle_starttag(self, tag: str, attrs_: list[tuple[str, str | None]]) -> None:
        names = dict(attrs_)
        if tag not in _ALLOWED:
            self._fail(f'Unsupported start tag "{tag}"')
        elif tag == "a" and not names.get("href"):
            self._fail('Can\'t find "href" attribute of the "a" tag')
        elif tag == "span" and names.get("class") != "tg-spoiler":
            self._fail('Tag "span" must have class "tg-spoiler"')
        elif tag == "code" and "class" in names and self.stack[-1:] != ["pre"]:
            self._fail("Programming language can't be specified for a standalone code tag")
        if tag not in _FREE and tag != "span":
            for outer in self.stack:
                if outer in _FREE or outer == "span" or (outer == "pre" and tag == "code"):
                    continue
                self._fail(f'Entity "{tag}" can\'t be nested in entity "{outer}"')
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self._fail(f'Unmatched end tag at byte offset {self.getpos()[1]}, expected "</{tag}>"')
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def telegram_visible_text(text: str) -> tuple[str, str | None]:
    """The text a Telegram user sees for an HTML-mode message, and the parse error if any."""
    for m in _ENTITY.finditer(text):
        name = m.group(1)
        if not m.group(0).endswith(";") or (
            not name.startswith("#") and name not in _NAMED_ENTITIES
        ):
            return "", f'Unsupported HTML entity "{m.group(0)}" at byte offset {m.start()}'
    if re.search(r"<(?![/a-zA-Z])", text):
        return "", "Unexpected < character; use &lt; instead"
    parser = _TelegramEntities()
    parser.feed(text)
    parser.close()
    error = parser.error
    if error is None and parser.stack:
        error = f'Can\'t find end tag corresponding to start tag "{parser.stack[-1]}"'
    return "".join(parser.text), error


def _keyboard_problem(markup: Any) -> str | None:
    """What is wrong with an `InlineKeyboardMarkup` (fields of telegram_callbacks.json; a
    button's `callback_data` is 1-64 bytes), or None."""
    types = spec("telegram_callbacks")["types"]
    known = {f["name"] for f in types["InlineKeyboardButton"]["fields"]}
    rows = markup.get("inline_keyboard") if isinstance(markup, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        return 'field "inline_keyboard" must be an Array of Array of InlineKeyboardButton'
    for row in rows:
        for button in row:
            if not isinstance(button, dict) or not isinstance(button.get("text"), str):
                return "can't parse inline keyboard button: Text buttons are unallowed"
            if set(button) - known:
                return f"can't parse inline keyboard button: unknown {sorted(set(button) - known)}"
            data = button.get("callback_data")
            if data is not None and not 1 <= len(str(data).encode()) <= 64:
                return "BUTTON_DATA_INVALID"
    return None


class TelegramFake(FakeServer):
    name = "telegram"

    def __init__(self, token: str = "123456789:AAFakeTelegramBotToken_for-tests") -> None:
        super().__init__()
        self.token = token
        #: the sendMessage bodies, by the message id answered (for buttons and their callbacks)
        self.sent_messages: dict[int, dict[str, Any]] = {}
        #: answerCallbackQuery and editMessageText bodies, in order
        self.callback_answers: list[dict[str, Any]] = []
        self.edits: list[dict[str, Any]] = []
        self._callback_ids = itertools.count(1)

    def _callbacks(self, method: str, body: Any) -> Reply:
        """`answerCallbackQuery` and `editMessageText`, checked against the Bot API's fields
        (telegram_callbacks.json): required fields present, known fields only."""
        if not isinstance(body, dict):
            return self._error(400, "Bad Request: the body is not a JSON object")
        fields = {f["name"]: f for f in spec("telegram_callbacks")["methods"][method]["fields"]}
        unknown = sorted(set(body) - set(fields))
        missing = [n for n, f in fields.items() if f["required"] and n not in body]
        if unknown or missing:
            return self._error(400, f"Bad Request: invalid parameters: {unknown or missing}")
        if method == "answerCallbackQuery":
            if not body["callback_query_id"]:
                return self._error(400, "Bad Request: query is too old or query ID is invalid")
            self.callback_answers.append(body)
            return Reply(200, {"ok": True, "result": True})
        if "inline_message_id" not in body and not ("chat_id" in body and "message_id" in body):
            return self._error(400, "Bad Request: message identifier is not specified")
        if not body.get("text"):
            return self._error(400, "Bad Request: message text is empty")
        if int(body.get("message_id", 0)) not in self.sent_messages:
            return self._error(400, "Bad Request: message to edit not found")
        self.edits.append(body)
        chat_id = int(str(body["chat_id"])) if str(body["chat_id"]).lstrip("-").isdigit() else 0
        message = {
            "message_id": body["message_id"],
            "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"},
            "date": int(time.time()),
            "edit_date": int(time.time()),
            "text": body["text"],
        }
        return Reply(200, {"ok": True, "result": message})

    def click(self, message_id: int, button: str, user_id: int) -> dict[str, Any]:
        """The `Update` Telegram POSTs to the bot's webhook when `user_id` presses the button
        labelled `button` of message `message_id` (a `callback_query`)."""
        sent = self.sent_messages[message_id]
        [data] = [
            b["callback_data"]
            for row in sent["reply_markup"]["inline_keyboard"]
            for b in row
            if b["text"] == button
        ]
        chat_id = int(str(sent["chat_id"]))
        return {
            "update_id": 100000 + next(self._callback_ids),
            "callback_query": {
                "id": str(4382000000000000000 + next(self._callback_ids)),
                "from": {"id": user_id, "is_bot": False, "first_name": "Op"},
                "message": {
                    "message_id": message_id,
                    "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "group"},
                    "date": int(time.time()),
                    "text": sent["text"],
                },
                "chat_instance": "-5555555555555555555",
                "data": data,
            },
        }

    def config(self) -> dict[str, Any]:
        return {"botToken": self.token, "baseUrl": self.url}

    def is_send(self, req: Recorded) -> bool:
        return req.path.endswith("/sendMessage")

    @staticmethod
    def _error(code: int, description: str, **parameters: Any) -> Reply:
        body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
        if parameters:
            body["parameters"] = parameters
        return Reply(code, body)

    def rate_limited_reply(self, retry_after: float) -> Reply:
        secs = int(retry_after)
        return self._error(429, f"Too Many Requests: retry after {secs}", retry_after=secs)

    def server_error_reply(self) -> Reply:
        return self._error(500, "Internal Server Error")

    def handle(self, req: Recorded) -> Reply:
        prefix, _, method = req.path.lstrip("/").partition("/")
        if prefix != f"bot{self.token}":
            return self._error(401, "Unauthorized")
        if method in ("answerCallbackQuery", "editMessageText"):
            return self._callbacks(method, json_of(req))
        if method != "sendMessage":
            return self._error(404, "Not Found")
        body = json_of(req)
        if not isinstance(body, dict) or body.get("chat_id") in (None, ""):
            return self._error(400, "Bad Request: chat_id is empty")
        # telegram.json lacks the keyboard types: the markup is checked against
        # telegram_callbacks.json (InlineKeyboardMarkup, InlineKeyboardButton) below
        found = problems(
            "telegram",
            "#/sendMessage/json_schema",
            {k: v for k, v in body.items() if k != "reply_markup"},
        )
        if found:
            return self._error(400, f"Bad Request: invalid parameters: {found[0]}")
        if "reply_markup" in body:
            refused = _keyboard_problem(body["reply_markup"])
            if refused:
                return self._error(400, f"Bad Request: {refused}")
        chat = str(body["chat_id"])
        if chat in self.missing:
            return self._error(400, "Bad Request: chat not found")
        text = body["text"]
        if body.get("parse_mode") == "HTML":
            text, error = telegram_visible_text(text)
            if error:
                return self._error(400, f"Bad Request: can't parse entities: {error}")
        elif body.get("parse_mode") not in (None, ""):
            return self._error(400, "Bad Request: unsupported parse_mode")
        if not text.strip():
            return self._error(400, "Bad Request: message text is empty")
        if len(text) > 4096:
            return self._error(400, "Bad Request: message is too long")
        chat_id = int(chat) if chat.lstrip("-").isdigit() else -1001000000001
        message: dict[str, Any] = {
            "message_id": self._next_id(),
            "from": {"id": int(self.token.split(":")[0]), "is_bot": True, "first_name": "Fake"},
            "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"},
            "date": int(time.time()),
            "text": text,
        }
        if "message_thread_id" in body:
            message["message_thread_id"] = body["message_thread_id"]
            message["is_topic_message"] = True
        self.sent_messages[message["message_id"]] = body
        return Reply(200, {"ok": True, "result": message})


# --- Discord REST API v10 --------------------------------------------------------------------

_SNOWFLAKE = re.compile(r"(0|[1-9][0-9]*)")
DISCORD_BOT_LIMIT = 2000  # the description allows 4,000 (Nitro users); bots get 2,000


def _discord_form_error(field: str, code: str, message: str) -> Reply:
    errors = {field: {"_errors": [{"code": code, "message": message}]}}
    return Reply(400, {"message": "Invalid Form Body", "code": 50035, "errors": errors})


def _discord_user(user_id: str, name: str, bot: bool = False) -> dict[str, Any]:
    return {
        "id": user_id,
        "username": name,
        "avatar": None,
        "discriminator": "0",
        "public_flags": 0,
        "flags": 0,
        "bot": bot,
        "global_name": None,
        "primary_guild": None,
    }


class DiscordFake(FakeServer):
    name = "discord"
    BOT_ID = "1100000000000000001"

    def __init__(self, token: str = "MTAxFakeDiscordBotToken.GhIjKl.fake") -> None:
        super().__init__()
        self.token = token
        self.dm_channels: dict[str, str] = {}

    def config(self) -> dict[str, Any]:
        return {"token": self.token, "baseUrl": f"{self.url}/api/v10"}

    def is_send(self, req: Recorded) -> bool:
        return req.path.endswith("/messages")

    def rate_limited_reply(self, retry_after: float) -> Reply:
        body = {
            "message": "You are being rate limited.",
            "retry_after": retry_after,
            "global": False,
            "code": 0,
        }
        headers = {
            "Retry-After": str(int(-(-retry_after // 1))),
            "X-RateLimit-Limit": "5",
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset-After": str(retry_after),
            "X-RateLimit-Scope": "user",
        }
        return Reply(429, body, headers)

    def server_error_reply(self) -> Reply:
        return Reply(500, {"message": "500: Internal Server Error", "code": 0})

    def handle(self, req: Recorded) -> Reply:
        if req.headers.get("authorization") != f"Bot {self.token}":
            return Reply(401, {"message": "401: Unauthorized", "code": 0})
        if not req.headers.get("user-agent", "").startswith("DiscordBot ("):
            return Reply(400, {"message": "A valid User-Agent is required", "code": 0})
        path = req.path.removeprefix("/api/v10")
        body = json_of(req)
        if path == "/users/@me/channels":
            return self._create_dm(body)
        segments = path.strip("/").split("/")
        if len(segments) == 3 and segments[0] == "channels" and segments[2] == "messages":
            return self._create_message(segments[1], body)
        return Reply(404, {"message": "404: Not Found", "code": 0})

    def _create_dm(self, body: Any) -> Reply:
        user = (body or {}).get("recipient_id") if isinstance(body, dict) else None
        if not isinstance(user, str) or not _SNOWFLAKE.fullmatch(user):
            return _discord_form_error(
                "recipient_id", "NUMBER_TYPE_COERCE", f'Value "{user}" is not snowflake.'
            )
        if user in self.missing:
            return Reply(400, {"message": "Invalid Recipient(s)", "code": 50033})
        dm = self.dm_channels.setdefault(user, str(900000000000000000 + len(self.dm_channels)))
        answer = {"id": dm, "type": 1, "flags": 0, "last_message_id": None}
        answer["recipients"] = [_discord_user(user, "someone")]
        return Reply(200, answer)

    def _create_message(self, channel: str, body: Any) -> Reply:
        if not _SNOWFLAKE.fullmatch(channel):
            return _discord_form_error(
                "channel_id", "NUMBER_TYPE_COERCE", f'Value "{channel}" is not snowflake.'
            )
        if channel in self.missing:
            return Reply(404, {"message": "Unknown Channel", "code": 10003})
        if not isinstance(body, dict):
            return Reply(400, {"message": "Cannot send an empty message", "code": 50006})
        found = problems("discord", "#/components/schemas/MessageCreateRequest", body)
        if found:
            field = found[0].split(":")[0]
            return _discord_form_error(field, "BASE_TYPE_INVALID", found[0])
        content = body.get("content")
        if not isinstance(content, str) or not content.strip():
            return Reply(400, {"message": "Cannot send an empty message", "code": 50006})
        if len(content) > DISCORD_BOT_LIMIT:
            return _discord_form_error(
                "content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length."
            )
        message = {
            "id": str(1200000000000000000 + self._next_id()),
            "type": 0,
            "channel_id": channel,
            "content": content,
            "author": _discord_user(self.BOT_ID, "hookwise", bot=True),
            "timestamp": "2026-01-01T00:00:00.000000+00:00",
            "edited_timestamp": None,
            "mentions": [],
            "mention_roles": [],
            "mention_everyone": False,
            "attachments": [],
            "embeds": [],
            "components": [],
            "flags": 0,
            "pinned": False,
            "tts": False,
        }
        return Reply(200, message)


# --- Slack Web API ---------------------------------------------------------------------------

_SLACK_CONVERSATION = re.compile(r"[CGD][A-Z0-9]{8,}")
_SLACK_USER = re.compile(r"[UW][A-Z0-9]{2,}")
SLACK_TEXT_LIMIT = 40000


def _slack_blocks_problem(blocks: Any) -> str | None:
    """Block Kit as Slack checks it for what hookwise sends: section (text at most 3,000
    characters) and actions (buttons: plain_text label at most 75, action_id at most 255, value
    at most 2,000 characters)."""
    if not isinstance(blocks, list) or len(blocks) > 50:
        return "blocks must be a list of at most 50"
    for b in blocks:
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "section":
            text = b.get("text") or {}
            if (
                text.get("type") not in ("plain_text", "mrkdwn")
                or not 1 <= len(text.get("text", "")) <= 3000
            ):
                return "section text"
        elif kind == "actions":
            for e in b.get("elements", []):
                label = e.get("text") or {}
                if e.get("type") != "button" or label.get("type") != "plain_text":
                    return "button"
                if not 1 <= len(label.get("text", "")) <= 75 or len(e.get("action_id", "")) > 255:
                    return "button text or action_id"
                if len(e.get("value", "")) > 2000:
                    return "button value"
        else:
            return f"block type {kind!r}"
    return None


class SlackFake(FakeServer):
    """`channel_names` maps `#name` (or `name`) to the conversation id chat.postMessage uses."""

    name = "slack"

    def __init__(self, bot_token: str = "xoxb-0000000000-0000000000000-FakeSlackBotToken") -> None:
        super().__init__()
        self.bot_token = bot_token
        self.channel_names: dict[str, str] = {"general": "C0GENERAL01"}
        #: chat.postMessage bodies by the `ts` answered; chat.update bodies, in order
        self.posted: dict[str, dict[str, Any]] = {}
        self.updates: list[dict[str, Any]] = []

    def config(self) -> dict[str, Any]:
        return {"botToken": self.bot_token, "baseUrl": f"{self.url}/api"}

    def is_send(self, req: Recorded) -> bool:
        return req.path.endswith("/chat.postMessage")

    def rate_limited_reply(self, retry_after: float) -> Reply:
        retry = str(int(-(-retry_after // 1)))
        return Reply(429, {"ok": False, "error": "ratelimited"}, {"Retry-After": retry})

    def server_error_reply(self) -> Reply:
        return Reply(503, {"ok": False, "error": "service_unavailable"})

    def handle(self, req: Recorded) -> Reply:
        method = req.path.removeprefix("/api/")
        if method not in ("chat.postMessage", "conversations.open", "chat.update"):
            return Reply(404, {"ok": False, "error": "unknown_method"})
        token = bearer(req)
        if token is None:
            return Reply(200, {"ok": False, "error": "not_authed"})
        if token != self.bot_token:
            return Reply(200, {"ok": False, "error": "invalid_auth"})
        ctype = req.headers.get("content-type", "")
        if not ctype.startswith("application/json"):
            return Reply(200, {"ok": False, "error": "invalid_form_data"})
        body = json_of(req)
        if not isinstance(body, dict):
            return Reply(200, {"ok": False, "error": "invalid_form_data"})
        # Slack reads JSON without a charset but warns: "missing_charset".
        warning = None if "charset=utf-8" in ctype.replace(" ", "").lower() else "missing_charset"
        if method == "chat.update":
            reply = self._update(body)
        else:
            reply = self._open(body) if method == "conversations.open" else self._post(body)
        if warning and reply.body.get("ok"):
            reply.body["warning"] = warning
            reply.body["response_metadata"] = {"warnings": [warning]}
        return reply

    def _open(self, body: dict[str, Any]) -> Reply:
        user = body.get("users")
        if not isinstance(user, str) or not user:
            return Reply(200, {"ok": False, "error": "users_list_not_supplied"})
        if not _SLACK_USER.fullmatch(user) or user in self.missing:
            return Reply(200, {"ok": False, "error": "user_not_found"})
        return Reply(200, {"ok": True, "channel": {"id": "D" + user[1:]}})

    def _post(self, body: dict[str, Any]) -> Reply:
        channel = body.get("channel")
        if isinstance(channel, str) and channel.lstrip("#") in self.channel_names:
            channel = self.channel_names[channel.lstrip("#")]
        if not isinstance(channel, str) or not _SLACK_CONVERSATION.fullmatch(channel):
            return Reply(200, {"ok": False, "error": "channel_not_found"})
        if channel in self.missing:
            return Reply(200, {"ok": False, "error": "channel_not_found"})
        text = body.get("text")
        if not isinstance(text, str) or not text.strip():
            return Reply(200, {"ok": False, "error": "no_text"})
        if len(text) > SLACK_TEXT_LIMIT:
            return Reply(200, {"ok": False, "error": "msg_too_long"})
        if "blocks" in body and _slack_blocks_problem(body["blocks"]):
            return Reply(200, {"ok": False, "error": "invalid_blocks"})
        ts = f"1700000000.{self._next_id():06d}"
        message = {"type": "message", "text": text, "user": "U0FAKEBOT", "ts": ts}
        message["bot_id"] = "B0FAKEBOT1"
        if "blocks" in body:
            message["blocks"] = body["blocks"]
        self.posted[ts] = {**body, "channel": channel}
        return Reply(200, {"ok": True, "channel": channel, "ts": ts, "message": message})

    def _update(self, body: dict[str, Any]) -> Reply:
        """`chat.update`: `channel` and `ts` of a message the bot posted, new `text`/`blocks`
        (Slack: `cant_update_message`, `message_not_found`, `no_text`)."""
        channel, ts = body.get("channel"), body.get("ts")
        if not isinstance(channel, str) or not _SLACK_CONVERSATION.fullmatch(channel):
            return Reply(200, {"ok": False, "error": "channel_not_found"})
        posted = self.posted.get(ts) if isinstance(ts, str) else None
        if posted is None or posted["channel"] != channel:
            return Reply(200, {"ok": False, "error": "message_not_found"})
        if not body.get("text") and not body.get("blocks"):
            return Reply(200, {"ok": False, "error": "no_text"})
        if "blocks" in body and _slack_blocks_problem(body["blocks"]):
            return Reply(200, {"ok": False, "error": "invalid_blocks"})
        self.updates.append(body)
        message = {"text": body.get("text", ""), "blocks": body.get("blocks", [])}
        return Reply(
            200,
            {"ok": True, "channel": channel, "ts": ts, "text": message["text"], "message": message},
        )

    def click(self, ts: str, button: str, user_id: str) -> bytes:
        """The form body Slack POSTs to the app's Request URL when `user_id` clicks the button
        labelled `button` of message `ts`: `payload=<block_actions JSON>`, url-encoded."""
        posted = self.posted[ts]
        [(block, element)] = [
            (b, e)
            for b in posted["blocks"]
            if b["type"] == "actions"
            for e in b["elements"]
            if e["text"]["text"] == button
        ]
        payload = {
            "type": "block_actions",
            "user": {"id": user_id, "username": "op", "team_id": "T0FAKETEAM"},
            "api_app_id": "A0FAKEAPP1",
            "token": "verification-token-unused",
            "container": {"type": "message", "message_ts": ts, "channel_id": posted["channel"]},
            "trigger_id": "1234567890.123456789.abcdef",
            "team": {"id": "T0FAKETEAM", "domain": "fake"},
            "channel": {"id": posted["channel"], "name": "ops"},
            "message": {
                "type": "message",
                "ts": ts,
                "text": posted["text"],
                "blocks": posted["blocks"],
            },
            "response_url": f"{self.url}/actions/T0FAKETEAM/1/abc",
            "actions": [
                {
                    "type": "button",
                    "block_id": block.get("block_id", "b"),
                    "action_id": element["action_id"],
                    "text": element["text"],
                    "value": element.get("value"),
                    "action_ts": "1700000100.000001",
                }
            ],
        }
        return urlencode({"payload": json.dumps(payload)}).encode()


# --- Mattermost REST API v4 ------------------------------------------------------------------

_MM_ID = re.compile(r"[a-z0-9]{26}")
MATTERMOST_POST_LIMIT = 16383


class MattermostFake(FakeServer):
    """Posts, plus what a DM needs: `users/me`, `users/username/{name}`, `channels/direct`.

    `users` maps usernames to user ids; `bot_user_id` is the bot's own id.
    """

    name = "mattermost"

    def __init__(self, bot_token: str = "fakemattermostbottoken00000") -> None:
        super().__init__()
        self.bot_token = bot_token
        self.bot_user_id = "b0tuser0000000000000000000"
        self.users: dict[str, str] = {"alice": "a11ce000000000000000000000"}
        self.direct: dict[tuple[str, str], str] = {}

    def config(self) -> dict[str, Any]:
        return {"botToken": self.bot_token, "baseUrl": self.url}

    def is_send(self, req: Recorded) -> bool:
        return req.path == "/api/v4/posts"

    @staticmethod
    def _error(status: int, error_id: str, message: str) -> Reply:
        return Reply(
            status,
            {
                "id": error_id,
                "message": message,
                "detailed_error": "",
                "request_id": "fakerequestid0000000000000",
                "status_code": status,
            },
        )

    def rate_limited_reply(self, retry_after: float) -> Reply:
        headers = {
            "X-Ratelimit-Limit": "10",
            "X-Ratelimit-Remaining": "0",
            "X-Ratelimit-Reset": str(int(retry_after)),
            "Retry-After": str(int(retry_after)),
        }
        return Reply(429, "limit exceeded\n", headers)

    def server_error_reply(self) -> Reply:
        return self._error(500, "app.post.save.app_error", "Unable to save the post.")

    def handle(self, req: Recorded) -> Reply:
        if bearer(req) != self.bot_token:
            return self._error(
                401,
                "api.context.session_expired.app_error",
                "Invalid or expired session, please login again.",
            )
        body = json_of(req)
        if req.method == "GET" and req.path == "/api/v4/users/me":
            return Reply(200, self._user(self.bot_user_id, "hookwise-bot"))
        if req.method == "GET" and req.path.startswith("/api/v4/users/username/"):
            name = req.path.removeprefix("/api/v4/users/username/")
            if name not in self.users:
                return self._error(404, "app.user.missing_account.const", "Unable to find user.")
            return Reply(200, self._user(self.users[name], name))
        if req.method == "POST" and req.path == "/api/v4/channels/direct":
            return self._direct(body)
        if req.method == "POST" and req.path == "/api/v4/posts":
            return self._post(body)
        return self._error(404, "api.context.404.app_error", "Sorry, we could not find the page.")

    @staticmethod
    def _user(user_id: str, username: str) -> dict[str, Any]:
        return {"id": user_id, "username": username, "create_at": 1700000000000, "roles": ""}

    def _direct(self, body: Any) -> Reply:
        if (
            not isinstance(body, list)
            or len(body) != 2
            or not all(isinstance(u, str) and _MM_ID.fullmatch(u) for u in body)
        ):
            return self._error(
                400,
                "api.context.invalid_body_param.app_error",
                "Invalid or missing user_ids in request body.",
            )
        if self.bot_user_id not in body:
            return self._error(
                403, "api.context.permissions.app_error", "You do not have the permissions."
            )
        other = body[0] if body[1] == self.bot_user_id else body[1]
        if other in self.missing or other not in self.users.values():
            return self._error(400, "store.sql_user.missing_account.const", "Unable to find user.")
        key = (min(body), max(body))
        channel = self.direct.setdefault(key, f"d{len(self.direct) + 1:025d}")
        return Reply(201, {"id": channel, "type": "D", "name": f"{key[0]}__{key[1]}"})

    def _post(self, body: Any) -> Reply:
        schema = "#/operations/CreatePost/operation/requestBody/content/application~1json/schema"
        if not isinstance(body, dict) or problems("mattermost", schema, body):
            return self._error(
                400,
                "api.context.invalid_body_param.app_error",
                "Invalid or missing channel_id in request body.",
            )
        channel = body["channel_id"]
        if not _MM_ID.fullmatch(channel):
            return self._error(
                400, "api.context.invalid_url_param.app_error", "Invalid or missing channel_id."
            )
        if channel in self.missing:
            return self._error(
                403,
                "api.context.permissions.app_error",
                "You do not have the appropriate permissions.",
            )
        message = body["message"]
        if not message.strip() or len(message) > MATTERMOST_POST_LIMIT:
            return self._error(400, "model.post.is_valid.msg.app_error", "Invalid Message.")
        post_id = f"{self._next_id():026d}"
        return Reply(
            201,
            {
                "id": post_id,
                "create_at": 1700000000000,
                "update_at": 1700000000000,
                "delete_at": 0,
                "edit_at": 0,
                "user_id": self.bot_user_id,
                "channel_id": channel,
                "root_id": "",
                "original_id": "",
                "message": message,
                "type": "",
                "props": {},
                "hashtag": "",
                "file_ids": [],
                "pending_post_id": "",
            },
        )
