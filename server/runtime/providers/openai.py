"""The OpenAI-compatible Chat Completions protocol (OpenAI, Ollama, vLLM, llama.cpp, OpenRouter).

`POST {baseUrl}/chat/completions` with `Authorization: Bearer <apiKey>` (omitted when no key is
configured, as local servers need none) and the configured extra headers. `thinking` becomes
`reasoning_effort` (`minimal|low|medium|high`; omitted for `off`). The reply is
`choices[0].message.content`; usage is `usage.prompt_tokens` (less the cached tokens of
`prompt_tokens_details`, counted apart) / `usage.completion_tokens`.
With tools, they are sent as `tools: [{type: function, function: {name, description,
parameters}}]` with `tool_choice` (`auto`, or `none` once no more calls may be made); the
answer's `message.tool_calls` (whatever `finish_reason` says) are the calls, their `arguments` a
JSON text parsed here; the assistant message goes back with its `tool_calls` and each result as a
`{role: tool, tool_call_id, content}` message (text only; an error is said in the text).
Errors are read from the API's body, `{"error": {"message", "type", "code"}}`; 429 (except
`insufficient_quota`) and 5xx are retried. Error classes (for fallback chains): 429 is
`rate_limited` (`quota` for `insufficient_quota`), 503 `overloaded`, other 5xx `server_error`,
400/401/403/404 `bad_request`/`auth`/`forbidden`/`not_found`, a `refusal` without content
`refusal`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx

from ....engine.config.models import ProviderConfig
from .base import (
    ChatMessage,
    Completion,
    ProviderError,
    ToolCall,
    ToolSpec,
    Usage,
    check_thinking,
)
from .http import HttpProvider
from .retry import RetryPolicy
from .transport import (
    http_error,
    json_object,
    malformed,
    retryable_status,
)

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAIProvider(HttpProvider):
    """A Chat Completions endpoint. Owns its `httpx.AsyncClient` unless one is given."""

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
        self._api_key = api_key if api_key is not None else config.api_key
        headers = {"content-type": "application/json", "accept": "application/json"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        url = (config.base_url or DEFAULT_BASE_URL).rstrip("/") + "/chat/completions"
        super().__init__(provider_id, config, url=url, headers=headers, client=client, retry=retry)

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
        body: dict[str, object] = {
            "model": model,
            "messages": [w for m in messages for w in _wire(m)],
        }
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters or {"type": "object", "properties": {}},
                    },
                }
                for t in tools
            ]
            body["tool_choice"] = tool_choice
        effort = check_thinking(self.provider_id, thinking)
        if effort is not None:
            body["reasoning_effort"] = effort
        return await self._call(body, model, deadline=deadline, retries=retries)

    def _parse(self, response: httpx.Response, model: str) -> Completion:
        data = json_object(response)
        if not response.is_success:
            raise self._error(response, data)
        if data is None:
            raise malformed(self.provider_id, "the body is not a JSON object")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise malformed(self.provider_id, "no choices[0]")
        message = choices[0].get("message")
        content = message.get("content") if isinstance(message, dict) else None
        calls = _tool_calls(message.get("tool_calls") if isinstance(message, dict) else None)
        if calls:
            answered = data.get("model")
            return Completion(
                text=content if isinstance(content, str) else "",
                model=answered if isinstance(answered, str) and answered else model,
                usage=_usage(data.get("usage")),
                tool_calls=calls,
            )
        if not isinstance(content, str):
            refusal = message.get("refusal") if isinstance(message, dict) else None
            if isinstance(refusal, str) and refusal:
                raise malformed(
                    self.provider_id, "the model refused and sent no content", "refusal"
                )
            raise malformed(self.provider_id, "choices[0].message.content is not a string")
        answered_model = data.get("model")
        return Completion(
            text=content,
            model=answered_model if isinstance(answered_model, str) and answered_model else model,
            usage=_usage(data.get("usage")),
        )

    def _error(self, response: httpx.Response, data: dict[str, object] | None) -> ProviderError:
        message = kind = code = None
        err = data.get("error") if data else None
        if isinstance(err, dict):
            message, kind, code = err.get("message"), err.get("type"), err.get("code")
        elif isinstance(err, str):
            message = err
        elif data and isinstance(data.get("message"), str):  # vLLM puts them at the top level
            message, kind, code = data.get("message"), data.get("type"), data.get("code")
        label = code if isinstance(code, str) and code else kind
        retryable = retryable_status(response.status_code) and code != "insufficient_quota"
        return http_error(
            self.provider_id,
            response,
            api_message=message if isinstance(message, str) else None,
            api_type=label if isinstance(label, str) else None,
            retryable=retryable,
            secrets=[self._api_key],
            error_class="quota" if code == "insufficient_quota" else None,
        )


def _wire(m: ChatMessage) -> list[dict[str, Any]]:
    if m.role == "tool":
        return [
            {"role": "tool", "tool_call_id": r.call_id, "content": r.content}
            for r in m.tool_results
        ]
    if m.role == "assistant" and m.tool_calls:
        return [
            {
                "role": "assistant",
                "content": m.content or None,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.raw_arguments or "{}"},
                    }
                    for c in m.tool_calls
                ],
            }
        ]
    return [{"role": m.role, "content": m.content}]


def _tool_calls(raw: object) -> tuple[ToolCall, ...]:
    if not isinstance(raw, list):
        return ()
    calls: list[ToolCall] = []
    for item in raw:
        if not isinstance(item, dict) or item.get("type", "function") != "function":
            continue
        fn = item.get("function")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            continue
        text = fn.get("arguments")
        text = text if isinstance(text, str) else ""
        try:
            parsed = json.loads(text) if text.strip() else {}
        except ValueError:
            parsed = None
        call_id = item.get("id")
        calls.append(
            ToolCall(
                id=call_id if isinstance(call_id, str) else f"call_{len(calls)}",
                name=fn["name"],
                arguments=parsed if isinstance(parsed, dict) else None,
                raw_arguments=text,
            )
        )
    return tuple(calls)


def _usage(raw: object) -> Usage | None:
    """`usage`: `prompt_tokens` include the cached ones (`prompt_tokens_details.cached_tokens`,
    and `cache_write_tokens` where the server reports them); `input_tokens` are the others."""
    if not isinstance(raw, dict):
        return None
    prompt, completion = raw.get("prompt_tokens"), raw.get("completion_tokens")
    details = raw.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}
    read, written = details.get("cached_tokens"), details.get("cache_write_tokens")
    read = read if isinstance(read, int) and not isinstance(read, bool) else None
    written = written if isinstance(written, int) and not isinstance(written, bool) else None
    uncached = prompt if isinstance(prompt, int) else None
    if uncached is not None:
        uncached = max(0, uncached - (read or 0) - (written or 0))
    return Usage(
        input_tokens=uncached,
        output_tokens=completion if isinstance(completion, int) else None,
        cache_read=read,
        cache_write=written,
    )
