"""Fakes of WhatsApp Cloud API, signal-cli-rest-api, BlueBubbles and Microsoft Teams.

Each checks requests against the service's published description (`tests/fakes/specs.py`) and
answers in the service's own shapes: WhatsApp's Graph errors, signal-cli-rest-api's 400 with the
error text and account for every failure but rate limits (429, no `Retry-After`) and, in its
development line, `201` with a JSON array; BlueBubbles' envelope; Entra's token endpoint and the
Bot Framework connector (whose `serviceUrl` differs per region).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from tests.fakes.fake_http import FakeServer, Recorded, Reply, bearer, json_of
from tests.fakes.specs import problems

# --- WhatsApp Business Cloud API -------------------------------------------------------------


class WhatsAppFake(FakeServer):
    name = "whatsapp"

    def __init__(
        self,
        access_token: str = "EAAFakeWhatsAppAccessToken",
        phone_number_id: str = "106540352242922",
        version: str = "v23.0",
        pinned_version: bool = False,
    ) -> None:
        super().__init__()
        self.access_token = access_token
        self.phone_number_id = phone_number_id
        self.version = version
        self.pinned_version = pinned_version  # put apiVersion in config() (else the default)

    def config(self) -> dict[str, Any]:
        config = {
            "accessToken": self.access_token,
            "phoneNumberId": self.phone_number_id,
            "baseUrl": self.url,
        }
        if self.pinned_version:
            config["apiVersion"] = self.version
        return config

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
        token = bearer(req)
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
        body = json_of(req)
        if not isinstance(body, dict):
            return self._error(400, 100, "(#100) The parameter messaging_product is required.")
        for problem in problems("whatsapp", "#/components/schemas/BaseMessageProperties", body):
            field = problem.split(" ")[-3] if "required" in problem else problem.split(":")[0]
            return self._error(
                400, 100, f"(#100) The parameter {field.strip(chr(39))} is required."
            )
        if body["messaging_product"] != "whatsapp":
            return self._error(400, 100, "(#100) Param messaging_product must be 'whatsapp'.")
        to = body["to"]
        if not re.fullmatch(r"\d{7,15}", to):
            return self._error(400, 131009, "(#131009) Parameter value is not valid")
        text = body.get("text") if body.get("type") == "text" else None
        if not isinstance(text, dict) or not isinstance(text.get("body"), str):
            return self._error(400, 100, "(#100) The parameter text['body'] is required.")
        if problems("whatsapp", "#/components/schemas/TextMessage_1", text):
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


# --- signal-cli REST API ---------------------------------------------------------------------


class SignalFake(FakeServer):
    """signal-cli-rest-api has no authentication; `account` is the registered sending number.

    `answer_form="array"` answers a send as the development line does (`201` with a JSON array
    of one result per recipient); `transient_failure(times)` makes the next sends fail as when
    signal-cli cannot reach Signal's servers (a 400, as the API answers every send failure).
    """

    name = "signal"

    def __init__(
        self, account: str = "+15550001111", answer_form: Literal["object", "array"] = "object"
    ) -> None:
        super().__init__()
        self.account = account
        self.answer_form = answer_form
        #: each message as Signal shows it: its text and its styles (`start:length:STYLE`)
        self.shown: list[tuple[str, list[str]]] = []

    def config(self) -> dict[str, Any]:
        return {"account": self.account, "baseUrl": self.url}

    def is_send(self, req: Recorded) -> bool:
        return req.path == "/v2/send"

    def _error(self, text: str, status: int = 400) -> Reply:
        return Reply(status, {"error": text, "account": self.account})

    def rate_limited_reply(self, retry_after: float) -> Reply:
        # The API's 429 names the rate limit and carries no Retry-After header.
        return self._error(
            "Failed to send message: [429] Rate limit exceeded: Rate limit exceeded", 429
        )

    def server_error_reply(self) -> Reply:
        return Reply(500, {"error": "Failed to send message: signal-cli is not responding"})

    def transient_failure(self, times: int = 1) -> None:
        reply = self._error(
            "Failed to send message: java.io.IOException: Connection to the Signal server "
            "timed out (SocketTimeoutException)"
        )
        self.script(reply, times)

    def handle(self, req: Recorded) -> Reply:
        if req.path != "/v2/send" or req.method != "POST":
            return Reply(404, "404 page not found")
        body = json_of(req)
        if not isinstance(body, dict):
            return self._error("Couldn't process request - invalid request")
        found = problems("signal", "#/definitions/api.SendMessageV2", body)
        if found:
            return self._error(f"Couldn't process request - invalid request: {found[0]}")
        if body["number"] != self.account:
            return self._error(f"User {body['number']} is not registered.")
        recipients = body["recipients"]
        if not recipients:
            return self._error("Couldn't process request - please provide at least one recipient")
        for r in recipients:
            if r in self.missing:
                return self._error(f'Failed to send message: Unregistered user "{r}"')
        if not body["message"]:
            return self._error("Couldn't process request - message is empty")
        text, styles = body["message"], []
        if body.get("text_mode") == "styled":
            text, styles = parse_styled(text)
        self.shown.append((text, styles))
        timestamp = str(1700000000000 + self._next_id())
        if self.answer_form == "array":
            return Reply(201, [{"timestamp": timestamp, "recipient": r} for r in recipients])
        return Reply(201, {"timestamp": timestamp})


_PAIRED = {"`": ("mono", "MONOSPACE"), "~": ("strike", "STRIKETHROUGH")}


def parse_styled(message: str) -> tuple[str, list[str]]:
    """What signal-cli-rest-api makes of a `text_mode: styled` message (its
    `utils.ParseMarkdownMessage`, followed step by step): the text without the markup characters
    and signal-cli's `start:length:STYLE` ranges. Every `*`, `|`, `~` and backtick is taken for
    markup and dropped, wherever it stands; styles do not nest."""
    styles: list[str] = []
    out: list[str] = []
    state, style, begin, length, controls, extra, last = "none", "", 0, 0, 0, 0, ""
    for i, ch in enumerate(message):
        if ch == "*":
            if state == "italic":
                if last == "*":
                    state, style, begin, length, extra = "bold", "BOLD", i - controls + extra, 0, 0
                else:
                    state = "italic-end"
            elif state == "none":
                state, style, begin, length = "italic", "ITALIC", i - controls + extra, 0
            elif state == "bold":
                state = "bold-end1"
            elif state == "bold-end1":
                state = "bold-end2"
            controls += 1
        elif ch == "|":
            if state == "none":
                state = "spoiler-begin1"
            elif state == "spoiler-begin1" and last == "|":
                state, style, begin, length = "spoiler", "SPOILER", i - controls + extra, 0
            elif state == "spoiler":
                state = "spoiler-end1"
            elif state == "spoiler-end1" and last == "|":
                state = "spoiler-end2"
            controls += 1
        elif ch in _PAIRED:  # a backtick or a tilde opens its style, the same one closes it
            name, kind = _PAIRED[ch]
            if state == "none":
                state, style, begin, length = name, kind, i - controls + extra, 0
            elif state == name:
                state = f"{name}-end"
            controls += 1
        else:
            length += 1
            out.append(ch)
            size = len(ch.encode())
            extra += max((1 if size == 1 else size // 2) - 1, 0)
        last = ch
        if state in ("italic-end", "bold-end2", "mono-end", "strike-end", "spoiler-end2"):
            styles.append(f"{begin}:{length + extra}:{style}")
            state, style, begin, length = "none", "", 0, 0
    return "".join(out), styles


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
        # BlueBubbles has no rate limit; a Mac that cannot keep up answers 504 (no Retry-After).
        return self._error(504, "Request Timeout", "Gateway Timeout", "Message send timed out")

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
        body = json_of(req)
        if not isinstance(body, dict):
            return self._error(400, "Bad Request", "Validation Error", "Invalid JSON body")
        for problem in problems("bluebubbles", "#/request_schema", body):
            return self._error(400, "Bad Request", "Validation Error", problem)
        if body["chatGuid"] in self.missing:
            return self._error(400, "Bad Request", "Validation Error", "Chat does not exist!")
        guid = f"FAKE-{self._next_id():08d}-0000-0000-0000-000000000000"
        data = {
            "guid": guid,
            "tempGuid": body.get("tempGuid", ""),
            "text": body["message"],
            "isFromMe": True,
            "dateCreated": 1700000000000,
            "chats": [{"guid": body["chatGuid"]}],
        }
        return Reply(200, {"status": 200, "message": "Message sent!", "data": data})


# --- Microsoft Teams: Entra token endpoint + Bot Framework connector -------------------------


class TeamsFake(FakeServer):
    """Both the token endpoint (`/{tenant}/oauth2/v2.0/token`) and the connector (`/v3/...`).

    `regions` places a conversation under a regional serviceUrl, `service_url(region)`.
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
        # Conversations served under another region's serviceUrl (`{url}/<region>`); any other
        # conversation is served at the root. A request through the wrong one is not found.
        self.regions: dict[str, str] = {}
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

    def service_url(self, region: str = "") -> str:
        return f"{self.url}/{region}" if region else self.url

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
        prefix, _, rest = req.path.partition("/v3/conversations/")
        region = prefix.strip("/")
        if rest and self.is_send(req) and "/" not in region:
            return self._activity(req, region, rest.removesuffix("/activities"))
        return Reply(404, {"error": {"code": "NotFound", "message": "Resource not found."}})

    def _token(self, req: Recorded) -> Reply:
        if req.path != f"/{self.tenant_id}/oauth2/v2.0/token":
            return self._aad_error(400, "invalid_request", 90002, "Tenant not found.")
        if not req.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            return self._aad_error(
                400, "invalid_request", 900144, "The request body must contain: grant_type."
            )
        form = req.form
        found = problems("entra_token", "#/token_request/form_schema", form)
        if found and set(form) - {"grant_type", "client_id", "client_secret", "scope"}:
            return self._aad_error(400, "invalid_request", 900144, f"Invalid request: {found[0]}")
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

    def _activity(self, req: Recorded, region: str, conversation: str) -> Reply:
        if bearer(req) not in self.valid_tokens:
            return Reply(401, {"message": "Authorization has been denied for this request."})
        if conversation in self.missing or self.regions.get(conversation, "") != region:
            return Reply(
                404,
                {"error": {"code": "ConversationNotFound", "message": "Conversation not found."}},
            )
        body = json_of(req)
        if not isinstance(body, dict) or body.get("type") != "message":
            return Reply(
                400, {"error": {"code": "BadArgument", "message": "Unknown activity type"}}
            )
        found = problems("botframework", "#/definitions/Activity", body)
        if found:
            return Reply(400, {"error": {"code": "BadArgument", "message": found[0]}})
        if not isinstance(body.get("text"), str) or not body["text"]:
            return Reply(400, {"error": {"code": "BadArgument", "message": "Activity text empty"}})
        if body.get("textFormat", "markdown") not in ("markdown", "plain", "xml"):
            return Reply(400, {"error": {"code": "BadArgument", "message": "Unknown textFormat"}})
        return Reply(201, {"id": f"1:{self._next_id()}"})
