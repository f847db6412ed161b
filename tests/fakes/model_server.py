"""A loopback stand-in for model providers: OpenAI Chat Completions and Anthropic Messages.

One threaded stdlib HTTP server on 127.0.0.1 (random port) serves

- `POST /v1/chat/completions` with OpenAI's request checks (Bearer key, `model`, `messages`,
  roles, `reasoning_effort`), success body and error body `{"error": {message, type, param,
  code}}`;
- `POST /v1/messages` with Anthropic's checks (`x-api-key`, `anthropic-version`, `model`,
  `max_tokens`, `messages`, no `system` role, `thinking` budget rules), success body and error
  body `{"type": "error", "error": {type, message}, "request_id"}`.

Tool calling follows the API descriptions (`api_specs/openai_tools.json`,
`api_specs/anthropic_tools.json`): a `ToolCalls` action answers with OpenAI `message.tool_calls`
(`content: null`, `arguments` a JSON string, `finish_reason: tool_calls`) or Anthropic `tool_use`
blocks (`stop_reason: tool_use`); requests are checked against the tool schemas (`tools`,
`tool_choice`, tool messages and `tool_use`/`tool_result` blocks) and the follow-up rules (every
call answered before the conversation goes on; Anthropic's results first in one user message).

Every request is recorded (`requests`). What a request gets is scripted: `enqueue` actions are
consumed one per valid request (`Reply`, `Fail`, `Slow`, `Raw`); when the queue is empty the
answer is `default_text`. Token counts are word counts. The messages quoted in errors are those
the real APIs send.

    with ModelServer() as server:
        server.fail(429, times=2, retry_after="1")
        server.reply("hello")
        ...  # point a provider at server.openai_base_url / server.anthropic_base_url
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs

from tests.fakes.specs import problems

API_KEY = "sk-test-0123456789abcdef"

OPENAI_ROLES = {"system", "developer", "user", "assistant", "tool"}
OPENAI_EFFORTS = ("minimal", "low", "medium", "high")


@attrs.frozen
class Reply:
    """Answer successfully with this text (a list gives several Anthropic text blocks).
    `cache_read`/`cache_write`: prompt-cache tokens to report, as each API does (OpenAI:
    `prompt_tokens_details.cached_tokens` and `cache_write_tokens`, part of `prompt_tokens`;
    Anthropic: `cache_read_input_tokens` and `cache_creation_input_tokens`, beside
    `input_tokens`)."""

    text: str | list[str]
    cache_read: int | None = None
    cache_write: int | None = None


@attrs.frozen
class Fail:
    """Answer with the API's error body for `status` (its usual message unless `message`)."""

    status: int
    message: str | None = None
    retry_after: str | None = None
    retry_after_ms: str | None = None
    error_type: str | None = None
    code: str | None = None


@attrs.frozen
class Slow:
    """Wait `seconds` (interrupted when the server stops), then answer with `then`."""

    seconds: float
    then: Reply | Fail | None = None


@attrs.frozen
class Raw:
    """Answer with this exact status and body (for malformed answers)."""

    status: int
    body: str
    content_type: str = "application/json"


@attrs.frozen
class ToolCalls:
    """Ask for these tool calls (wire name, arguments object), with an optional text first."""

    calls: tuple[tuple[str, dict[str, Any]], ...]
    text: str | None = None


Action = Reply | Fail | Slow | Raw | ToolCalls


@attrs.frozen
class RecordedRequest:
    """One request as the server saw it. Header names are lower-cased."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


# The error type and message each API sends for a status.
_OPENAI_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Forbidden."),
    404: ("invalid_request_error", "model_not_found", "The model does not exist."),
    429: (
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1. "
        "Please try again in 20s.",
    ),
    500: (
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
}
_ANTHROPIC_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    403: (
        "permission_error",
        "Your API key does not have permission to use the specified resource.",
    ),
    404: ("not_found_error", "The requested resource could not be found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of requests has exceeded your per-minute rate limit."),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}


class _ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str | None = None,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind
        self.param, self.code, self.headers = param, code, headers or {}


class ModelServer:
    """The fake provider server. Use as a context manager, or `start()` / `stop()`."""

    def __init__(
        self, *, api_key: str = API_KEY, default_text: str = "Hello from the fake model."
    ) -> None:
        self.api_key = api_key
        self.default_text = default_text
        self.requests: list[RecordedRequest] = []
        #: requests being answered now, and the most there ever were at once
        self.in_flight = 0
        self.peak_in_flight = 0
        #: each answered API request: when it came in and went out (monotonic) and its body
        self.spans: list[tuple[float, float, Any]] = []
        self._queue: deque[Action] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> ModelServer:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>`."""
        assert self._httpd is not None, "the server is not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def openai_base_url(self) -> str:
        """The `baseUrl` for an `openai` provider."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """The `baseUrl` for an `anthropic` provider."""
        return self.url

    def provider(self, api: str = "openai", **extra: Any) -> dict[str, Any]:
        """A `models.providers` entry pointing at this server (no retries unless `extra`
        says)."""
        base = self.openai_base_url if api == "openai" else self.anthropic_base_url
        return {"api": api, "baseUrl": base, "apiKey": self.api_key, "maxRetries": 0, **extra}

    # -- scripting ------------------------------------------------------------------------

    def enqueue(self, *actions: Action) -> None:
        """Answer the next valid requests with these actions, in order."""
        with self._lock:
            self._queue.extend(actions)

    def reply(self, text: str | list[str], *, times: int = 1) -> None:
        self.enqueue(*[Reply(text)] * times)

    def fail(
        self,
        status: int,
        *,
        times: int = 1,
        message: str | None = None,
        retry_after: str | None = None,
        retry_after_ms: str | None = None,
        error_type: str | None = None,
        code: str | None = None,
    ) -> None:
        action = Fail(status, message, retry_after, retry_after_ms, error_type, code)
        self.enqueue(*[action] * times)

    def slow(self, seconds: float, *, times: int = 1, then: Reply | Fail | None = None) -> None:
        self.enqueue(*[Slow(seconds, then)] * times)

    def raw(self, status: int, body: str, *, content_type: str = "application/json") -> None:
        self.enqueue(Raw(status, body, content_type))

    def reset(self) -> None:
        """Forget the recorded requests and the scripted actions."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.spans.clear()
            self.peak_in_flight = self.in_flight

    @property
    def pending(self) -> int:
        """How many scripted actions are not yet used."""
        with self._lock:
            return len(self._queue)

    @property
    def last_request(self) -> RecordedRequest:
        with self._lock:
            return self.requests[-1]

    # -- internals used by the handler ----------------------------------------------------

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _next_action(self) -> Action:
        with self._lock:
            return self._queue.popleft() if self._queue else Reply(self.default_text)

    def _entered(self, delta: int) -> None:
        with self._lock:
            self.in_flight += delta
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def _next_id(self) -> int:
        return next(self._ids)


def _words(value: object) -> int:
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):
        return sum(_words(v.get("text", "") if isinstance(v, dict) else v) for v in value)
    return 0


class _Handler(BaseHTTPRequestHandler):
    fake: ModelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # quiet
        return

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", errors="replace")
        self.fake._record(RecordedRequest("POST", self.path, headers, body))
        if self.path in _APIS:
            self.fake._entered(1)
            began = time.monotonic()
            try:
                self._serve(_APIS[self.path], headers, raw)
            finally:
                self.fake._entered(-1)
                with self.fake._lock:
                    self.fake.spans.append((began, time.monotonic(), body))
        else:
            self._send(
                404,
                {
                    "error": {
                        "message": f"Unknown path {self.path}",
                        "type": "invalid_request_error",
                    }
                },
            )

    def do_GET(self) -> None:
        self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def _serve(self, api: type[_Api], headers: dict[str, str], raw: bytes) -> None:
        try:
            request = api.validate(headers, raw, self.fake.api_key)
            action = self.fake._next_action()
            if isinstance(action, Slow):
                if self.fake._stopping.wait(action.seconds):
                    return
                action = action.then or Reply(self.fake.default_text)
            if isinstance(action, Raw):
                self._send_raw(action.status, action.body.encode(), action.content_type, {})
                return
            if isinstance(action, Fail):
                raise api.scripted_error(action)
            if isinstance(action, ToolCalls):
                self._send(200, api.tool_calls(request, action, self.fake._next_id()))
                return
            self._send(200, api.success(request, action, self.fake._next_id()))
        except _ApiError as e:
            self._send(e.status, api.error_body(e), e.headers)
        except (BrokenPipeError, ConnectionResetError):
            return

    def _send(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        self._send_raw(status, json.dumps(body).encode(), "application/json", headers or {})

    def _send_raw(
        self, status: int, data: bytes, content_type: str, headers: dict[str, str]
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass


class _Api:
    @staticmethod
    def tool_calls(request: dict[str, Any], action: ToolCalls, n: int) -> dict[str, Any]:
        raise NotImplementedError

    @staticmethod
    def validate(headers: dict[str, str], raw: bytes, api_key: str) -> dict[str, Any]:
        raise NotImplementedError

    @staticmethod
    def scripted_error(action: Fail) -> _ApiError:
        raise NotImplementedError

    @staticmethod
    def success(request: dict[str, Any], action: Reply, n: int) -> dict[str, Any]:
        raise NotImplementedError

    @staticmethod
    def error_body(e: _ApiError) -> dict[str, Any]:
        raise NotImplementedError


def _openai_usage(prompt: int, completion: int, action: Reply) -> dict[str, Any]:
    """OpenAI's `CompletionUsage`: cached tokens are part of `prompt_tokens`."""
    cached = (action.cache_read or 0) + (action.cache_write or 0)
    usage: dict[str, Any] = {
        "prompt_tokens": prompt + cached,
        "completion_tokens": completion,
        "total_tokens": prompt + cached + completion,
    }
    if action.cache_read is not None or action.cache_write is not None:
        details: dict[str, Any] = {"cached_tokens": action.cache_read or 0}
        if action.cache_write is not None:
            details["cache_write_tokens"] = action.cache_write
        usage["prompt_tokens_details"] = details
    return usage


def _retry_headers(action: Fail) -> dict[str, str]:
    headers = {}
    if action.retry_after is not None:
        headers["retry-after"] = action.retry_after
    if action.retry_after_ms is not None:
        headers["retry-after-ms"] = action.retry_after_ms
    return headers


class _OpenAI(_Api):
    @staticmethod
    def validate(headers: dict[str, str], raw: bytes, api_key: str) -> dict[str, Any]:
        auth = headers.get("authorization", "")
        if not auth.startswith("Bearer ") or not auth[7:].strip():
            raise _ApiError(
                401,
                "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), "
                "or as the password field (with blank username) if you're accessing the API "
                "from your browser and are prompted for a username and password. You can obtain "
                "an API key from https://platform.openai.com/account/api-keys.",
                kind="invalid_request_error",
            )
        given = auth[7:].strip()
        if given != api_key:
            shown = f"{given[:3]}*****{given[-4:]}" if len(given) > 8 else "*****"
            raise _ApiError(
                401,
                f"Incorrect API key provided: {shown}. You can find your API key at "
                "https://platform.openai.com/account/api-keys.",
                kind="invalid_request_error",
                code="invalid_api_key",
            )
        try:
            body = json.loads(raw)
        except ValueError:
            raise _ApiError(
                400,
                "We could not parse the JSON body of your request. (HINT: This likely means you "
                "aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, "
                "but what was sent was not valid JSON. If you have trouble figuring out how to "
                "fix this, please contact us through our help center at help.openai.com.)",
                kind="invalid_request_error",
            ) from None
        if not isinstance(body, dict):
            raise _ApiError(
                400, "Invalid type for body: expected an object.", kind="invalid_request_error"
            )
        if not isinstance(body.get("model"), str) or not body["model"]:
            raise _ApiError(400, "you must provide a model parameter", kind="invalid_request_error")
        messages = body.get("messages")
        if messages is None:
            raise _ApiError(
                400,
                "Missing required parameter: 'messages'.",
                kind="invalid_request_error",
                param="messages",
                code="missing_required_parameter",
            )
        if not isinstance(messages, list) or not messages:
            raise _ApiError(
                400,
                "Invalid 'messages': empty array. Expected an array with minimum length 1, "
                "but got an empty array instead.",
                kind="invalid_request_error",
                param="messages",
                code="empty_array",
            )
        for i, m in enumerate(messages):
            role = m.get("role") if isinstance(m, dict) else None
            if role not in OPENAI_ROLES:
                raise _ApiError(
                    400,
                    f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', "
                    "'user', 'function', 'tool', and 'developer'.",
                    kind="invalid_request_error",
                    param=f"messages[{i}].role",
                    code="invalid_value",
                )
            # "Required unless tool_calls or function_call is specified" (openai_tools.json)
            optional = role == "assistant" and m.get("tool_calls")
            if not isinstance(m.get("content"), (str, list)) and not (
                optional and m.get("content") is None
            ):
                raise _ApiError(
                    400,
                    f"Missing required parameter: 'messages[{i}].content'.",
                    kind="invalid_request_error",
                    param=f"messages[{i}].content",
                    code="missing_required_parameter",
                )
        effort = body.get("reasoning_effort")
        if effort is not None and effort not in OPENAI_EFFORTS:
            raise _ApiError(
                400,
                f"Invalid value: '{effort}'. Supported values are: 'minimal', 'low', 'medium', "
                "and 'high'.",
                kind="invalid_request_error",
                param="reasoning_effort",
                code="invalid_value",
            )
        found = problems("openai", "#/components/schemas/CreateChatCompletionRequest", body)
        if found:
            raise _ApiError(
                400, found[0], kind="invalid_request_error", code="invalid_request_error"
            )
        _openai_tool_rules(body)
        return body

    @staticmethod
    def scripted_error(action: Fail) -> _ApiError:
        kind, code, message = _OPENAI_ERRORS.get(action.status, ("server_error", None, "Error."))
        return _ApiError(
            action.status,
            action.message or message,
            kind=action.error_type or kind,
            code=action.code or code,
            headers=_retry_headers(action),
        )

    @staticmethod
    def success(request: dict[str, Any], action: Reply, n: int) -> dict[str, Any]:
        text = action.text if isinstance(action.text, str) else "".join(action.text)
        prompt = sum(_words(m.get("content")) for m in request["messages"])
        completion = _words(text)
        return {
            "id": f"chatcmpl-fake{n:06d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": _openai_usage(prompt, completion, action),
            "system_fingerprint": "fp_fake",
        }

    @staticmethod
    def error_body(e: _ApiError) -> dict[str, Any]:
        return {"error": {"message": e.message, "type": e.kind, "param": e.param, "code": e.code}}

    @staticmethod
    def tool_calls(request: dict[str, Any], action: ToolCalls, n: int) -> dict[str, Any]:
        calls = [
            {
                "id": f"call_fake{n:04d}{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(action.calls)
        ]
        prompt = sum(_words(m.get("content")) for m in request["messages"])
        message = {
            "role": "assistant",
            "content": action.text,
            "refusal": None,
            "tool_calls": calls,
        }
        return {
            "id": f"chatcmpl-fake{n:06d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request["model"],
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": "tool_calls"}
            ],
            "usage": {"prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5},
        }


def _openai_tool_rules(body: dict[str, Any]) -> None:
    """The follow-up rules of `openai_tools.json`: each tool call answered by a `tool` message
    (matched by id) before the next assistant or user message; tools' names by the pattern."""
    open_ids: set[str] = set()
    for i, m in enumerate(body["messages"]):
        role = m.get("role")
        if role == "tool":
            if m.get("tool_call_id") not in open_ids:
                raise _ApiError(
                    400,
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    kind="invalid_request_error",
                    param=f"messages.[{i}].role",
                )
            open_ids.discard(m["tool_call_id"])
            continue
        if open_ids:
            raise _ApiError(
                400,
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(sorted(open_ids))}",
                kind="invalid_request_error",
                param="messages",
            )
        if role == "assistant":
            open_ids = {c["id"] for c in m.get("tool_calls") or ()}
    for t in body.get("tools") or ():
        name = (t.get("function") or {}).get("name", "")
        if not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name):
            raise _ApiError(
                400,
                f"Invalid 'tools[].function.name': string does not match pattern. Expected a "
                f"string that matches the pattern '^[a-zA-Z0-9_-]+$'. ({name!r})",
                kind="invalid_request_error",
            )


def _anthropic_tool_rules(body: dict[str, Any]) -> None:
    """`anthropic_tools.json`: tools, tool_choice, tool_use and tool_result blocks by their
    schemas; every tool_use answered in the next user message, results first."""

    def invalid(message: str) -> _ApiError:
        return _ApiError(400, message, kind="invalid_request_error")

    for i, t in enumerate(body.get("tools") or ()):
        found = problems("anthropic_tools", "#/request/tools/items", t)
        if found:
            raise invalid(f"tools.{i}: {found[0]}")
        if not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", t.get("name", "")):
            raise invalid(f"tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
    if "tool_choice" in body:
        found = problems("anthropic_tools", "#/request/tool_choice", body["tool_choice"])
        if found:
            raise invalid(f"tool_choice: {found[0]}")
    pending: set[str] = set()
    for i, m in enumerate(body["messages"]):
        blocks = m["content"] if isinstance(m["content"], list) else []
        if m["role"] == "user":
            results = [b for b in blocks if b.get("type") == "tool_result"]
            for b in results:
                found = problems("anthropic_tools", "#/follow_up/tool_result", b)
                if found:
                    raise invalid(f"messages.{i}.content: {found[0]}")
            answered = {b["tool_use_id"] for b in results}
            if pending - answered:
                raise invalid(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(sorted(pending - answered))}. Each "
                    "`tool_use` block must have a corresponding `tool_result` block in the "
                    "next message."
                )
            if results and blocks[: len(results)] != results:
                raise invalid(
                    f"messages.{i}: tool_result blocks must come first in the user message"
                )
            pending = set()
        else:
            uses = [b for b in blocks if b.get("type") == "tool_use"]
            for b in uses:
                found = problems("anthropic_tools", "#/response/content_block_tool_use", b)
                if found:
                    raise invalid(f"messages.{i}.content: {found[0]}")
            if uses and not body.get("tools"):
                raise invalid("Requests which include `tool_use` blocks must define tools.")
            pending = {b["id"] for b in uses}


def _claude_version(model: str) -> tuple[int, int] | None:
    """(major, minor) of a Claude model name, or None for names that say nothing."""
    m = re.search(r"claude-(?:[a-z]+-)?(\d{1,2})(?:[-.](\d{1,2}))?(?!\d)", model)
    return (int(m[1]), int(m[2] or 0)) if m else None


class _Anthropic(_Api):
    @staticmethod
    def validate(headers: dict[str, str], raw: bytes, api_key: str) -> dict[str, Any]:
        def invalid(message: str) -> _ApiError:
            return _ApiError(400, message, kind="invalid_request_error")

        key = headers.get("x-api-key")
        if not key:
            raise _ApiError(401, "x-api-key header is required", kind="authentication_error")
        if key != api_key:
            raise _ApiError(401, "invalid x-api-key", kind="authentication_error")
        if not headers.get("anthropic-version"):
            raise invalid("anthropic-version: header is required")
        try:
            body = json.loads(raw)
        except ValueError:
            raise invalid("There was an issue with your request body: invalid JSON") from None
        if not isinstance(body, dict):
            raise invalid("Input should be a valid dictionary")
        for name in ("model", "max_tokens", "messages"):
            if name not in body:
                raise invalid(f"{name}: Field required")
        if not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1:
            raise invalid("max_tokens: Input should be greater than or equal to 1")
        messages = body["messages"]
        if not isinstance(messages, list):
            raise invalid("messages: Input should be a valid list")
        for i, m in enumerate(messages):
            role = m.get("role") if isinstance(m, dict) else None
            if role == "system":
                raise invalid(
                    'messages: Unexpected role "system". The Messages API accepts a top-level '
                    '`system` parameter, not "system" as an input message role.'
                )
            if role not in ("user", "assistant"):
                raise invalid(f"messages.{i}.role: Input should be 'user' or 'assistant'")
            if not isinstance(m.get("content"), (str, list)):
                raise invalid(f"messages.{i}.content: Field required")
        system = body.get("system")
        if system is not None and not isinstance(system, (str, list)):
            raise invalid("system: Input should be a valid string")
        thinking = body.get("thinking")
        if thinking is not None:
            if not isinstance(thinking, dict) or thinking.get("type") not in (
                "enabled",
                "disabled",
                "adaptive",
            ):
                raise invalid(
                    "thinking: Input tag found using 'type' does not match any of the "
                    "expected tags: 'enabled', 'disabled', 'adaptive'"
                )
            version = _claude_version(str(body["model"]))
            if thinking["type"] == "enabled":
                if version is not None and version >= (4, 7):
                    raise invalid(
                        '"thinking.type.enabled" is not supported for this model. Use '
                        '"thinking.type.adaptive" and "output_config.effort" to control '
                        "thinking behavior."
                    )
                budget = thinking.get("budget_tokens")
                if not isinstance(budget, int):
                    raise invalid("thinking.enabled.budget_tokens: Field required")
                if budget < 1024:
                    raise invalid(
                        "thinking.enabled.budget_tokens: "
                        "Input should be greater than or equal to 1024"
                    )
                if body["max_tokens"] <= budget:
                    raise invalid(
                        "`max_tokens` must be greater than `thinking.budget_tokens`. Please "
                        "consult our documentation at "
                        "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
                        "#max-tokens-and-context-window-size"
                    )
            if thinking["type"] == "adaptive" and version is not None and version < (4, 6):
                raise invalid("adaptive thinking is not supported on this model")
        effort = (body.get("output_config") or {}).get("effort")
        if effort is not None and effort not in ("low", "medium", "high", "xhigh", "max"):
            raise invalid(
                "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'"
            )
        found = problems("anthropic", "#/request_schema", body)
        if found:
            raise invalid(found[0])
        _anthropic_tool_rules(body)
        return body

    @staticmethod
    def scripted_error(action: Fail) -> _ApiError:
        kind, message = _ANTHROPIC_ERRORS.get(action.status, ("api_error", "Internal server error"))
        return _ApiError(
            action.status,
            action.message or message,
            kind=action.error_type or kind,
            headers=_retry_headers(action),
        )

    @staticmethod
    def success(request: dict[str, Any], action: Reply, n: int) -> dict[str, Any]:
        texts = [action.text] if isinstance(action.text, str) else list(action.text)
        content: list[dict[str, Any]] = []
        thinking = request.get("thinking")
        if isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive"):
            content.append(
                {"type": "thinking", "thinking": "Let me think.", "signature": "c2lnbmF0dXJl"}
            )
        content.extend({"type": "text", "text": t} for t in texts)
        system = request.get("system")
        tokens_in = _words(system) + sum(_words(m.get("content")) for m in request["messages"])
        return {
            "id": f"msg_fake{n:06d}",
            "type": "message",
            "role": "assistant",
            "model": request["model"],
            "content": content,
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": tokens_in,
                "output_tokens": sum(_words(t) for t in texts),
                **(
                    {}
                    if action.cache_read is None
                    else {"cache_read_input_tokens": action.cache_read}
                ),
                **(
                    {}
                    if action.cache_write is None
                    else {"cache_creation_input_tokens": action.cache_write}
                ),
            },
        }

    @staticmethod
    def tool_calls(request: dict[str, Any], action: ToolCalls, n: int) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if action.text:
            content.append({"type": "text", "text": action.text})
        content.extend(
            {"type": "tool_use", "id": f"toolu_fake{n:04d}{i}", "name": name, "input": args}
            for i, (name, args) in enumerate(action.calls)
        )
        return {
            "id": f"msg_fake{n:06d}",
            "type": "message",
            "role": "assistant",
            "model": request["model"],
            "content": content,
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }

    @staticmethod
    def error_body(e: _ApiError) -> dict[str, Any]:
        return {
            "type": "error",
            "error": {"type": e.kind or "api_error", "message": e.message},
            "request_id": "req_fake0001",
        }


#: the API each path serves
_APIS: dict[str, type[_Api]] = {"/v1/chat/completions": _OpenAI, "/v1/messages": _Anthropic}
