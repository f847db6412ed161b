"""The run loop with tools: offer the granted tools, make the calls the model asks for, send the
results back, and repeat until the model replies.

Limits (`tools.*`): at most `maxCallsPerRun` calls per run (a call past it is not made: the model
gets an error result saying the limit was reached, and the next request allows no more calls, so
the run still ends with a reply); each call bounded by `callTimeoutSeconds` and its result capped
at `maxResultBytes` (in `hookwise.server.tools.host`); the whole loop inside the run's
`timeoutSeconds` (the caller's deadline). Several calls in one answer run in parallel. A tool's
failure is an error result for the model, never a failed run. Results are untrusted content,
wrapped with the same boundary as hook text.

Names: a tool is offered under a wire name that both APIs accept (`<server>__<tool>`, cut to
`[a-zA-Z0-9_-]{1,64}`, numbered where two would collide) and mapped back here; a name the model
invents, or a tool outside the grant, is never called.

Approval (issue 34): a granted tool the grant gates (`Grant.needs_approval`) is not called when
the model asks for it. The answer's other calls are made at once; then `Parked` is raised with the
conversation so far, and the runtime parks the run (`hookwise.server.runtime.approvals`). Resumed
(`resume`), the loop makes the approved calls, answers the denied or timed-out ones with an error
result naming the decision, and goes on from the stored conversation.

Every call made is recorded through `ToolRecorder`: a `started` row before it is made (so a run
interrupted mid-call is known to have called tools) and its outcome after. A heartbeat uses the
same loop with the agent's grant (`BeatTools`); its recorder first writes the heartbeat itself as
`started`, consuming its events, so that a heartbeat cut off after calling tools never hands
those events to the model again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, Protocol

import attrs

from ...engine.config.grants import Entry, Grant
from .. import telemetry
from ..store.base import RunRecord, Store
from ..store.toolcalls import ToolCallRecord
from ..tools.connection import ToolInfo
from ..tools.host import ToolHost, arguments_json
from .external import wrap_external
from .parking import GatedCall, Parked, Resume
from .providers.base import (
    ChatMessage,
    Completion,
    Provider,
    ProviderError,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)

log = logging.getLogger("hookwise.runs")

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
#: answers in a row that ask for calls after the limit, before the run fails
EXTRA_ROUNDS = 2


class ToolRecorder(Protocol):
    """Where a run's calls are written (the store, in the gateway)."""

    async def record(self, calls: Sequence[ToolCallRecord]) -> None: ...

    async def previous(self, run_id: str) -> tuple[int, int]:
        """The calls the run's earlier attempts made (or began): all of them, and those since
        the operator last retried it (a retry starts over on purpose)."""
        ...


@attrs.frozen
class RunTools:
    """What a run needs to use tools: the host, its grant, whether to keep payloads."""

    host: ToolHost
    grant: Grant
    recorder: ToolRecorder
    run_id: str
    keep_payloads: bool = False
    #: why the run must stop calling tools (its budget was crossed), asked after each model
    #: answer that asks for tools, with the run's usage so far; None: go on
    over_budget: Callable[[Usage | None], Awaitable[str | None]] | None = None
    #: whether the run can wait for approvals (a heartbeat cannot: its gated calls are refused)
    can_park: bool = True


def wire_names(tools: Sequence[ToolInfo]) -> dict[str, ToolInfo]:
    """Each tool by a wire name both APIs accept."""
    names: dict[str, ToolInfo] = {}
    for i, tool in enumerate(tools):
        base = _UNSAFE.sub("_", f"{tool.server}__{tool.name}")[:64]
        name = base if base not in names else f"t{i}_{base}"[:64]
        names[name] = tool
    return names


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _usage_sum(a: Usage | None, b: Usage | None) -> Usage | None:
    if a is None or b is None:
        return b or a

    def add(x: int | None, y: int | None) -> int | None:
        return None if x is None and y is None else (x or 0) + (y or 0)

    return Usage(add(a.input_tokens, b.input_tokens), add(a.output_tokens, b.output_tokens))


async def converse(
    provider: Provider,
    model: str,
    messages: Sequence[ChatMessage],
    *,
    thinking: str | None,
    deadline: float,
    tools: RunTools | None,
    resume: Resume | None = None,
) -> tuple[Completion, list[ToolCallRecord]]:
    """The model's final answer to `messages`, calling granted tools on the way; the calls made.
    Raises `Parked` when an answer asks for calls that wait for approval; `resume` continues a
    parked run (its stored conversation replaces `messages`)."""
    offered: list[ToolInfo] = []
    if tools is not None and tools.grant and getattr(provider, "supports_tools", False):
        offer = await tools.host.offered(tools.grant)
        offered = offer.tools
        if offer.down:
            await _record_down(tools, offer.down)
    if resume is not None and (not offered or tools is None):
        # the grant (or every server) went away while the run waited: nothing can be called
        return await _resume_without_tools(provider, model, resume, thinking, deadline)
    if not offered or tools is None:
        return await provider.complete(model, messages, thinking=thinking, deadline=deadline), []
    recorded, earlier = await tools.recorder.previous(tools.run_id)
    if resume is not None and recorded == resume.state.recorded:
        earlier = 0  # the calls it made before it parked; none since
    if earlier:
        # never repeat a call silently: a run cut off after calling tools ends here, visibly
        raise ProviderError(
            f"the run was interrupted after it had called tools ({earlier} call(s) recorded);"
            " it is not run again so that no tool call is repeated"
        )
    by_wire = wire_names(offered)
    specs = [
        ToolSpec(name, t.qualified, t.description, t.input_schema) for name, t in by_wire.items()
    ]
    limit = tools.host.limits.max_calls_per_run
    conversation = list(messages)
    records: list[ToolCallRecord] = []
    usage: Usage | None = None
    refused_rounds = 0
    #: calls this run made before it parked (they count toward the limit)
    before = 0
    if resume is not None:
        conversation = list(resume.state.conversation)
        usage = resume.state.usage
        before = _made_calls(conversation, resume.state.results)
        results = await _decided(resume, by_wire, tools, records, limit - before, recorded)
        conversation.append(ChatMessage("tool", "", tool_results=tuple(results)))
    while True:
        choice = "auto" if len(records) + before < limit else "none"
        completion = await provider.complete(  # type: ignore[call-arg]
            model,
            conversation,
            thinking=thinking,
            deadline=deadline,
            tools=specs,
            tool_choice=choice,
        )
        usage = _usage_sum(usage, completion.usage)
        if not completion.tool_calls:
            return attrs.evolve(completion, usage=usage), records
        stop = await tools.over_budget(usage) if tools.over_budget is not None else None
        if stop is not None:
            # the call that crossed the budget is finished and counted; no tool is called
            note = f"[hookwise stopped this run before calling tools: {stop}]"
            text = f"{completion.text}\n\n{note}" if completion.text else note
            return attrs.evolve(completion, text=text, tool_calls=(), usage=usage), records
        if choice == "none":
            refused_rounds += 1
            if refused_rounds > EXTRA_ROUNDS:
                raise ProviderError(
                    f"the model kept asking for tools after the limit of {limit} calls per run"
                )
        conversation.append(
            ChatMessage(
                "assistant",
                completion.text,
                tool_calls=completion.tool_calls,
                raw=completion.raw,
            )
        )
        gated = [
            GatedCall(call, target.server, target.name)
            for call in completion.tool_calls
            if call.arguments is not None
            and (target := by_wire.get(call.name)) is not None
            and tools.grant.needs_approval(target.server, target.name)
        ]
        waiting = {g.call.id for g in gated}
        now_calls = [c for c in completion.tool_calls if c.id not in waiting]
        results = await _answer(now_calls, by_wire, tools, records, limit - before, recorded)
        if gated and not tools.can_park:
            log.info(
                "run %s: %d call(s) needing approval refused (cannot wait)",
                tools.run_id,
                len(gated),
            )
            refused = [
                ToolResult(
                    g.call.id,
                    "not called: this call needs a person's approval, which a heartbeat cannot"
                    " wait for",
                    True,
                )
                for g in gated
            ]
            order = {c.id: i for i, c in enumerate(completion.tool_calls)}
            results = sorted([*results, *refused], key=lambda r: order.get(r.call_id, 0))
        elif gated:
            raise Parked(conversation, results, gated, recorded + len(records), usage)
        conversation.append(ChatMessage("tool", "", tool_results=tuple(results)))


def _made_calls(conversation: Sequence[ChatMessage], pending: Sequence[ToolResult]) -> int:
    """Calls answered so far in a stored conversation (approximately the calls made: each
    result answers one call the model asked for), those of the parked answer included."""
    return sum(len(m.tool_results) for m in conversation) + len(pending)


async def _resume_without_tools(
    provider: Provider,
    model: str,
    resume: Resume,
    thinking: str | None,
    deadline: float,
) -> tuple[Completion, list[ToolCallRecord]]:
    """A parked run whose tools are gone: every gated call gets an error result, then the model
    answers without tools."""
    results = list(resume.state.results)
    for a in resume.approvals:
        results.append(ToolResult(a.call_id, "not called: the tool is no longer granted", True))
    conversation = [
        *resume.state.conversation,
        ChatMessage("tool", "", tool_results=tuple(results)),
    ]
    completion = await provider.complete(model, conversation, thinking=thinking, deadline=deadline)
    return attrs.evolve(completion, usage=_usage_sum(resume.state.usage, completion.usage)), []


def denial_text(state: str, decided_by: str | None, via: str | None) -> str:
    """The error result a denied or timed-out call gets (the model reads it)."""
    if state == "timed_out":
        return (
            "not called: this call needed a person's approval and the request timed out"
            " (treated as denied). Do not try it again; answer with what you have."
        )
    who = f" by {decided_by}" if decided_by else ""
    through = f" via {via}" if via else ""
    return (
        f"not called: this call needed a person's approval and was denied{who}{through}."
        " Do not try it again; answer with what you have."
    )


async def _decided(
    resume: Resume,
    by_wire: dict[str, ToolInfo],
    tools: RunTools,
    records: list[ToolCallRecord],
    limit: int,
    recorded: int,
) -> list[ToolResult]:
    """The results of a resumed answer: those made before it parked, the approved calls made
    now, an error result for each denied or timed-out one, in the model's order."""
    wire_of = {(t.server, t.name): name for name, t in by_wire.items()}
    approved: list[ToolCall] = []
    out: dict[str, ToolResult] = {r.call_id: r for r in resume.state.results}
    for a in resume.approvals:
        if a.state == "approved":
            name = wire_of.get((a.server, a.tool), f"{a.server}.{a.tool}")
            try:
                args = json.loads(a.arguments)
            except ValueError:
                args = None
            approved.append(ToolCall(a.call_id, name, args if isinstance(args, dict) else None))
        else:
            out[a.call_id] = ToolResult(a.call_id, denial_text(a.state, a.decided_by, a.via), True)
    if approved:
        made = await _answer(approved, by_wire, tools, records, limit, recorded)
        out.update({r.call_id: r for r in made})
    asked = resume.state.conversation[-1].tool_calls if resume.state.conversation else ()
    ordered = [out.pop(c.id) for c in asked if c.id in out]
    return [*ordered, *out.values()]


async def _record_down(tools: RunTools, down: dict[str, str]) -> None:
    """Record on the run that granted servers were down when it started: one row per server,
    tool `*`, outcome `unavailable`, the reason as its result, numbered below zero (so that
    it is never taken for a call an interrupted run made)."""
    now = time.time()
    rows = [
        ToolCallRecord(
            run_id=tools.run_id,
            seq=-(i + 1),
            server=server,
            tool="*",
            outcome="unavailable",
            started_at=now,
            result=why,
            result_bytes=len(why.encode("utf-8")),
            result_digest=_digest(why),
        )
        for i, (server, why) in enumerate(sorted(down.items()))
    ]
    log.warning(
        "run %s: granted MCP servers were down when it started: %s",
        tools.run_id,
        "; ".join(f"{server}: {why}" for server, why in sorted(down.items())),
    )
    if not isinstance(tools.recorder, BeatRecorder):  # a heartbeat is written when it calls
        await tools.recorder.record(rows)


async def _answer(
    calls: Sequence[ToolCall],
    by_wire: dict[str, ToolInfo],
    tools: RunTools,
    records: list[ToolCallRecord],
    limit: int,
    seq_base: int = 0,
) -> list[ToolResult]:
    """Results for every call of one answer; the ones allowed are made, in parallel."""
    results: list[ToolResult | None] = [None] * len(calls)
    to_make: list[tuple[int, ToolInfo, dict[str, Any], ToolCallRecord]] = []
    now = time.time()
    for i, call in enumerate(calls):
        target = by_wire.get(call.name)
        if target is None:
            log.info("run %s: the model asked for a tool it was not offered", tools.run_id)
            results[i] = ToolResult(call.id, f"there is no tool named {call.name!r}", True)
        elif call.arguments is None:
            results[i] = ToolResult(
                call.id, "the arguments were not a JSON object; the tool was not called", True
            )
        elif len(records) + len(to_make) >= limit:
            log.info("run %s: a tool call past the limit of %d was not made", tools.run_id, limit)
            results[i] = ToolResult(
                call.id,
                f"not called: this run reached its limit of {limit} tool calls. Answer now with"
                " what you have.",
                True,
            )
        else:
            args_text = arguments_json(call.arguments)
            record = ToolCallRecord(
                run_id=tools.run_id,
                seq=seq_base + len(records) + len(to_make) + 1,
                server=target.server,
                tool=target.name,
                outcome="started",
                started_at=now,
                arguments=args_text if tools.keep_payloads else None,
                arguments_bytes=len(args_text.encode("utf-8")),
                arguments_digest=_digest(args_text),
            )
            to_make.append((i, target, call.arguments, record))
    if not to_make:
        return [r for r in results if r is not None]
    started = [record for *_, record in to_make]
    # durable before the first call is made: a run interrupted now is known to have called
    await tools.recorder.record(started)
    outcomes = await asyncio.gather(
        *(
            telemetry.tool_call(  # tracing: an `execute_tool` span per call
                target.server,
                target.name,
                calls[i].id,
                tools.host.call(target.server, target.name, args),
            )
            for i, target, args, _ in to_make
        )
    )
    done: list[ToolCallRecord] = []
    for (i, target, _, record), outcome in zip(to_make, outcomes, strict=True):
        finished = attrs.evolve(
            record,
            outcome=outcome.outcome,
            duration_ms=round(outcome.duration * 1000, 3),
            result=outcome.text if tools.keep_payloads else None,
            result_bytes=outcome.result_bytes,
            result_digest=_digest(outcome.text),
            truncated=outcome.truncated,
        )
        done.append(finished)
        text = outcome.text if outcome.outcome == "ok" else f"error: {outcome.text}"
        results[i] = ToolResult(
            calls[i].id,
            wrap_external(text, source=f"tool {target.qualified}"),
            outcome.outcome != "ok",
        )
    await tools.recorder.record(done)
    records.extend(done)
    return [r for r in results if r is not None]


class StoreRecorder:
    """A `ToolRecorder` writing to the store."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def record(self, calls: Sequence[ToolCallRecord]) -> None:
        await self._store.record_tool_calls(calls)

    async def previous(self, run_id: str) -> tuple[int, int]:
        calls = [c for c in await self._store.tool_calls(run_id) if c.outcome != "unavailable"]
        if not calls:
            return 0, 0
        retried = max((r.at for r in await self._store.list_retries(run_id)), default=None)
        since = [c for c in calls if retried is None or c.started_at > retried]
        return len(calls), len(since)


class LaneTools:
    """For one agent's run lane: the `RunTools` of each run. A run from a mapping gets exactly
    the mapping's grant (looked up when it runs: a reload that takes a grant away applies at
    once); a run without one (an `/agent` request) gets the agent's."""

    def __init__(
        self,
        host: ToolHost,
        recorder: ToolRecorder,
        *,
        agent_tools: Sequence[Entry],
        rule_tools: Callable[[str], Sequence[Entry]],
        keep_payloads: bool,
        over_budget: Callable[[RunRecord, Usage | None], Awaitable[str | None]] | None = None,
    ) -> None:
        self._over_budget = over_budget
        self._host = host
        self._recorder = recorder
        self._agent_grant = Grant.parse(agent_tools)
        self._rule_tools = rule_tools
        self._keep = keep_payloads

    def __call__(self, run: RunRecord) -> RunTools | None:
        if not self._host.connections:
            return None
        rule_id = run.rule_id
        grant = Grant.parse(self._rule_tools(rule_id)) if rule_id is not None else self._agent_grant
        if not grant:
            return None
        check = self._over_budget
        over = None if check is None else partial(check, run)
        return RunTools(self._host, grant, self._recorder, run.run_id, self._keep, over)


class BeatRecorder:
    """A heartbeat's `ToolRecorder`: before its first call is recorded, `begin` runs once (it
    writes the heartbeat `started`, consuming its events); a heartbeat has no earlier attempts."""

    def __init__(self, store: Store, begin: Callable[[], Awaitable[None]]) -> None:
        self._store = store
        self._begin: Callable[[], Awaitable[None]] | None = begin

    @property
    def began(self) -> bool:
        """Whether a call was (about to be) made."""
        return self._begin is None

    async def record(self, calls: Sequence[ToolCallRecord]) -> None:
        if self._begin is not None:
            begin, self._begin = self._begin, None
            await begin()
        await self._store.record_tool_calls(calls)

    async def previous(self, run_id: str) -> tuple[int, int]:
        return 0, 0


class BeatTools:
    """For one agent's heartbeat: the `RunTools` of each beat, with the agent's grant
    (`agents.list[].tools`, else `agents.defaults.tools`)."""

    def __init__(
        self, host: ToolHost, store: Store, *, agent_tools: Sequence[Entry], keep_payloads: bool
    ) -> None:
        self._host = host
        self._store = store
        self._grant = Grant.parse(agent_tools)
        self._keep = keep_payloads

    def __call__(
        self, heartbeat_id: str, begin: Callable[[], Awaitable[None]]
    ) -> tuple[RunTools | None, BeatRecorder | None]:
        """The beat's tools and its recorder (whether a call was made), or none of either."""
        if not self._host.connections or not self._grant:
            return None, None
        recorder = BeatRecorder(self._store, begin)
        tools = RunTools(
            self._host, self._grant, recorder, heartbeat_id, self._keep, can_park=False
        )
        return tools, recorder
