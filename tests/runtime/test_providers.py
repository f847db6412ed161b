"""Model providers against the loopback fake (OpenAI, Anthropic), a script (command), and echo."""

from __future__ import annotations

import asyncio
import socket
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import attrs
import httpx
import pytest

from hookwise.engine.config.convert import structure
from hookwise.engine.config.models import ModelsConfig, ProviderConfig
from hookwise.engine.errors import ConfigError
from hookwise.server.runtime.providers import (
    ChatMessage,
    Completion,
    Provider,
    ProviderError,
    Providers,
    ProviderTimeout,
    Usage,
)
from hookwise.server.runtime.providers.anthropic import AnthropicProvider, thinking_style
from hookwise.server.runtime.providers.command import CommandProvider, render_prompt
from hookwise.server.runtime.providers.echo import EchoProvider
from hookwise.server.runtime.providers.openai import OpenAIProvider
from hookwise.server.runtime.providers.retry import RetryPolicy, parse_retry_after
from tests.fakes.model_server import Raw, Reply, Slow
from tests.fakes.specs import check

SYSTEM = ChatMessage("system", "You are terse.")
USER = ChatMessage("user", "Say hello to the team")
CONVERSATION = (SYSTEM, USER)


class RecordedSleeps:
    """A `sleep` for `RetryPolicy` that records the waits instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def call(
    make: Callable[[], Provider],
    messages: Sequence[ChatMessage] = CONVERSATION,
    *,
    model: str = "test-model",
    thinking: str | None = None,
    budget: float = 30.0,
) -> Completion:
    """Build the provider inside a fresh event loop, complete once, close it."""

    async def go() -> Completion:
        provider = make()
        try:
            coro = provider.complete(
                model, messages, thinking=thinking, deadline=time.monotonic() + budget
            )
            # A guard well past the deadline: hitting it means the deadline was not respected.
            return await asyncio.wait_for(coro, timeout=budget + 10)
        finally:
            await provider.aclose()

    return asyncio.run(go())


def failure(make: Callable[[], Provider], **kwargs: object) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        call(make, **kwargs)  # type: ignore[arg-type]
    return info.value


def openai(
    server, *, retry: RetryPolicy | None = None, api_key: str | None = "", **config: object
) -> Callable[[], OpenAIProvider]:
    key = server.api_key if api_key == "" else api_key
    pc = ProviderConfig(api="openai", base_url=server.openai_base_url, api_key=key, **config)
    return lambda: OpenAIProvider("oa", pc, retry=retry or RetryPolicy(max_retries=0))


def anthropic(
    server, *, retry: RetryPolicy | None = None, api_key: str | None = "", **config: object
) -> Callable[[], AnthropicProvider]:
    key = server.api_key if api_key == "" else api_key
    pc = ProviderConfig(api="anthropic", base_url=server.anthropic_base_url, api_key=key, **config)
    return lambda: AnthropicProvider("claude", pc, retry=retry or RetryPolicy(max_retries=0))


# ---------------------------------------------------------------------------------------------
# OpenAI Chat Completions


def test_openai_sends_bearer_key_configured_headers_and_the_messages(model_server):
    call(openai(model_server, headers={"X-Org": "acme"}), model="gpt-4o")

    request = model_server.last_request
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {model_server.api_key}"
    assert request.headers["x-org"] == "acme"
    assert request.headers["content-type"] == "application/json"
    assert request.body == {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Say hello to the team"},
        ],
    }


def test_openai_without_a_key_sends_no_authorization_header(model_server):
    error = failure(openai(model_server, api_key=None))

    assert "authorization" not in model_server.last_request.headers
    assert error.status == 401
    assert not error.retryable
    assert "You didn't provide an API key" in error.message


@pytest.mark.parametrize(
    ("thinking", "effort"),
    [
        (None, None),
        ("off", None),
        ("minimal", "minimal"),
        ("low", "low"),
        ("medium", "medium"),
        ("high", "high"),
    ],
)
def test_openai_maps_thinking_to_reasoning_effort(model_server, thinking, effort):
    call(openai(model_server), thinking=thinking)

    assert model_server.last_request.body.get("reasoning_effort") == effort
    assert ("reasoning_effort" in model_server.last_request.body) == (effort is not None)


def test_openai_returns_the_reply_the_model_and_the_usage(model_server):
    model_server.reply("Hello, team!")

    completion = call(openai(model_server), model="gpt-4o-mini")

    # The fake counts words: 3 + 5 in, 2 out.
    assert completion == Completion(
        text="Hello, team!", model="gpt-4o-mini", usage=Usage(input_tokens=8, output_tokens=2)
    )


def test_openai_unknown_thinking_level_fails_before_any_request(model_server):
    error = failure(openai(model_server), thinking="extreme")

    assert "unknown thinking level 'extreme'" in error.message
    assert model_server.requests == []


def test_openai_wrong_key_is_a_401_with_the_api_message(model_server):
    error = failure(openai(model_server, api_key="sk-wrong-0000000000000"))

    assert error.status == 401
    assert not error.retryable
    assert "Incorrect API key provided" in error.message
    assert "invalid_api_key" in error.message


@pytest.mark.parametrize(
    ("status", "retryable", "api_message"),
    [
        (400, False, "Invalid request."),
        (404, False, "The model does not exist."),
        (429, True, "Rate limit reached for requests per min"),
        (500, True, "The server had an error while processing your request."),
        (503, True, "The engine is currently overloaded"),
    ],
)
def test_openai_error_answers_become_provider_errors(model_server, status, retryable, api_message):
    model_server.fail(status)

    error = failure(openai(model_server))

    assert error.status == status
    assert error.retryable is retryable
    assert error.message.startswith(f"Provider 'oa' answered HTTP {status}")
    assert api_message in error.message
    assert len(model_server.requests) == 1


def test_openai_insufficient_quota_429_is_not_retried(model_server):
    model_server.fail(429, code="insufficient_quota", message="You exceeded your current quota.")

    error = failure(openai(model_server, retry=RetryPolicy(max_retries=3, sleep=RecordedSleeps())))

    assert error.status == 429
    assert not error.retryable
    assert "You exceeded your current quota." in error.message
    assert len(model_server.requests) == 1


def test_error_messages_never_contain_the_api_key_or_the_prompt(model_server):
    model_server.fail(400, message=f"Key {model_server.api_key} cannot use this model.")

    error = failure(openai(model_server))

    assert model_server.api_key not in error.message
    assert "Key *** cannot use this model." in error.message
    assert USER.content not in error.message


def test_openai_error_body_with_top_level_message_is_read(model_server):
    # vLLM and some compatible servers put the error fields at the top level.
    model_server.raw(400, '{"object": "error", "message": "max_tokens is too large", "code": 400}')

    error = failure(openai(model_server))

    assert error.status == 400
    assert "max_tokens is too large" in error.message


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("this is not json", "the body is not a JSON object"),
        ('{"choices": []}', "no choices[0]"),
        ('{"choices": [{"message": {"role": "assistant", "content": null}}]}', "not a string"),
    ],
)
def test_openai_malformed_success_answer_is_an_error(model_server, body, problem):
    model_server.raw(200, body)

    error = failure(openai(model_server))

    assert "malformed answer" in error.message
    assert problem in error.message
    assert not error.retryable


# ---------------------------------------------------------------------------------------------
# Anthropic Messages


def test_anthropic_sends_key_version_and_lifts_system_messages(model_server):
    messages = (
        SYSTEM,
        ChatMessage("user", "First question"),
        ChatMessage("assistant", "First answer"),
        ChatMessage("system", "Be kind."),
        USER,
    )
    call(anthropic(model_server, headers={"anthropic-beta": "x-1"}), messages, model="claude-x")

    request = model_server.last_request
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == model_server.api_key
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.headers["anthropic-beta"] == "x-1"
    assert "authorization" not in request.headers
    assert request.body == {
        "model": "claude-x",
        "max_tokens": 4096,
        "system": "You are terse.\n\nBe kind.",
        "messages": [
            {"role": "user", "content": "First question"},
            {"role": "assistant", "content": "First answer"},
            {"role": "user", "content": "Say hello to the team"},
        ],
    }


def test_anthropic_without_system_messages_sends_no_system_field(model_server):
    call(anthropic(model_server), (USER,))

    assert "system" not in model_server.last_request.body


def test_anthropic_accepts_a_base_url_ending_in_v1(model_server):
    pc = ProviderConfig(
        api="anthropic", base_url=model_server.url + "/v1/", api_key=model_server.api_key
    )
    call(lambda: AnthropicProvider("claude", pc))

    assert model_server.last_request.path == "/v1/messages"


@pytest.mark.parametrize(
    ("thinking", "budget"),
    [
        (None, None),
        ("off", None),
        ("minimal", 1024),
        ("low", 2048),
        ("medium", 8192),
        ("high", 16384),
    ],
)
def test_anthropic_older_models_get_a_thinking_token_budget(model_server, thinking, budget):
    model_server.reply("Done.")

    completion = call(
        anthropic(model_server), model="claude-sonnet-4-5-20250929", thinking=thinking
    )

    body = model_server.last_request.body
    if budget is None:
        assert "thinking" not in body
        assert body["max_tokens"] == 4096
    else:
        assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
        assert body["max_tokens"] == 4096 + budget
        assert "output_config" not in body
    # With thinking the fake answers a thinking block first; only text reaches the reply.
    assert completion.text == "Done."


@pytest.mark.parametrize(
    ("model", "thinking", "effort"),
    [
        ("claude-opus-4-7", "minimal", "low"),
        ("claude-opus-4-7", "low", "low"),
        ("claude-sonnet-4-6", "medium", "medium"),
        ("claude-opus-4-6", "high", "high"),
        ("claude-opus-5", "high", "high"),
    ],
)
def test_anthropic_current_models_get_adaptive_thinking_with_an_effort(
    model_server, model, thinking, effort
):
    model_server.reply("Done.")

    completion = call(anthropic(model_server), model=model, thinking=thinking)

    body = model_server.last_request.body
    assert body["thinking"] == {"type": "adaptive"}
    assert body["output_config"] == {"effort": effort}
    assert body["max_tokens"] == 4096
    assert completion.text == "Done."


def test_the_fake_refuses_a_token_budget_on_models_that_only_think_adaptively(model_server):
    error = failure(
        anthropic(model_server, thinking_mode="budget"), model="claude-opus-4-7", thinking="low"
    )

    assert error.status == 400
    assert '"thinking.type.enabled" is not supported for this model' in error.message
    assert model_server.last_request.body["thinking"]["type"] == "enabled"


def test_thinking_mode_decides_for_model_names_that_say_nothing(model_server):
    model_server.reply("Done.")

    call(anthropic(model_server, thinking_mode="budget"), model="house-model", thinking="low")

    assert model_server.last_request.body["thinking"] == {"type": "enabled", "budget_tokens": 2048}


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("claude-opus-4-7", "adaptive"),
        ("claude-sonnet-4-6", "adaptive"),
        ("claude-mythos-5-1", "adaptive"),
        ("claude-haiku-4-5", "budget"),
        ("claude-opus-4-1-20250805", "budget"),
        ("claude-sonnet-4-20250514", "budget"),
        ("claude-3-7-sonnet-latest", "budget"),
        ("claude-3-5-sonnet-20241022", "budget"),
    ],
)
def test_thinking_style_by_model_family(model, expected):
    assert thinking_style(model) == expected


def test_max_tokens_is_a_real_provider_key(model_server, tmp_path):
    model_server.reply("Done.")
    config = structure(
        {"providers": {"claude": {"api": "anthropic", "maxTokens": 32000}}}, ModelsConfig, "models"
    )
    provider_config = config.providers["claude"]
    assert provider_config.max_tokens == 32000
    pc = attrs.evolve(
        provider_config, base_url=model_server.anthropic_base_url, api_key=model_server.api_key
    )

    call(lambda: AnthropicProvider("claude", pc, retry=RetryPolicy(max_retries=0)))

    assert model_server.last_request.body["max_tokens"] == 32000


@pytest.mark.parametrize("value", [0, -5])
def test_max_tokens_below_one_is_a_config_error_naming_the_key(value):
    config = structure(
        {"providers": {"claude": {"api": "anthropic", "maxTokens": value}}}, ModelsConfig, "models"
    )
    with pytest.raises(ConfigError) as caught:
        Providers.from_config(config)
    assert [(i.path, i.message) for i in caught.value.issues] == [
        ("models.providers.claude.maxTokens", "must be at least 1")
    ]


def test_anthropic_joins_text_blocks_and_reads_usage(model_server):
    model_server.reply(["Hello, ", "team!"])

    completion = call(anthropic(model_server), model="claude-y")

    # The fake counts words: system 3 + user 5 in; "Hello," + "team!" out.
    assert completion == Completion(
        text="Hello, team!", model="claude-y", usage=Usage(input_tokens=8, output_tokens=2)
    )


def test_anthropic_missing_key_is_a_401_with_the_api_message(model_server):
    error = failure(anthropic(model_server, api_key=None))

    assert "x-api-key" not in model_server.last_request.headers
    assert error.status == 401
    assert not error.retryable
    assert "authentication_error: x-api-key header is required" in error.message


@pytest.mark.parametrize(
    ("status", "retryable", "api_text"),
    [
        (400, False, "invalid_request_error: Invalid request."),
        (401, False, "authentication_error: invalid x-api-key"),
        (403, False, "permission_error"),
        (429, True, "rate_limit_error: Number of requests has exceeded"),
        (500, True, "api_error: Internal server error"),
        (529, True, "overloaded_error: Overloaded"),
    ],
)
def test_anthropic_error_answers_become_provider_errors(model_server, status, retryable, api_text):
    model_server.fail(status)

    error = failure(anthropic(model_server))

    assert error.status == status
    assert error.retryable is retryable
    assert error.message.startswith(f"Provider 'claude' answered HTTP {status} ")
    assert api_text in error.message


def test_anthropic_malformed_success_answer_is_an_error(model_server):
    model_server.raw(200, '{"type": "message", "content": "not a list"}')

    error = failure(anthropic(model_server))

    assert "malformed answer: content is not a list" in error.message


# ---------------------------------------------------------------------------------------------
# Retries


def test_429_is_retried_after_the_retry_after_the_api_asked_for(model_server):
    sleeps = RecordedSleeps()
    model_server.fail(429, times=2, retry_after="7")
    model_server.reply("Finally.")

    completion = call(openai(model_server, retry=RetryPolicy(max_retries=3, sleep=sleeps)))

    assert completion.text == "Finally."
    assert sleeps.delays == [7.0, 7.0]
    assert len(model_server.requests) == 3


def test_retry_after_ms_is_honoured(model_server):
    sleeps = RecordedSleeps()
    model_server.fail(429, retry_after_ms="1500")

    call(anthropic(model_server, retry=RetryPolicy(max_retries=1, sleep=sleeps)))

    assert sleeps.delays == [1.5]


def test_529_overloaded_is_retried_with_jittered_backoff(model_server):
    sleeps = RecordedSleeps()
    model_server.fail(529)

    completion = call(
        anthropic(model_server, retry=RetryPolicy(max_retries=2, base_delay=0.5, sleep=sleeps))
    )

    assert completion.text == model_server.default_text
    assert len(sleeps.delays) == 1
    assert 0.25 <= sleeps.delays[0] <= 0.5


def test_5xx_retries_grow_exponentially_and_stop_at_max_retries(model_server):
    sleeps = RecordedSleeps()
    model_server.fail(500, times=5)
    policy = RetryPolicy(max_retries=3, base_delay=0.5, sleep=sleeps, random=lambda: 1.0)

    error = failure(openai(model_server, retry=policy))

    assert error.status == 500
    assert sleeps.delays == [0.5, 1.0, 2.0]
    assert len(model_server.requests) == 4


def test_other_4xx_fail_at_once(model_server):
    sleeps = RecordedSleeps()
    model_server.fail(400)

    error = failure(openai(model_server, retry=RetryPolicy(max_retries=3, sleep=sleeps)))

    assert error.status == 400
    assert sleeps.delays == []
    assert len(model_server.requests) == 1


def test_a_retry_after_past_the_deadline_fails_at_once_with_the_429(model_server):
    sleeps = RecordedSleeps()
    model_server.fail(429, retry_after="60")

    error = failure(
        anthropic(model_server, retry=RetryPolicy(max_retries=3, sleep=sleeps)), budget=5.0
    )

    assert error.status == 429
    assert sleeps.delays == []
    assert len(model_server.requests) == 1


def test_connection_failures_are_retried_then_reported():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps = RecordedSleeps()
    pc = ProviderConfig(api="openai", base_url=f"http://127.0.0.1:{port}/v1", api_key="k")

    with pytest.raises(ProviderError) as info:
        call(lambda: OpenAIProvider("oa", pc, retry=RetryPolicy(max_retries=2, sleep=sleeps)))

    assert "Provider 'oa' could not be reached" in info.value.message
    assert info.value.retryable
    assert info.value.status is None
    assert len(sleeps.delays) == 2


def test_parse_retry_after_reads_seconds_milliseconds_and_http_dates():
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)

    assert parse_retry_after({"retry-after": "12"}) == 12.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": later}, now=now.timestamp()) == 30.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


# ---------------------------------------------------------------------------------------------
# Deadlines


def test_a_slow_server_fails_with_provider_timeout_at_the_deadline(model_server):
    model_server.slow(20)

    # `call` guards with a timeout 10 s past the deadline: a TimeoutError would mean the
    # provider outlived its deadline; ProviderTimeout means it stopped itself.
    with pytest.raises(ProviderTimeout) as info:
        call(anthropic(model_server, retry=RetryPolicy(max_retries=3)), budget=0.5)

    assert "did not answer before the deadline" in info.value.message
    assert not info.value.retryable


def test_a_deadline_already_past_sends_nothing(model_server):
    with pytest.raises(ProviderTimeout):
        call(openai(model_server), budget=-1.0)

    assert model_server.requests == []


def test_an_attempt_past_the_provider_timeout_is_retried(model_server):
    sleeps = RecordedSleeps()
    model_server.enqueue(Slow(20), Reply("Second time lucky."))

    completion = call(
        openai(model_server, timeout_seconds=0.5, retry=RetryPolicy(max_retries=1, sleep=sleeps))
    )

    assert completion.text == "Second time lucky."
    assert len(sleeps.delays) == 1
    assert len(model_server.requests) == 2


def test_a_provider_timeout_without_retries_left_is_a_retryable_error(model_server):
    model_server.enqueue(Slow(20), Raw(200, "{}"))

    error = failure(openai(model_server, timeout_seconds=0.5))

    assert type(error) is ProviderError
    assert error.retryable
    assert "did not answer within its timeout of 0.5 seconds" in error.message


# ---------------------------------------------------------------------------------------------
# command


def script(tmp_path: Path, body: str) -> tuple[str, ...]:
    """An executable Python script, run directly as a CLI model would be."""
    path = tmp_path / "model.py"
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return (str(path),)


def command(argv: Sequence[str], **config: object) -> Callable[[], CommandProvider]:
    pc = ProviderConfig(api="command", command=tuple(argv), **config)
    return lambda: CommandProvider("cli", pc)


def test_prompt_rendering_has_a_role_heading_per_message():
    assert render_prompt([SYSTEM, USER, ChatMessage("assistant", "Hi!\n")]) == (
        "[system]\nYou are terse.\n\n[user]\nSay hello to the team\n\n[assistant]\nHi!\n"
    )


def test_command_gets_the_prompt_on_stdin_and_model_and_thinking_in_its_environment(tmp_path):
    argv = script(
        tmp_path,
        """
        import os, sys
        prompt = sys.stdin.read()
        print(f"model={os.environ['HOOKWISE_MODEL']} thinking={os.environ['HOOKWISE_THINKING']}")
        print(prompt, end="")
        """,
    )

    completion = call(command(argv), model="local-llm", thinking="high")

    assert completion == Completion(
        text="model=local-llm thinking=high\n" + render_prompt(CONVERSATION).rstrip(),
        model="local-llm",
        usage=None,
    )


def test_command_thinking_is_off_when_none_was_asked_for(tmp_path):
    argv = script(tmp_path, "import os; print(os.environ['HOOKWISE_THINKING'])")

    assert call(command(argv)).text == "off"


def test_command_non_zero_exit_reports_the_last_lines_of_stderr(tmp_path):
    argv = script(
        tmp_path,
        """
        import sys
        for i in range(20):
            print(f"log line {i}", file=sys.stderr)
        print("fatal: model not loaded", file=sys.stderr)
        sys.exit(3)
        """,
    )

    error = failure(command(argv))

    assert "Provider 'cli': 'model.py' exited with status 3" in error.message
    assert "fatal: model not loaded" in error.message
    assert "log line 19" in error.message
    assert "log line 0 " not in error.message
    assert not error.retryable


def test_command_that_exits_without_reading_its_prompt_is_judged_by_its_exit_status():
    """On the gateway's loop (uvloop) writing to a pipe the program already closed raises
    RuntimeError, not BrokenPipeError: the provider must still report the exit status."""
    import uvloop

    make = command(["sh", "-c", "exit 3"])
    big = [ChatMessage("user", "x" * (1 << 20))]  # more than a pipe holds: the write must wait

    async def busy() -> None:  # a busy loop: the program exits before its prompt is written
        while True:
            time.sleep(0.02)
            await asyncio.sleep(0)

    async def go() -> None:
        provider = make()
        hog = asyncio.create_task(busy())
        try:
            with pytest.raises(ProviderError) as info:
                await provider.complete("m", big, thinking=None, deadline=time.monotonic() + 30)
            assert "'sh' exited with status 3" in info.value.message
        finally:
            hog.cancel()
            await provider.aclose()

    for _ in range(3):
        uvloop.run(go())


def test_command_with_empty_output_is_an_error(tmp_path):
    argv = script(tmp_path, "import sys; sys.stdin.read()")

    error = failure(command(argv))

    assert "wrote no reply" in error.message


def test_command_that_cannot_start_is_an_error(tmp_path):
    error = failure(command([str(tmp_path / "no-such-program")]))

    assert "could not start 'no-such-program'" in error.message


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def _dies(pid: int) -> bool:
    """Whether `pid` is gone or a zombie within 5 s (SIGKILL is delivered asynchronously)."""
    give_up = time.monotonic() + 5
    while _running(pid):
        if time.monotonic() > give_up:
            return False
        time.sleep(0.01)
    return True


def test_command_is_killed_with_its_children_at_the_deadline(tmp_path):
    pids = tmp_path / "pids"
    argv = script(
        tmp_path,
        f"""
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        with open({str(pids)!r}, "w") as f:
            f.write(f"{{os.getpid()}} {{child.pid}}")
        time.sleep(60)
        """,
    )

    with pytest.raises(ProviderTimeout) as info:
        call(command(argv), budget=3.0)

    assert "was killed at the deadline" in info.value.message
    for pid in map(int, pids.read_text().split()):
        assert _dies(pid)


def test_command_past_its_own_timeout_is_killed_with_a_plain_error(tmp_path):
    argv = script(tmp_path, "import time; time.sleep(60)")

    error = failure(command(argv, timeout_seconds=0.5))

    assert type(error) is ProviderError
    assert "was killed after its timeout of 0.5 seconds" in error.message


# ---------------------------------------------------------------------------------------------
# echo


@pytest.mark.parametrize(
    ("messages", "reply"),
    [
        ([USER], "echo: Say hello to the team"),
        ([SYSTEM, USER, ChatMessage("assistant", "ok")], "echo: Say hello to the team"),
        ([SYSTEM], "echo:"),
        (
            [ChatMessage("user", "Heartbeat. If nothing needs attention, reply HEARTBEAT_OK.")],
            "HEARTBEAT_OK",
        ),
        (
            [
                ChatMessage(
                    "user", "System: build failed\n  System: disk full\nReply HEARTBEAT_OK if idle."
                )
            ],
            "echo: build failed; disk full",
        ),
    ],
)
def test_echo_replies_from_the_last_user_message(messages, reply):
    completion = call(lambda: EchoProvider(), messages, model="echo")

    assert completion.text == reply
    assert completion.model == "echo"


def test_echo_is_deterministic_and_counts_words():
    first = call(lambda: EchoProvider(), CONVERSATION, thinking="high")
    second = call(lambda: EchoProvider(), CONVERSATION)

    assert first == second
    assert first.usage == Usage(input_tokens=8, output_tokens=6)


# ---------------------------------------------------------------------------------------------
# registry


def test_registry_builds_configured_providers_and_resolves_provider_slash_model(
    model_server, tmp_path
):
    (tmp_path / "claude.key").write_text(model_server.api_key + "\n")
    config = ModelsConfig(
        providers={
            "oa": ProviderConfig(
                api="openai", base_url=model_server.openai_base_url, api_key=model_server.api_key
            ),
            "claude": ProviderConfig(
                api="anthropic", base_url=model_server.anthropic_base_url, api_key_file="claude.key"
            ),
        }
    )

    async def go() -> list[tuple[str, str]]:
        providers = Providers.from_config(config, base_dir=tmp_path)
        try:
            seen = []
            for ref in ("oa/gpt-4o", "claude/claude-x", "echo/echo"):
                provider, model = providers.resolve(ref)
                done = await provider.complete(
                    model, [USER], thinking=None, deadline=time.monotonic() + 30
                )
                seen.append((model, done.text))
            return seen
        finally:
            await providers.aclose()

    assert asyncio.run(go()) == [
        ("gpt-4o", model_server.default_text),
        ("claude-x", model_server.default_text),
        ("echo", "echo: Say hello to the team"),
    ]
    assert [r.path for r in model_server.requests] == ["/v1/chat/completions", "/v1/messages"]
    assert model_server.requests[1].headers["x-api-key"] == model_server.api_key


def test_registry_always_has_echo_and_keeps_slashes_in_model_names():
    providers = Providers.from_config(
        ModelsConfig(providers={"router": ProviderConfig(api="openai", api_key="k")})
    )

    assert providers.ids == ("echo", "router")
    assert isinstance(providers.resolve("echo/anything")[0], EchoProvider)
    assert providers.resolve("router/anthropic/claude-3.5")[1] == "anthropic/claude-3.5"
    asyncio.run(providers.aclose())


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        (
            "nope/model",
            "Model 'nope/model' names the unknown provider 'nope'; configured providers: echo.",
        ),
        ("just-a-name", "Model 'just-a-name' is not of the form <provider>/<model>."),
        ("echo/", "Model 'echo/' is not of the form <provider>/<model>."),
    ],
)
def test_registry_refuses_unknown_providers_and_ill_formed_refs(ref, message):
    providers = Providers.from_config(ModelsConfig())

    with pytest.raises(ProviderError) as info:
        providers.resolve(ref)

    assert info.value.message == message


@pytest.mark.parametrize(
    ("providers", "path", "problem"),
    [
        ({"x": ProviderConfig(api="command")}, "models.providers.x.command", "is required"),
        ({"echo": ProviderConfig(api="openai")}, "models.providers.echo", "reserved"),
        (
            {"x": ProviderConfig(api="openai", api_key="a", api_key_file="k")},
            "models.providers.x.apiKeyFile",
            "not both",
        ),
        (
            {"x": ProviderConfig(api="openai", api_key_file="missing.key")},
            "models.providers.x.apiKeyFile",
            "cannot read",
        ),
    ],
)
def test_registry_reports_configuration_problems_with_their_key_path(
    tmp_path, providers, path, problem
):
    with pytest.raises(ConfigError) as info:
        Providers.from_config(ModelsConfig(providers=providers), base_dir=tmp_path)

    [issue] = info.value.issues
    assert issue.path == path
    assert problem in issue.message


def test_registry_retry_override_keeps_each_providers_max_retries(model_server):
    sleeps = RecordedSleeps()
    model_server.fail(500, times=3)
    config = ModelsConfig(
        providers={
            "oa": ProviderConfig(
                api="openai",
                base_url=model_server.openai_base_url,
                api_key=model_server.api_key,
                max_retries=1,
            )
        }
    )

    async def go() -> None:
        providers = Providers.from_config(config, retry=RetryPolicy(max_retries=9, sleep=sleeps))
        try:
            provider, model = providers.resolve("oa/gpt-4o")
            await provider.complete(model, [USER], thinking=None, deadline=time.monotonic() + 30)
        finally:
            await providers.aclose()

    with pytest.raises(ProviderError) as info:
        asyncio.run(go())

    assert info.value.status == 500
    assert len(sleeps.delays) == 1
    assert len(model_server.requests) == 2


# ---------------------------------------------------------------------------------------------
# The model fake against the providers' published schemas (tests/fakes/api_specs/)


def _anthropic_url(server) -> str:
    base = server.anthropic_base_url.rstrip("/")
    return base + ("/messages" if base.endswith("/v1") else "/v1/messages")


def test_the_anthropic_fakes_answers_match_the_messages_schemas(model_server):
    headers = {"x-api-key": model_server.api_key, "anthropic-version": "2023-06-01"}
    body = {
        "model": "claude-opus-4-7",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "low"},
    }
    ok = httpx.post(_anthropic_url(model_server), json=body, headers=headers, timeout=10)
    assert ok.status_code == 200
    check("anthropic", "#/response_schema", ok.json())
    model_server.fail(529)
    overloaded = httpx.post(_anthropic_url(model_server), json=body, headers=headers, timeout=10)
    bad_key = httpx.post(
        _anthropic_url(model_server), json=body, headers=headers | {"x-api-key": "no"}, timeout=10
    )
    refused = [
        httpx.post(_anthropic_url(model_server), json=b, headers=headers, timeout=10)
        for b in (
            {k: v for k, v in body.items() if k != "max_tokens"},
            body | {"thinking": {"type": "enabled", "budget_tokens": 2048}, "max_tokens": 4096},
            body | {"model": "claude-sonnet-4-5", "thinking": {"type": "adaptive"}},
            body | {"output_config": {"effort": "extreme"}},
            body | {"thinking": {"type": "adaptive", "budget_tokens": 10}},
            body | {"temperature": "hot"},
        )
    ]
    assert overloaded.status_code == 529 and bad_key.status_code == 401
    assert [r.status_code for r in refused] == [400] * len(refused)
    for answer in (overloaded, bad_key, *refused):
        check("anthropic", "#/error_schema", answer.json())


def test_the_openai_fakes_answers_match_the_chat_completions_schemas(model_server):
    url = model_server.openai_base_url.rstrip("/") + "/chat/completions"
    headers = {"Authorization": f"Bearer {model_server.api_key}"}
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    ok = httpx.post(url, json=body, headers=headers, timeout=10)
    assert ok.status_code == 200
    check("openai", "#/components/schemas/CreateChatCompletionResponse", ok.json())
    model_server.fail(429)
    limited = httpx.post(url, json=body, headers=headers, timeout=10)
    bad = httpx.post(url, json={"model": "gpt-4o"}, headers=headers, timeout=10)
    assert (limited.status_code, bad.status_code) == (429, 400)
    for answer in (limited, bad):
        check("openai", "#/components/schemas/ErrorResponse", answer.json())
