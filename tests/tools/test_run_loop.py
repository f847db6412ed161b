"""The run loop against the providers' wire protocols (the model fakes check every request
against the published API descriptions) and a real MCP server over Streamable HTTP: tools
offered in each API's format, parallel calls, results wrapped as untrusted content and sent back
as the API wants them, errors as error results, the call limit, and the calls recorded."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from hookwise.engine.config.grants import Grant
from hookwise.engine.config.models import McpServerConfig, ProviderConfig, ToolsConfig
from hookwise.server.runtime.providers.anthropic import AnthropicProvider
from hookwise.server.runtime.providers.base import ChatMessage, ProviderError
from hookwise.server.runtime.providers.openai import OpenAIProvider
from hookwise.server.runtime.providers.retry import RetryPolicy
from hookwise.server.runtime.toolloop import RunTools, converse
from hookwise.server.store.toolcalls import ToolCallRecord
from hookwise.server.tools.host import ToolHost
from tests.fakes.mcp_server import HttpServer
from tests.fakes.model_server import API_KEY, ModelServer, ToolCalls
from tests.fakes.specs import check

REPO = Path(__file__).resolve().parents[2]


class Recorder:
    def __init__(self, earlier: int = 0) -> None:
        self.writes: list[list[ToolCallRecord]] = []
        self.earlier = earlier

    async def record(self, calls: Sequence[ToolCallRecord]) -> None:
        self.writes.append(list(calls))

    async def previous(self, run_id: str) -> tuple[int, int]:
        return self.earlier, self.earlier


@pytest.fixture(scope="module")
def mcp() -> Iterator[HttpServer]:
    with HttpServer() as server:
        yield server


@pytest.fixture(scope="module")
def models() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


def _provider(kind: str, models: ModelServer) -> Any:
    if kind == "openai":
        pc = ProviderConfig(api="openai", base_url=models.openai_base_url, api_key=API_KEY)
        return OpenAIProvider("oa", pc, retry=RetryPolicy(max_retries=0))
    pc = ProviderConfig(api="anthropic", base_url=models.anthropic_base_url, api_key=API_KEY)
    return AnthropicProvider("claude", pc, retry=RetryPolicy(max_retries=0))


def _converse(
    kind: str,
    models: ModelServer,
    mcp: HttpServer,
    *,
    grant: Sequence[str] = ("t.*",),
    recorder: Recorder | None = None,
    **limits: Any,
) -> tuple[Any, list[ToolCallRecord], Recorder]:
    recorder = recorder or Recorder()

    async def go() -> tuple[Any, list[ToolCallRecord]]:
        host = ToolHost(
            ToolsConfig(mcp_servers={"t": McpServerConfig(url=mcp.url)}, **limits), base_dir=REPO
        )
        provider = _provider(kind, models)
        try:
            return await converse(
                provider,
                "gpt-4o" if kind == "openai" else "claude-sonnet-4-5",
                [ChatMessage("system", "be brief"), ChatMessage("user", "check the deploy")],
                thinking=None,
                deadline=time.monotonic() + 30,
                tools=RunTools(host, Grant.parse(grant), recorder, "run-1"),
            )
        finally:
            await provider.aclose()
            await host.aclose()

    completion, calls = asyncio.run(go())
    return completion, calls, recorder


def _bodies(models: ModelServer) -> list[dict[str, Any]]:
    return [r.body for r in models.requests]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_parallel_calls_are_made_and_their_results_sent_back(
    kind: str, models: ModelServer, mcp: HttpServer
) -> None:
    models.reset()
    models.enqueue(
        ToolCalls((("t__echo", {"text": "one"}), ("t__fail", {"reason": "bad"}))),
    )
    models.reply("all done")
    completion, calls, recorder = _converse(kind, models, mcp)
    assert completion.text == "all done"
    assert [(c.tool, c.outcome) for c in calls] == [("echo", "ok"), ("fail", "error")]
    # `started` rows were written before the calls were made, outcomes after
    assert [[c.outcome for c in w] for w in recorder.writes] == [
        ["started", "started"],
        ["ok", "error"],
    ]
    first, second = _bodies(models)
    if kind == "openai":
        names = [t["function"]["name"] for t in first["tools"]]
        assert "t__echo" in names and first["tool_choice"] == "auto"
        assistant, r1, r2 = second["messages"][-3:]
        assert assistant["role"] == "assistant" and len(assistant["tool_calls"]) == 2
        assert assistant["tool_calls"][0]["function"]["arguments"] == json.dumps({"text": "one"})
        assert (r1["role"], r1["tool_call_id"]) == ("tool", assistant["tool_calls"][0]["id"])
        assert "EXTERNAL_UNTRUSTED_CONTENT" in r1["content"] and "one" in r1["content"]
        assert r2["content"].count("error: Error executing tool fail: bad") == 1
        for body in (first, second):
            check("openai", "#/components/schemas/CreateChatCompletionRequest", body)
    else:
        names = [t["name"] for t in first["tools"]]
        assert "t__echo" in names and "input_schema" in first["tools"][0]
        assistant, results = second["messages"][-2:]
        assert [b["type"] for b in assistant["content"]] == ["tool_use", "tool_use"]
        assert results["role"] == "user"
        blocks = results["content"]
        assert [b["type"] for b in blocks] == ["tool_result", "tool_result"]
        assert blocks[0]["tool_use_id"] == assistant["content"][0]["id"]
        assert "EXTERNAL_UNTRUSTED_CONTENT" in blocks[0]["content"]
        assert blocks[1]["is_error"] is True and "is_error" not in blocks[0]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_an_ungranted_or_invented_tool_is_never_called(
    kind: str, models: ModelServer, mcp: HttpServer
) -> None:
    models.reset()
    models.enqueue(ToolCalls((("t__count", {}), ("delete_everything", {}))))
    models.reply("ok")
    completion, calls, _ = _converse(kind, models, mcp, grant=("t.echo",))
    assert completion.text == "ok" and calls == []
    first, second = _bodies(models)
    offered = [t.get("name") or t["function"]["name"] for t in first["tools"]]
    assert offered == ["t__echo"]
    text = json.dumps(second["messages"][-2:])
    assert "there is no tool named 't__count'" in text
    assert "there is no tool named 'delete_everything'" in text


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_past_the_limit_calls_are_refused_and_tools_turned_off(
    kind: str, models: ModelServer, mcp: HttpServer
) -> None:
    models.reset()
    models.enqueue(
        ToolCalls(tuple(("t__echo", {"text": f"n{i}"}) for i in range(3))),
    )
    models.reply("final")
    completion, calls, _ = _converse(kind, models, mcp, max_calls_per_run=2)
    assert completion.text == "final" and len(calls) == 2
    last = _bodies(models)[-1]
    if kind == "openai":
        assert last["tool_choice"] == "none"
    else:
        assert last["tool_choice"] == {"type": "none"}
    assert "reached its limit of 2 tool calls" in json.dumps(last["messages"][-2:])


def test_a_run_that_already_called_tools_is_not_run_again(
    models: ModelServer, mcp: HttpServer
) -> None:
    models.reset()
    with pytest.raises(ProviderError, match="interrupted after it had called tools"):
        _converse("openai", models, mcp, recorder=Recorder(earlier=1))
    assert models.requests == []


def test_without_a_grant_no_tools_are_sent(models: ModelServer, mcp: HttpServer) -> None:
    models.reset()
    models.reply("plain")
    completion, calls, _ = _converse("openai", models, mcp, grant=())
    assert completion.text == "plain" and calls == []
    assert "tools" not in models.last_request.body


def test_the_fakes_tool_calls_follow_the_api_descriptions(models: ModelServer) -> None:
    import httpx

    models.reset()
    models.enqueue(ToolCalls((("t__echo", {"text": "x"}),)), ToolCalls((("t__echo", {}),), "hm"))
    headers = {"authorization": f"Bearer {API_KEY}"}
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    r = httpx.post(f"{models.openai_base_url}/chat/completions", json=body, headers=headers)
    check("openai", "#/components/schemas/CreateChatCompletionResponse", r.json())
    assert r.json()["choices"][0]["finish_reason"] == "tool_calls"
    headers = {"x-api-key": API_KEY, "anthropic-version": "2023-06-01"}
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": body["messages"]}
    r = httpx.post(f"{models.anthropic_base_url}/v1/messages", json=body, headers=headers)
    answer = r.json()
    assert answer["stop_reason"] == "tool_use"
    check("anthropic", "#/response_schema", answer)
    check("anthropic_tools", "#/response/content_block_tool_use", answer["content"][1])


def test_arguments_and_results_are_kept_only_where_payloads_are(
    models: ModelServer, mcp: HttpServer
) -> None:
    def calls(keep: bool) -> list[ToolCallRecord]:
        models.reset()
        models.enqueue(ToolCalls((("t__echo", {"text": "kept?"}),)))
        models.reply("done")
        recorder = Recorder()

        async def go() -> list[ToolCallRecord]:
            host = ToolHost(
                ToolsConfig(mcp_servers={"t": McpServerConfig(url=mcp.url)}), base_dir=REPO
            )
            provider = _provider("openai", models)
            try:
                _, made = await converse(
                    provider,
                    "gpt-4o",
                    [ChatMessage("user", "go")],
                    thinking=None,
                    deadline=time.monotonic() + 30,
                    tools=RunTools(host, Grant.parse(["t.echo"]), recorder, "run-2", keep),
                )
                return made
            finally:
                await provider.aclose()
                await host.aclose()

        return asyncio.run(go())

    [kept] = calls(True)
    assert (kept.arguments, kept.result) == ('{"text":"kept?"}', "kept?")
    [digested] = calls(False)
    assert (digested.arguments, digested.result) == (None, None)
    assert digested.arguments_bytes == len('{"text":"kept?"}')
    assert digested.arguments_digest == kept.arguments_digest
    assert digested.result_digest == kept.result_digest and digested.result_bytes == 5
