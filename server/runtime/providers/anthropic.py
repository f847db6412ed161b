"""The Anthropic Messages protocol.

`POST {baseUrl}/v1/messages` (default `https://api.anthropic.com`; a baseUrl already ending in
`/v1` is accepted) with `x-api-key`, `anthropic-version: 2023-06-01` and the configured extra
headers. System messages are joined into the top-level `system` field; `max_tokens` is
`maxTokens` from the provider config, default 4096.

A thinking level is requested as the model accepts it (Anthropic's extended and adaptive thinking
documentation): Claude 4.6 and later models (and families hookwise does not recognise, which are
newer) get adaptive thinking, `{"type": "adaptive"}` with `output_config.effort` (minimal and low
are `low`, medium `medium`, high `high`); Claude Opus 4.7 and later refuse the older form with
400, and it is deprecated on 4.6. Older models (Claude 3.x, 4.0-4.5) get
`{"type": "enabled", "budget_tokens": N}` with N from `THINKING_BUDGETS`, and `max_tokens` grows
by N so the answer keeps its room. `thinkingMode` (`adaptive` or `budget`) overrides the choice
(for a proxy's model aliases, whose names say nothing). `off` sends nothing. The reply is the `text` blocks of
`content[]` joined (thinking blocks are skipped); usage is `usage.input_tokens/output_tokens`.
With tools, they are sent as `tools: [{name, description, input_schema}]` (and `tool_choice:
{type: none}` once no more calls may be made); the answer's `tool_use` blocks are the calls (a
`tool_use` cut short by `max_tokens` is not made: the run fails); the assistant message goes back
exactly as received (its content array, thinking blocks included) and the results as one user
message of `tool_result` blocks, with `is_error` for a failed call.
Errors are read from `{"type": "error", "error": {"type", "message"}}`; 429, 5xx and 529
(overloaded) are retried. Each error type maps to an error class (`ERROR_CLASSES`: a fallback
chain moves on for `rate_limit_error`, `overloaded_error`, `api_error`, `timeout_error` and
`billing_error`); usage includes `cache_read_input_tokens` and `cache_creation_input_tokens`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import httpx

from ....engine.config.models import ProviderConfig
from .base import ChatMessage, Completion, ToolCall, ToolSpec, Usage, check_thinking
from .http import HttpProvider
from .retry import RetryPolicy
from .transport import (
    http_error,
    json_object,
    malformed,
    retryable_status,
)

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
THINKING_BUDGETS: dict[str, int] = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}
EFFORTS: dict[str, str] = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}
_VERSION = re.compile(r"claude-(?:[a-z]+-)?(?P<major>\d{1,2})(?:[-.](?P<minor>\d{1,2}))?(?![\d])")
_ADAPTIVE_SINCE = (4, 6)


def thinking_style(model: str, mode: str = "auto") -> str:
    """`adaptive` or `budget`: how `model` takes a thinking level (see the module docstring)."""
    if mode in ("adaptive", "budget"):
        return mode
    m = _VERSION.search(model.lower())
    if m is None:
        return "adaptive"  # a family hookwise does not know is a newer one
    version = (int(m["major"]), int(m["minor"] or 0))
    return "adaptive" if version >= _ADAPTIVE_SINCE else "budget"


class AnthropicProvider(HttpProvider):
    """A Messages endpoint. Owns its `httpx.AsyncClient` unless one is given."""

    supports_tools = True

    def __init__(
        self,
        provider_id: str,
        config: ProviderConfig,
        *,
        api_key: str | None = None,
        client: httpx.AsyncClient | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        base = (config.base_url or DEFAULT_BASE_URL).rstrip("/")
        url = base + ("/messages" if base.endswith("/v1") else "/v1/messages")
        self._api_key = api_key if api_key is not None else config.api_key
        headers = {
            "content-type": "application/json",
            "accept": "application/json",
            "anthropic-version": API_VERSION,
        }
        if self._api_key:
            headers["x-api-key"] = self._api_key
        self._max_tokens = config.max_tokens or DEFAULT_MAX_TOKENS
        self._thinking_mode = config.thinking_mode
        super().__init__(provider_id, config, url=url, headers=headers, client=client, retry=retry)

    def request_body(
        self, model: str, messages: Sequence[ChatMessage], thinking: str | None
    ) -> dict[str, object]:
        """The JSON body sent for these messages (system lifted out, thinking mapped)."""
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        body: dict[str, object] = {
            "model": model,
            "max_tokens": self._max_tokens,
            "messages": [_wire(m) for m in messages if m.role != "system"],
        }
        if system:
            body["system"] = system
        level = check_thinking(self.provider_id, thinking)
        if level is None:
            return body
        if thinking_style(model, self._thinking_mode) == "adaptive":
            body["thinking"] = {"type": "adaptive"}
            body["output_config"] = {"effort": EFFORTS[level]}
        else:
            budget = THINKING_BUDGETS[level]
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            body["max_tokens"] = self._max_tokens + budget
        return body

    async def complete(
        self,
        model: str,
        messages: Sequence[ChatMessage],
        *,
        thinking: str | None,
        deadline: float,
        tools: Sequence[ToolSpec] = (),
        tool_choice: str = "auto",
        retries: bool = True,
    ) -> Completion:
        body = self.request_body(model, messages, thinking)
        if tools:
            body["tools"] = [
                {
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.parameters or {"type": "object", "properties": {}},
                }
                for t in tools
            ]
            if tool_choice == "none":
                body["tool_choice"] = {"type": "none"}
        return await self._call(body, model, deadline=deadline, retries=retries)

    def _parse(self, response: httpx.Response, model: str) -> Completion:
        data = json_object(response)
        if not response.is_success:
            err = data.get("error") if data else None
            message = err.get("message") if isinstance(err, dict) else None
            kind = err.get("type") if isinstance(err, dict) else None
            raise http_error(
                self.provider_id,
                response,
                api_message=message if isinstance(message, str) else None,
                api_type=kind if isinstance(kind, str) else None,
                retryable=retryable_status(response.status_code) or kind == "overloaded_error",
                secrets=[self._api_key],
                error_class=ERROR_CLASSES.get(kind) if isinstance(kind, str) else None,
            )
        if data is None:
            raise malformed(self.provider_id, "the body is not a JSON object")
        content = data.get("content")
        if not isinstance(content, list):
            raise malformed(self.provider_id, "content is not a list")
        texts = [
            block["text"]
            for block in content
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ]
        stop_reason = data.get("stop_reason")
        calls = tuple(
            ToolCall(
                id=str(block.get("id")),
                name=block["name"],
                arguments=block.get("input") if isinstance(block.get("input"), dict) else None,
                # what an OpenAI-compatible fallback of the chain is sent back
                raw_arguments=json.dumps(block.get("input"))
                if isinstance(block.get("input"), dict)
                else "",
            )
            for block in content
            if isinstance(block, dict)
            and block.get("type") == "tool_use"
            and isinstance(block.get("name"), str)
        )
        if calls:
            if stop_reason == "max_tokens":
                raise malformed(self.provider_id, "a tool call was cut short by max_tokens")
            answered_model = data.get("model")
            return Completion(
                text="".join(texts),
                model=answered_model
                if isinstance(answered_model, str) and answered_model
                else model,
                usage=_usage(data.get("usage")),
                tool_calls=calls,
                raw=content,
            )
        if not texts and stop_reason == "refusal":
            raise malformed(self.provider_id, "the model refused (stop_reason refusal)", "refusal")
        if not texts and stop_reason != "end_turn":
            raise malformed(self.provider_id, f"no text in the answer (stop_reason {stop_reason})")
        answered_model = data.get("model")
        return Completion(
            text="".join(texts),
            model=answered_model if isinstance(answered_model, str) and answered_model else model,
            usage=_usage(data.get("usage")),
        )


def _wire(m: ChatMessage) -> dict[str, Any]:
    if m.role == "tool":
        return {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": r.call_id,
                    "content": r.content,
                    **({"is_error": True} if r.is_error else {}),
                }
                for r in m.tool_results
            ],
        }
    if m.role == "assistant" and m.tool_calls:
        blocks = m.raw or [
            *([{"type": "text", "text": m.content}] if m.content else []),
            *(
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments or {}}
                for c in m.tool_calls
            ),
        ]
        return {"role": "assistant", "content": blocks}
    return {"role": m.role, "content": m.content}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(raw: object) -> Usage | None:
    """`usage`: `input_tokens` are the uncached ones; `cache_read_input_tokens` and
    `cache_creation_input_tokens` the cache's, where the API reports them."""
    if not isinstance(raw, dict):
        return None
    return Usage(
        input_tokens=_int(raw.get("input_tokens")),
        output_tokens=_int(raw.get("output_tokens")),
        cache_read=_int(raw.get("cache_read_input_tokens")),
        cache_write=_int(raw.get("cache_creation_input_tokens")),
    )


#: the API's error types (`error.type`) as error classes; `billing_error` is a quota
ERROR_CLASSES: dict[str, str] = {
    "invalid_request_error": "bad_request",
    "authentication_error": "auth",
    "billing_error": "quota",
    "permission_error": "forbidden",
    "not_found_error": "not_found",
    "request_too_large": "too_large",
    "rate_limit_error": "rate_limited",
    "timeout_error": "timeout",
    "api_error": "server_error",
    "overloaded_error": "overloaded",
}
