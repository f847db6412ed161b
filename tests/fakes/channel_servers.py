"""Loopback fakes of the messaging APIs hookwise delivers to, one small HTTP server per channel.

Each fake listens on 127.0.0.1 (random port) in a background thread and implements the part of
its API hookwise uses: the auth check (a wrong credential gets the API's real 401 or error body),
validation of the request body, success answers in the API's real shape with message ids, error
answers for unknown recipients (`hookwise.server.missing.add(id)`), and scriptable failures:

    server.rate_limit(times=2, retry_after=1)   # next 2 sends answer the API's 429
    server.fail(times=1)                        # next send answers the API's 5xx
    server.script(Reply(400, {...}))            # next send answers exactly this

Every request is recorded in `hookwise.server.requests` (method, path, query, lower-cased headers, body),
so tests assert the exact requests sent. `hookwise.server.config()` gives a `channels.<id>` mapping that
points the channel at the fake. Use `start(name)` or the `running(name)` context manager, or the
`channel_server` fixture in tests/channels/conftest.py.
"""

from __future__ import annotations

import contextlib
import html.parser
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import parse_qsl, unquote, urlsplit

import attrs


@attrs.frozen
class Recorded:
    """One request a fake received."""

    method: str
    path: str  # percent-decoded, without the query
    raw_path: str  # exactly as sent, with the query
    query: dict[str, str]
    headers: dict[str, str]  # lower-cased names
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def form(self) -> dict[str, str]:
        return dict(parse_qsl(self.body.decode()))


@attrs.frozen
class Reply:
    """An answer: a dict or list body goes as JSON, a str as text/plain, None as no body."""

    status: int
    body: Any = None
    headers: dict[str, str] = attrs.field(factory=dict)


class FakeServer:
    """Base of the fakes: the HTTP plumbing, the recording and the failure script."""

    name: ClassVar[str]

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.missing: set[str] = set()  # recipients that do not exist on this service
        self._script: deque[tuple[Reply, Callable[[Recorded], bool]]] = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None

    # --- life ---

    def start(self) -> FakeServer:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @property
    def url(self) -> str:
        assert self._httpd is not None, "the fake is not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    # --- scripting ---

    def script(
        self, reply: Reply, times: int = 1, when: Callable[[Recorded], bool] | None = None
    ) -> None:
        """Answer the next `times` requests matching `when` (default: sends) with `reply`."""
        with self._lock:
            for _ in range(times):
                self._script.append((reply, when or self.is_send))

    def rate_limit(self, times: int = 1, retry_after: float = 1) -> None:
        """The next `times` sends get this API's rate-limit answer."""
        self.script(self.rate_limited_reply(retry_after), times)

    def fail(self, times: int = 1) -> None:
        """The next `times` sends get this API's server-error answer."""
        self.script(self.server_error_reply(), times)

    @property
    def sends(self) -> list[Recorded]:
        """The recorded requests that send a message."""
        return [r for r in self.requests if self.is_send(r)]

    # --- to implement per API ---

    def config(self) -> dict[str, Any]:
        raise NotImplementedError

    def is_send(self, req: Recorded) -> bool:
        raise NotImplementedError

    def handle(self, req: Recorded) -> Reply:
        raise NotImplementedError

    def rate_limited_reply(self, retry_after: float) -> Reply:
        raise NotImplementedError

    def server_error_reply(self) -> Reply:
        raise NotImplementedError

    # --- plumbing ---

    def _dispatch(self, req: Recorded) -> Reply:
        with self._lock:
            self.requests.append(req)
            for i, (reply, when) in enumerate(self._script):
                if when(req):
                    del self._script[i]
                    return reply
            return self.handle(req)

    def _next_id(self) -> int:
        return next(self._ids)


def _handler_for(fake: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            parts = urlsplit(self.path)
            req = Recorded(
                method=self.command,
                path=unquote(parts.path),
                raw_path=self.path,
                query=dict(parse_qsl(parts.query)),
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
            )
            try:
                reply = fake._dispatch(req)
            except Exception as exc:  # a bug in the fake: make it loud
                reply = Reply(599, f"fake {fake.name} crashed: {exc!r}")
            if isinstance(reply.body, (dict, list)):
                data, ctype = json.dumps(reply.body).encode(), "application/json; charset=utf-8"
            elif isinstance(reply.body, str):
                data, ctype = reply.body.encode(), "text/plain; charset=utf-8"
            else:
                data, ctype = b"", None
            self.send_response(reply.status)
            if ctype:
                self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            for k, v in reply.headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def _json(req: Recorded) -> Any:
    try:
        return json.loads(req.body or b"null")
    except ValueError:
        return None


def _bearer(req: Recorded) -> str | None:
    auth = req.headers.get("authorization", "")
    return auth[7:] if auth.startswith("Bearer ") else None


# --- Telegram Bot API ------------------------------------------------------------------------


class _TelegramEntities(html.parser.HTMLParser):
    """Telegram's HTML parse mode: the allowed tags, balanced; collects the visible text."""

    ALLOWED = frozenset(
        [
            "b",
            "strong",
            "i",
            "em",
            "u",
            "ins",
            "s",
            "strike",
            "del",
            "a",
            "code",
            "pre",
            "span",
            "tg-spoiler",
            "blockquote",
            "tg-emoji",
        ]
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.text: list[str] = []
        self.error: str | None = None

    def handle_starttag(self, tag: str, attrs_: list[tuple[str, str | None]]) -> None:
        if tag not in self.ALLOWED:
            self.error = self.error or f'Unsupported start tag "{tag}"'
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.error = self.error or f'Unmatched end tag "{tag}"'
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def telegram_visible_text(text: str) -> tuple[str, str | None]:
    """The text a Telegram user sees for an HTML-mode message, and the parse error if any."""
    parser = _TelegramEntities()
    parser.feed(text)
    parser.close()
    error = parser.error
    if error is None and parser.stack:
        error = f'Can\'t find end tag corresponding to start tag "{parser.stack[-1]}"'
    return "".join(parser.text), error


class TelegramFake(FakeServer):
    name = "telegram"

    def __init__(self, token: str = "123456789:AAFakeTelegramBotToken_for-tests") -> None:
        super().__init__()
        self.token = token

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
        if method != "sendMessage":
            return self._error(404, "Not Found")
        body = _json(req)
        if not isinstance(body, dict) or body.get("chat_id") in (None, ""):
            return self._error(400, "Bad Request: chat_id is empty")
        chat = str(body["chat_id"])
        if chat in self.missing:
            return self._error(400, "Bad Request: chat not found")
        text = body.get("text")
        if not isinstance(text, str) or not text.strip():
            return self._error(400, "Bad Request: message text is empty")
        if body.get("parse_mode") == "HTML":
            text, error = telegram_visible_text(text)
            if error:
                return self._error(400, f"Bad Request: can't parse entities: {error}")
        elif body.get("parse_mode") not in (None, ""):
            return self._error(400, "Bad Request: unsupported parse_mode")
        if len(text) > 4096:
            return self._error(400, "Bad Request: message is too long")
        message: dict[str, Any] = {
            "message_id": self._next_id(),
            "from": {"id": int(self.token.split(":")[0]), "is_bot": True, "first_name": "Fake"},
            "chat": {"id": int(chat) if chat.lstrip("-").isdigit() else 0, "type": "private"},
            "date": int(time.time()),
            "text": text,
        }
        if "message_thread_id" in body:
            message["message_thread_id"] = body["message_thread_id"]
            message["is_topic_message"] = True
        return Reply(200, {"ok": True, "result": message})


# --- WhatsApp Business Cloud API -------------------------------------------------------------


class WhatsAppFake(FakeServer):
    name = "whatsapp"

    def __init__(
        self,
        access_token: str = "EAAFakeWhatsAppAccessToken",
        phone_number_id: str = "106540352242922",
        version: str = "v21.0",
    ) -> None:
        super().__init__()
        self.access_token = access_token
        self.phone_number_id = phone_number_id
        self.version = version

    def config(self) -> dict[str, Any]:
        return {
            "accessToken": self.access_token,
            "phoneNumberId": self.phone_number_id,
            "apiVersion": self.version,
            "baseUrl": self.url,
        }

    def is_send(self, req: Recorded) -> bool:
        return req.path.endswith("/messages")

    @staticmethod
    def _error(status: int, code: int, message: str, **extra: Any) -> Reply:
        error = {"message": message, "type": "OAuthException", "code": code, **extra}
        error["fbtrace_id"] = "AbCdEfGhIjKlMnOp"
        return Reply(status, {"error": error})

    def rate_limited_reply(self, retry_after: float) -> Reply:
        return self._error(429, 130429, "(#130429) Rate limit hit")

    def server_error_reply(self) -> Reply:
        return self._error(500, 2, "Service temporarily unavailable", is_transient=True)

    def handle(self, req: Recorded) -> Reply:
        token = _bearer(req)
        if token is None:
            return self._error(400, 104, "An access token is required to request this resource.")
        if token != self.access_token:
            return self._error(401, 190, "Invalid OAuth access token - Cannot parse access token")
        if req.path != f"/{self.version}/{self.phone_number_id}/messages":
            object_id = req.path.strip("/").split("/")[1] if req.path.count("/") > 1 else ""
            return self._error(
                400,
                100,
                f"Unsupported post request. Object with ID '{object_id}' does not exist, cannot "
                "be loaded due to missing permissions, or does not support this operation.",
            )
        body = _json(req)
        if not isinstance(body, dict) or body.get("messaging_product") != "whatsapp":
            return self._error(400, 100, "(#100) The parameter messaging_product is required.")
        to = str(body.get("to") or "")
        if not to:
            return self._error(400, 100, "(#100) The parameter to is required.")
        text = body.get("text") if body.get("type") == "text" else None
        if not isinstance(text, dict) or not isinstance(text.get("body"), str):
            return self._error(400, 100, "(#100) The parameter text['body'] is required.")
        if len(text["body"]) > 4096:
            return self._error(
                400, 100, "(#100) Param text['body'] must be at most 4096 characters long."
            )
        if to in self.missing:
            return self._error(
                400,
                131030,
                "(#131030) Recipient phone number not in allowed list",
                error_data={
                    "messaging_product": "whatsapp",
                    "details": "Recipient phone number "
                    "not in allowed list: Add recipient phone number to recipient list "
                    "and try again.",
                },
            )
        wamid = f"wamid.HBgL{to}FQIAERgS{self._next_id():020d}"
        return Reply(
            200,
            {
                "messaging_product": "whatsapp",
                "contacts": [{"input": to, "wa_id": to}],
                "messages": [{"id": wamid}],
            },
        )


# --- Discord REST API v10 --------------------------------------------------------------------


class DiscordFake(FakeServer):
    name = "discord"

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
        path = req.path.removeprefix("/api/v10")
        body = _json(req)
        if path == "/users/@me/channels":
            user = str((body or {}).get("recipient_id") or "")
            if not user or user in self.missing:
                return Reply(400, {"message": "Invalid Recipient(s)", "code": 50033})
            dm = self.dm_channels.setdefault(user, str(900000000000000000 + len(self.dm_channels)))
            return Reply(200, {"id": dm, "type": 1, "recipients": [{"id": user}]})
        segments = path.strip("/").split("/")
        if len(segments) == 3 and segments[0] == "channels" and segments[2] == "messages":
            channel = segments[1]
            if channel in self.missing:
                return Reply(404, {"message": "Unknown Channel", "code": 10003})
            content = (body or {}).get("content")
            if not isinstance(content, str) or not content:
                return Reply(400, {"message": "Cannot send an empty message", "code": 50006})
            if len(content) > 2000:
                return Reply(
                    400,
                    {
                        "message": "Invalid Form Body",
                        "code": 50035,
                        "errors": {
                            "content": {
                                "_errors": [
                                    {
                                        "code": "BASE_TYPE_MAX_LENGTH",
                                        "message": "Must be 2000 or fewer in length.",
                                    }
                                ]
                            }
                        },
                    },
                )
            message_id = str(1200000000000000000 + self._next_id())
            return Reply(
                200,
                {
                    "id": message_id,
                    "type": 0,
                    "channel_id": channel,
                    "content": content,
                    "author": {"id": "1100000000000000001", "username": "hookwise", "bot": True},
                    "timestamp": "2026-01-01T00:00:00.000000+00:00",
                },
            )
        return Reply(404, {"message": "404: Not Found", "code": 0})


# --- Slack Web API ---------------------------------------------------------------------------


class SlackFake(FakeServer):
    name = "slack"

    def __init__(self, bot_token: str = "xoxb-0000000000-0000000000000-FakeSlackBotToken") -> None:
        super().__init__()
        self.bot_token = bot_token

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
        if method not in ("chat.postMessage", "conversations.open"):
            return Reply(404, {"ok": False, "error": "unknown_method"})
        token = _bearer(req)
        if token is None:
            return Reply(200, {"ok": False, "error": "not_authed"})
        if token != self.bot_token:
            return Reply(200, {"ok": False, "error": "invalid_auth"})
        if not req.headers.get("content-type", "").startswith("application/json"):
            return Reply(200, {"ok": False, "error": "invalid_arguments"})
        body = _json(req) or {}
        if method == "conversations.open":
            user = str(body.get("users") or "")
            if not user or user in self.missing:
                return Reply(200, {"ok": False, "error": "user_not_found"})
            return Reply(200, {"ok": True, "channel": {"id": "D" + user[1:]}})
        channel = str(body.get("channel") or "")
        if not channel or channel in self.missing:
            return Reply(200, {"ok": False, "error": "channel_not_found"})
        text = body.get("text")
        if not isinstance(text, str) or not text.strip():
            return Reply(200, {"ok": False, "error": "no_text"})
        if len(text) > 40000:
            return Reply(200, {"ok": False, "error": "msg_too_long"})
        ts = f"1700000000.{self._next_id():06d}"
        message = {
            "type": "message",
            "text": text,
            "user": "U0FAKEBOT",
            "bot_id": "B0FAKE",
            "ts": ts,
        }
        return Reply(200, {"ok": True, "channel": channel, "ts": ts, "message": message})


# --- signal-cli REST API ---------------------------------------------------------------------


class SignalFake(FakeServer):
    """signal-cli-rest-api has no authentication; `account` is the registered sending number."""

    name = "signal"

    def __init__(self, account: str = "+15550001111") -> None:
        super().__init__()
        self.account = account

    def config(self) -> dict[str, Any]:
        return {"account": self.account, "baseUrl": self.url}

    def is_send(self, req: Recorded) -> bool:
        return req.path == "/v2/send"

    def rate_limited_reply(self, retry_after: float) -> Reply:
        return Reply(
            429,
            {"error": "Failed to send message: Rate limit exceeded"},
            {"Retry-After": str(int(retry_after))},
        )

    def server_error_reply(self) -> Reply:
        return Reply(500, {"error": "Failed to send message: Connection to the Signal server lost"})

    def handle(self, req: Recorded) -> Reply:
        if req.path != "/v2/send" or req.method != "POST":
            return Reply(404, "404 page not found")
        body = _json(req)
        if not isinstance(body, dict):
            return Reply(400, {"error": "Couldn't process request - invalid request"})
        if body.get("number") != self.account:
            return Reply(400, {"error": f"User {body.get('number')} is not registered."})
        recipients = body.get("recipients")
        if not isinstance(recipients, list) or not recipients:
            return Reply(
                400, {"error": "Couldn't process request - please provide at least one recipient"}
            )
        if not isinstance(body.get("message"), str):
            return Reply(400, {"error": "Couldn't process request - message is missing"})
        for r in recipients:
            if r in self.missing:
                return Reply(400, {"error": f'Failed to send message: Unregistered user "{r}"'})
        return Reply(201, {"timestamp": str(1700000000000 + self._next_id())})


# --- BlueBubbles server ----------------------------------------------------------------------


class BlueBubblesFake(FakeServer):
    name = "imessage"

    def __init__(self, password: str = "fake-bluebubbles-password") -> None:
        super().__init__()
        self.password = password

    def config(self) -> dict[str, Any]:
        return {"password": self.password, "baseUrl": self.url}

    def is_send(self, req: Recorded) -> bool:
        return req.path == "/api/v1/message/text"

    @staticmethod
    def _error(status: int, message: str, kind: str, detail: str) -> Reply:
        return Reply(
            status,
            {"status": status, "message": message, "error": {"type": kind, "message": detail}},
        )

    def rate_limited_reply(self, retry_after: float) -> Reply:
        reply = self._error(429, "Too Many Requests", "Server Error", "Too many requests")
        return attrs.evolve(reply, headers={"Retry-After": str(int(retry_after))})

    def server_error_reply(self) -> Reply:
        return self._error(500, "Message Send Error", "iMessage Error", "Failed to send message!")

    def handle(self, req: Recorded) -> Reply:
        if req.query.get("password") != self.password:
            return self._error(
                401,
                "You are not authorized to access this resource",
                "Authentication Error",
                "Unauthorized",
            )
        if req.path != "/api/v1/message/text":
            return self._error(404, "Not Found", "Not Found", "The route does not exist")
        body = _json(req)
        if not isinstance(body, dict):
            return self._error(400, "Bad Request", "Validation Error", "Invalid JSON body")
        for key in ("chatGuid", "tempGuid", "message"):
            if not isinstance(body.get(key), str) or not body[key]:
                return self._error(400, "Bad Request", "Validation Error", f"A {key} is required!")
        if body["chatGuid"] in self.missing:
            return self._error(400, "Bad Request", "Validation Error", "Chat does not exist!")
        guid = f"FAKE-{self._next_id():08d}-0000-0000-0000-000000000000"
        data = {
            "guid": guid,
            "tempGuid": body["tempGuid"],
            "text": body["message"],
            "isFromMe": True,
            "dateCreated": 1700000000000,
            "chats": [{"guid": body["chatGuid"]}],
        }
        return Reply(200, {"status": 200, "message": "Message sent!", "data": data})


# --- Microsoft Teams: Entra token endpoint + Bot Framework connector -------------------------


class TeamsFake(FakeServer):
    """Both the token endpoint (`/{tenant}/oauth2/v2.0/token`) and the connector (`/v3/...`).

    `token_lifetime` is the `expires_in` it grants; `revoke_tokens()` makes every token issued so
    far be refused with 401, as after a key rollover.
    """

    name = "msteams"
    SCOPE = "https://api.botframework.com/.default"

    def __init__(
        self,
        app_id: str = "00000000-0000-0000-0000-00000000b07a",
        app_password: str = "fake~teams~client~secret",
        tenant_id: str = "11111111-2222-3333-4444-555555555555",
        token_lifetime: int = 3599,
    ) -> None:
        super().__init__()
        self.app_id = app_id
        self.app_password = app_password
        self.tenant_id = tenant_id
        self.token_lifetime = token_lifetime
        self.valid_tokens: set[str] = set()
        self.issued: list[str] = []

    def config(self) -> dict[str, Any]:
        return {
            "appId": self.app_id,
            "appPassword": self.app_password,
            "tenantId": self.tenant_id,
            "serviceUrl": self.url,
            "authUrl": f"{self.url}/{self.tenant_id}/oauth2/v2.0/token",
        }

    def is_send(self, req: Recorded) -> bool:
        return req.path.endswith("/activities")

    def is_token(self, req: Recorded) -> bool:
        return req.path.endswith("/oauth2/v2.0/token")

    def revoke_tokens(self) -> None:
        with self._lock:
            self.valid_tokens.clear()

    def rate_limited_reply(self, retry_after: float) -> Reply:
        body = {"error": {"code": "Throttled", "message": "Too many requests."}}
        return Reply(429, body, {"Retry-After": str(int(retry_after))})

    def server_error_reply(self) -> Reply:
        return Reply(502, {"error": {"code": "ServiceError", "message": "Upstream failure."}})

    @staticmethod
    def _aad_error(status: int, error: str, code: int, description: str) -> Reply:
        return Reply(
            status,
            {
                "error": error,
                "error_description": f"AADSTS{code}: {description}\r\nTrace ID: 0000\r\n",
                "error_codes": [code],
            },
        )

    def handle(self, req: Recorded) -> Reply:
        if self.is_token(req):
            return self._token(req)
        if req.path.startswith("/v3/conversations/") and self.is_send(req):
            return self._activity(req)
        return Reply(404, {"error": {"code": "NotFound", "message": "Resource not found."}})

    def _token(self, req: Recorded) -> Reply:
        if req.path != f"/{self.tenant_id}/oauth2/v2.0/token":
            return self._aad_error(400, "invalid_request", 90002, "Tenant not found.")
        if not req.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            return self._aad_error(
                400, "invalid_request", 900144, "The request body must contain: grant_type."
            )
        form = req.form
        if form.get("grant_type") != "client_credentials":
            return self._aad_error(
                400, "unsupported_grant_type", 70003, "The app requested an unsupported grant."
            )
        if form.get("client_id") != self.app_id:
            return self._aad_error(
                400,
                "unauthorized_client",
                700016,
                f"Application with identifier '{form.get('client_id')}' was not found.",
            )
        if form.get("client_secret") != self.app_password:
            return self._aad_error(
                401, "invalid_client", 7000215, "Invalid client secret provided."
            )
        if form.get("scope") != self.SCOPE:
            return self._aad_error(400, "invalid_scope", 1002012, "The provided scope is invalid.")
        token = f"eyJfake.{self._next_id()}.sig"
        self.valid_tokens.add(token)
        self.issued.append(token)
        return Reply(
            200,
            {
                "token_type": "Bearer",
                "expires_in": self.token_lifetime,
                "ext_expires_in": self.token_lifetime,
                "access_token": token,
            },
        )

    def _activity(self, req: Recorded) -> Reply:
        if _bearer(req) not in self.valid_tokens:
            return Reply(401, {"message": "Authorization has been denied for this request."})
        conversation = req.path.removeprefix("/v3/conversations/").removesuffix("/activities")
        if conversation in self.missing:
            return Reply(
                404,
                {"error": {"code": "ConversationNotFound", "message": "Conversation not found."}},
            )
        body = _json(req)
        if not isinstance(body, dict) or body.get("type") != "message":
            return Reply(
                400, {"error": {"code": "BadArgument", "message": "Unknown activity type"}}
            )
        if not isinstance(body.get("text"), str) or not body["text"]:
            return Reply(400, {"error": {"code": "BadArgument", "message": "Activity text empty"}})
        return Reply(201, {"id": f"1:{self._next_id()}"})


# --- Mattermost REST API v4 ------------------------------------------------------------------


class MattermostFake(FakeServer):
    name = "mattermost"

    def __init__(self, bot_token: str = "fakemattermostbottoken00000") -> None:
        super().__init__()
        self.bot_token = bot_token

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
        if _bearer(req) != self.bot_token:
            return self._error(
                401,
                "api.context.session_expired.app_error",
                "Invalid or expired session, please login again.",
            )
        if req.path != "/api/v4/posts":
            return self._error(
                404, "api.context.404.app_error", "Sorry, we could not find the page."
            )
        body = _json(req)
        channel = body.get("channel_id") if isinstance(body, dict) else None
        if not isinstance(channel, str) or len(channel) != 26:
            return self._error(
                400,
                "api.context.invalid_body_param.app_error",
                "Invalid or missing channel_id in request body.",
            )
        if channel in self.missing:
            return self._error(
                403,
                "api.context.permissions.app_error",
                "You do not have the appropriate permissions.",
            )
        message = body.get("message")
        if not isinstance(message, str) or len(message) > 16383:
            return self._error(400, "model.post.is_valid.msg.app_error", "Invalid Message.")
        post_id = f"{self._next_id():026d}"
        return Reply(
            201,
            {
                "id": post_id,
                "create_at": 1700000000000,
                "update_at": 1700000000000,
                "user_id": "fakebotuserid0000000000000",
                "channel_id": channel,
                "message": message,
                "type": "",
                "props": {},
            },
        )


FAKES: dict[str, type[FakeServer]] = {
    cls.name: cls
    for cls in (
        TelegramFake,
        WhatsAppFake,
        DiscordFake,
        SlackFake,
        SignalFake,
        BlueBubblesFake,
        TeamsFake,
        MattermostFake,
    )
}


def start(name: str, **kwargs: Any) -> FakeServer:
    """Start the fake of the channel `name` (canonical id); stop it with `.stop()`."""
    return FAKES[name](**kwargs).start()


@contextlib.contextmanager
def running(name: str, **kwargs: Any) -> Iterator[FakeServer]:
    """The fake of channel `name`, running for the duration of the block."""
    server = start(name, **kwargs)
    try:
        yield server
    finally:
        server.stop()
