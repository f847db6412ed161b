"""Traces (issue 37): one hook followed end to end in an OTLP tracing system. The gateway
exports to a local OTLP/HTTP receiver (tests/support/otlp.py) that decodes the protobuf with
`opentelemetry-proto`, as a collector would. One trace id joins the request (door, rule, JS
transform, the store commit in the writer: timed on the request's span by default, a child span
each with `stages: true` or when one fails), the run (queue wait, the echo model's call, an MCP
tool call) and the delivery of its callback; an incoming `traceparent` is continued; no payload
value reaches an attribute; a dead collector costs a hook nothing visible and its losses are
counted. Every test runs on SQLite and on PostgreSQL (the run's trace context is read back from
the store, as another process would)."""

from __future__ import annotations

import base64
import json
import secrets
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.mcp_server import stdio_command
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.mapped import get_run
from tests.support.otlp import OtlpReceiver, ReceivedSpan
from tests.support.processes import sandbox_workers, writer_of
from tests.support.wait import eventually

MARKER = "payload-marker-5f0e93c1"
SECRET = "whsec_" + base64.b64encode(b"tracing-test-secret-0123456789ab").decode()
#: the JS transform runs in a sandbox worker; it copies the payload's text into the message
#: (and throws when the payload asks it to)
COPY_JS = """
export default function ({ payload }) {
  if (payload.fail) throw new Error(payload.text);
  return { message: payload.text + "\\n(through the sandbox)" };
}
"""
#: export at once (the SDK's default waits 5 s between batches)
FAST_EXPORT = {"OTEL_BSP_SCHEDULE_DELAY": "50"}


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    r = OtlpReceiver()
    yield r
    r.close()


def _config(receiver_url: str, transforms: Path, **traces: Any) -> dict[str, Any]:
    return {
        "hooks": {
            "enabled": True,
            "token": HOOK_TOKEN,
            "transformsDir": str(transforms),
            "mappings": [
                {
                    "id": "traced",
                    "match": {"path": "traced"},
                    "transform": {"module": "copy.js"},
                    "messageTemplate": "{{text}}",
                    "tools": ["t.echo"],
                    "callback": {"url": receiver_url + "/callback", "secret": SECRET},
                }
            ],
        },
        "gateway": {"auth": {"token": ADMIN_TOKEN}, "metrics": {"enabled": True}},
        "tools": {"mcpServers": {"t": stdio_command()}},
        "telemetry": {"traces": {"enabled": True, "endpoint": receiver_url, **traces}},
    }


def _transforms(root: Path) -> Path:
    """The transforms folder of a gateway whose workdir is `root / "gw"`."""
    folder = root / "gw" / "hooks" / "transforms"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "copy.js").write_text(COPY_JS, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def gw(
    receiver: OtlpReceiver,
    tmp_path_factory: pytest.TempPathFactory,
    start_module_gateway: Callable[..., GatewayProcess],
) -> GatewayProcess:
    root = tmp_path_factory.mktemp("tracing")
    return start_module_gateway(
        _config(receiver.url, _transforms(root)),
        env={**FAST_EXPORT, "OTEL_SERVICE_NAME": "hookwise-under-test"},
        workdir=root / "gw",
    )


def _ended_run(gw: GatewayProcess, run_id: str) -> dict[str, Any]:
    return eventually(
        lambda: (r := get_run(gw, run_id))["state"] not in ("queued", "running") and r,
        timeout=60,
        what=f"run {run_id} to end",
    )


def _send(gw: GatewayProcess, text: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    r = gw.hook("traced", {"text": text}, headers=headers)
    assert r.status_code == 202, r.text
    run = _ended_run(gw, r.json()["runId"])
    assert run["state"] == "succeeded", run
    return run


def _spans_by_name(spans: list[ReceivedSpan]) -> dict[str, list[ReceivedSpan]]:
    out: dict[str, list[ReceivedSpan]] = {}
    for s in spans:
        out.setdefault(s.name, []).append(s)
    return out


WANTED = (
    "POST /hooks/{name}",
    "transform.execute",
    "run.queue_wait",
    "invoke_agent main",
    "chat echo",
    "execute_tool echo",
    "delivery",
)


#: the request's stages, timed on its span (`hookwise.stages: auth=21us rule=...`)
STAGES = ("hook.auth", "hook.rule", "hook.transform", "hook.accept")


def _stage_timings(request: ReceivedSpan) -> dict[str, float]:
    """`hookwise.stages` of a request span: stage -> milliseconds."""
    out = {}
    for part in request.attributes["hookwise.stages"].split(" "):
        name, us = part.split("=")
        assert us.endswith("us") and us.removesuffix("us").isdigit(), part
        out[name] = int(us.removesuffix("us")) / 1000
    return out


def _whole_trace(
    receiver: OtlpReceiver, trace_id: str, wanted: tuple[str, ...] = WANTED
) -> dict[str, list[ReceivedSpan]]:
    try:
        return eventually(
            lambda: (
                all(n in (got := _spans_by_name(receiver.trace(trace_id))) for n in wanted) and got
            ),
            timeout=30,
            what=f"every span of trace {trace_id}",
        )
    except AssertionError:
        got = sorted(_spans_by_name(receiver.trace(trace_id)))
        missing = set(wanted) - set(got)
        raise AssertionError(f"trace {trace_id}: spans {got}, missing {missing}") from None


def test_one_trace_follows_a_hook_from_the_door_to_the_tool_call_and_the_callback(
    gw: GatewayProcess, receiver: OtlpReceiver
) -> None:
    run = _send(gw, f'call t.echo {{"text": "{MARKER}"}}')
    assert run["message"].endswith("(through the sandbox)")  # the JS transform made it
    trace_id = run["traceId"]
    assert trace_id is not None and len(trace_id) == 32
    spans = _whole_trace(receiver, trace_id)
    [request] = spans["POST /hooks/{name}"]
    assert request.parent_span_id == ""  # no traceparent sent: the request starts the trace
    assert request.kind == 2  # SERVER
    assert request.attributes["http.response.status_code"] == 202
    assert request.attributes["http.route"] == "/hooks/{name}"
    assert request.resource["service.name"] == "hookwise-under-test"
    # the request's stages are timed on its span: the JS transform ran in a sandbox worker, the
    # store commit in the writer's group commit
    timings = _stage_timings(request)
    assert set(timings) == {stage.removeprefix("hook.") for stage in STAGES}
    assert timings["transform"] > 0
    assert request.attributes["hookwise.rule"] == "traced"
    assert request.attributes["hookwise.transform"] == "JsTransform"
    # a stage is a child span of its own only when it was slow (100 ms by default)
    for stage in STAGES:
        for span in spans.get(stage, []):
            assert span.parent_span_id == request.span_id, stage
            assert span.end_ns - span.start_ns >= 100_000_000, stage
    # the transform's call as its sandbox worker timed it: a span of its own, under the
    # transform's stage (the request's span when that stage is no span)
    [execute] = spans["transform.execute"]
    stage_ids = [s.span_id for s in spans.get("hook.transform", [])]
    _ran_in_the_sandbox(gw, execute, (stage_ids or [request.span_id])[0], request)
    assert execute.end_ns - execute.start_ns <= timings["transform"] * 1e6 + 1000
    # the writer's commit is kept only under an accept stage that is a span (a slow one here)
    accepts = [s.span_id for s in spans.get("hook.accept", [])]
    assert [c.parent_span_id for c in spans.get("store.commit", [])] == accepts
    # the run continues the request's trace (its context read back from the store)
    [agent] = spans["invoke_agent main"]
    assert agent.parent_span_id == request.span_id
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["hookwise.run.id"] == run["runId"]
    assert agent.attributes["hookwise.run.state"] == "succeeded"
    [queued] = spans["run.queue_wait"]
    assert queued.parent_span_id == request.span_id and queued.end_ns >= queued.start_ns
    # each model call: GenAI inference spans under the run
    chats = spans["chat echo"]
    assert len(chats) == 2  # asked for the tool, then answered with its result
    for chat in chats:
        assert chat.parent_span_id == agent.span_id
        assert chat.kind == 3  # CLIENT
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.provider.name"] == "echo"
        assert chat.attributes["gen_ai.request.model"] == "echo"
        assert chat.attributes["gen_ai.response.model"]
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0
        assert chat.attributes["gen_ai.usage.output_tokens"] > 0
    [tool] = spans["execute_tool echo"]
    assert tool.parent_span_id == agent.span_id
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "echo"
    assert tool.attributes["hookwise.mcp.server"] == "t"
    assert tool.attributes["hookwise.tool.outcome"] == "ok"
    # the callback's delivery attempt is in the run's trace
    [delivery] = spans["delivery"]
    assert delivery.parent_span_id == request.span_id
    assert delivery.attributes["hookwise.channel"] == "callback"
    assert delivery.attributes["hookwise.delivery.outcome"] == "sent"
    # the trace id is on the request log line and the run record alike
    line = gw.admin(f"/api/requests/{run['requestId']}")
    line = line.get("request", line)
    assert line["traceId"] == trace_id
    # and on the console's run and request pages
    assert gw.client is not None
    gw.client.post("/ui/login", data={"token": ADMIN_TOKEN})
    for page in (f"/ui/runs/{run['runId']}", f"/ui/requests/{run['requestId']}"):
        r = gw.client.get(page)
        assert r.status_code == 200 and f"<code>{trace_id}</code>" in r.text, page


def test_an_incoming_traceparent_is_continued(gw: GatewayProcess, receiver: OtlpReceiver) -> None:
    trace_id, parent = secrets.token_hex(16), secrets.token_hex(8)
    run = _send(gw, "continued", {"traceparent": f"00-{trace_id}-{parent}-01"})
    assert run["traceId"] == trace_id
    spans = eventually(
        lambda: (
            {"POST /hooks/{name}", "invoke_agent main", "chat echo"}
            <= set(got := _spans_by_name(receiver.trace(trace_id)))
            and got
        ),
        timeout=30,
        what="the continued trace",
    )
    [request] = spans["POST /hooks/{name}"]
    assert request.parent_span_id == parent
    assert spans["invoke_agent main"][0].parent_span_id == request.span_id


def test_a_malformed_traceparent_starts_a_trace_of_its_own(gw: GatewayProcess) -> None:
    run = _send(gw, "fresh", {"traceparent": "00-not-a-trace-01"})
    assert run["traceId"] is not None and len(run["traceId"]) == 32


def test_no_payload_value_reaches_an_attribute(gw: GatewayProcess, receiver: OtlpReceiver) -> None:
    run = _send(gw, f'{MARKER}\ncall t.echo {{"text": "{MARKER}"}}')
    _whole_trace(receiver, run["traceId"])
    assert MARKER in run["reply"]  # it went through the model and the tool
    leaked = [v for v in receiver.all_values() if MARKER in str(v)]
    assert leaked == []
    assert MARKER not in gw.stderr()


def test_a_run_executed_after_a_restart_continues_the_request_s_trace(
    tmp_path: Path, receiver: OtlpReceiver, start_gateway: Callable[..., GatewayProcess]
) -> None:
    config = _config(receiver.url, _transforms(tmp_path))
    config["hooks"]["mappings"][0]["coalesce"] = {"key": "one", "window": "3s"}
    gw = start_gateway(config, env=FAST_EXPORT, workdir=tmp_path / "gw")
    r = gw.hook("traced", {"text": "after the restart"})
    assert r.status_code == 202, r.text
    run_id = r.json()["runId"]
    gw.stop()  # the run waits for its window: the process that accepted it never executes it
    gw.start()
    run = _ended_run(gw, run_id)
    assert run["state"] == "succeeded", run
    spans = eventually(
        lambda: (
            {"POST /hooks/{name}", "invoke_agent main"}
            <= set(got := _spans_by_name(receiver.trace(run["traceId"])))
            and got
        ),
        timeout=30,
        what="the run's spans in the request's trace",
    )
    [request] = spans["POST /hooks/{name}"]
    [agent] = spans["invoke_agent main"]
    assert agent.parent_span_id == request.span_id
    assert agent.resource["process.pid"] != request.resource["process.pid"]
    [queued] = spans["run.queue_wait"]
    assert queued.end_ns - queued.start_ns >= 2_000_000_000  # it waited out its window


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _dropped(gw: GatewayProcess) -> float:
    assert gw.client is not None
    body = gw.client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in body.splitlines()
        if line.startswith('hookwise_trace_spans_dropped_total{reason="export_failed"}')
    )


def test_a_dead_collector_never_fails_a_hook_and_its_losses_are_counted(
    tmp_path: Path, start_gateway: Callable[..., GatewayProcess]
) -> None:
    dead = f"http://127.0.0.1:{_closed_port()}"
    gw = start_gateway(
        _config(dead, _transforms(tmp_path), exportTimeoutSeconds=0.5),
        env=FAST_EXPORT,
        workdir=tmp_path / "gw",
    )
    for n in range(10):
        r = gw.hook("traced", {"text": f"n{n}"})
        assert r.status_code == 202, r.text
    runs = [r["runId"] for r in gw.admin("/api/runs", limit=50)["items"]]
    for run_id in runs:
        assert _ended_run(gw, run_id)["state"] == "succeeded"
    eventually(lambda: _dropped(gw) > 0, timeout=30, what="export failures counted")


def test_a_json_log_line_inside_a_traced_request_carries_its_trace_id(
    tmp_path: Path, receiver: OtlpReceiver, start_gateway: Callable[..., GatewayProcess]
) -> None:
    gw = start_gateway(
        _config(receiver.url, _transforms(tmp_path)),
        env=FAST_EXPORT,
        workdir=tmp_path / "gw",
        extra_args=["--log-format", "json"],
    )
    trace_id = secrets.token_hex(16)
    r = gw.hook(
        "nowhere", {"text": MARKER}, headers={"traceparent": f"00-{trace_id}-{'1' * 16}-01"}
    )
    assert r.status_code == 404
    lines = eventually(
        lambda: [
            line
            for line in (json.loads(x) for x in gw.stderr().splitlines() if x.startswith("{"))
            if line.get("traceId") == trace_id
        ],
        what="a log line with the trace id",
    )
    assert any("404 not_found" in line["msg"] for line in lines)


def test_tracing_off_leaves_no_trace_id(
    tmp_path: Path, start_gateway: Callable[..., GatewayProcess]
) -> None:
    config = _config("http://127.0.0.1:9", _transforms(tmp_path))
    del config["telemetry"]
    gw = start_gateway(config, workdir=tmp_path / "gw")
    run = _send(gw, "untraced")
    assert run["traceId"] is None
    line = gw.admin(f"/api/requests/{run['requestId']}")
    assert line.get("request", line)["traceId"] is None


def test_a_failing_stage_is_a_child_span_with_its_error_class(
    gw: GatewayProcess, receiver: OtlpReceiver
) -> None:
    trace_id = secrets.token_hex(16)
    headers = {"traceparent": f"00-{trace_id}-{'2' * 16}-01"}
    r = gw.hook("traced", {"text": MARKER}, token="not-the-token", headers=headers)
    assert r.status_code == 401
    spans = _whole_trace(receiver, trace_id, ("POST /hooks/{name}", "hook.auth"))
    [request] = spans["POST /hooks/{name}"]
    assert request.attributes["http.response.status_code"] == 401
    assert set(_stage_timings(request)) == {"auth"}  # refused there: no later stage ran
    [auth] = spans["hook.auth"]
    assert auth.parent_span_id == request.span_id
    assert auth.attributes["error.type"] == r.json()["code"]  # the refusal's stable code
    assert auth.status_code == 2  # ERROR
    assert request.start_ns <= auth.start_ns <= auth.end_ns <= request.end_ns


def test_a_failed_transform_call_is_a_failed_span_under_its_failed_stage(
    gw: GatewayProcess, receiver: OtlpReceiver
) -> None:
    trace_id = secrets.token_hex(16)
    headers = {"traceparent": f"00-{trace_id}-{'5' * 16}-01"}
    r = gw.hook("traced", {"text": MARKER, "fail": True}, headers=headers)
    assert r.status_code == 500 and r.json()["code"] == "transform_failed", r.text
    wanted = ("POST /hooks/{name}", "hook.transform", "transform.execute")
    spans = _whole_trace(receiver, trace_id, wanted)
    [request] = spans["POST /hooks/{name}"]
    [stage] = spans["hook.transform"]  # a failed stage is a span of its own
    assert stage.attributes["error.type"] == "transform_failed"
    [execute] = spans["transform.execute"]
    _ran_in_the_sandbox(gw, execute, stage.span_id, request, failed="transform_failed")
    assert MARKER not in str(execute.attributes)


@pytest.fixture(scope="module")
def staged(
    receiver: OtlpReceiver,
    tmp_path_factory: pytest.TempPathFactory,
    start_module_gateway: Callable[..., GatewayProcess],
) -> GatewayProcess:
    """A gateway with `stages: true`: every stage of a request a child span."""
    root = tmp_path_factory.mktemp("staged")
    config = _config(receiver.url, _transforms(root), stages=True)
    return start_module_gateway(config, env=FAST_EXPORT, workdir=root / "gw")


def test_with_stages_on_each_stage_is_a_child_span_of_the_request(
    staged: GatewayProcess, receiver: OtlpReceiver
) -> None:
    run = _send(staged, "every stage a span")
    spans = _whole_trace(receiver, run["traceId"], (*WANTED[:1], *STAGES, "invoke_agent main"))
    [request] = spans["POST /hooks/{name}"]
    for stage in STAGES:
        [span] = spans[stage]
        assert span.parent_span_id == request.span_id, stage
        assert request.start_ns <= span.start_ns <= span.end_ns <= request.end_ns, stage
        assert span.attributes.get("error.type") is None, stage
    assert spans["hook.transform"][0].attributes["hookwise.rule"] == "traced"
    assert spans["invoke_agent main"][0].parent_span_id == request.span_id


def _ran_in_the_sandbox(
    gw: GatewayProcess,
    execute: ReceivedSpan,
    parent_id: str,
    request: ReceivedSpan,
    failed: str | None = None,
) -> None:
    """`execute` is the JS transform's call, timed by the sandbox worker that ran it (`failed`:
    the error type it ended with)."""
    assert execute.parent_span_id == parent_id
    assert execute.kind == 1  # INTERNAL
    assert execute.attributes["hookwise.transform.runtime"] == "js"
    assert execute.attributes["hookwise.rule"] == "traced"
    assert execute.attributes.get("error.type") == failed
    assert execute.status_code == (0 if failed is None else 2)
    # the worker's pid, not the gateway's
    assert gw.proc is not None
    pid = execute.attributes["hookwise.worker.pid"]
    assert pid != gw.proc.pid and pid in sandbox_workers(gw.proc.pid)
    assert request.start_ns <= execute.start_ns < execute.end_ns <= request.end_ns


def test_one_trace_joins_the_request_the_sandbox_worker_the_writer_the_run_the_model_and_the_tool(
    staged: GatewayProcess, receiver: OtlpReceiver, store_kind: str
) -> None:
    run = _send(staged, 'call t.echo {"text": "across processes"}')
    spans = _whole_trace(
        receiver, run["traceId"], (*WANTED, "hook.transform", "hook.accept", "store.commit")
    )
    [request] = spans["POST /hooks/{name}"]
    assert {s.trace_id for group in spans.values() for s in group} == {run["traceId"]}
    # the JS transform, in the sandbox worker process, under the transform's stage
    [transform] = spans["hook.transform"]
    [execute] = spans["transform.execute"]
    _ran_in_the_sandbox(staged, execute, transform.span_id, request)
    assert transform.start_ns <= execute.start_ns <= execute.end_ns <= transform.end_ns
    # the store's commit, as the writer timed its batch, under the accept stage
    [accept] = spans["hook.accept"]
    [commit] = spans["store.commit"]
    assert commit.parent_span_id == accept.span_id
    assert commit.kind == 1  # INTERNAL
    assert accept.start_ns <= commit.start_ns <= commit.end_ns <= accept.end_ns
    assert commit.attributes["hookwise.store.batch_size"] >= 1
    assert staged.proc is not None
    if store_kind == "sqlite":  # the writer process's pid
        assert commit.attributes["hookwise.writer.pid"] == writer_of(staged.proc.pid)
    else:  # a statement on the gateway's own connection: no other process
        assert "hookwise.writer.pid" not in commit.attributes
    # the run, its model calls and its tool call (in the gateway's run loop) in the same trace
    [agent] = spans["invoke_agent main"]
    assert agent.parent_span_id == request.span_id
    assert len(spans["chat echo"]) == 2
    assert spans["execute_tool echo"][0].parent_span_id == agent.span_id


def test_the_sampler_decides_a_request_s_span_and_a_sampled_parent_is_kept(
    tmp_path: Path, receiver: OtlpReceiver, start_gateway: Callable[..., GatewayProcess]
) -> None:
    gw = start_gateway(
        _config(receiver.url, _transforms(tmp_path), sampleRatio=0.0),
        env=FAST_EXPORT,
        workdir=tmp_path / "gw",
    )
    unsampled = _send(gw, "never sampled")
    assert unsampled["traceId"] is None  # neither the request nor its run was recorded
    line = gw.admin(f"/api/requests/{unsampled['requestId']}")
    assert line.get("request", line)["traceId"] is None
    # parent-based: a sender's unsampled traceparent is not recorded, a sampled one is kept
    # whatever the ratio
    other = secrets.token_hex(16)
    quiet = _send(gw, "not sampled upstream", {"traceparent": f"00-{other}-{'4' * 16}-00"})
    assert quiet["traceId"] is None
    trace_id = secrets.token_hex(16)
    run = _send(gw, "sampled upstream", {"traceparent": f"00-{trace_id}-{'3' * 16}-01"})
    assert run["traceId"] == trace_id
    spans = _whole_trace(receiver, trace_id, ("POST /hooks/{name}", "invoke_agent main"))
    [request] = spans["POST /hooks/{name}"]
    assert request.parent_span_id == "3" * 16
    assert set(_stage_timings(request)) == {stage.removeprefix("hook.") for stage in STAGES}
    # spans leave in the order they ended: had the earlier ones been recorded, they were here
    assert receiver.trace(other) == []
    assert [
        s
        for s in receiver.spans
        if s.attributes.get("hookwise.run.id") in (unsampled["runId"], quiet["runId"])
    ] == []
