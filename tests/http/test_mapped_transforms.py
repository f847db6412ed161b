"""Mapped hooks with transforms, through the real server: JS in V8 (errors, time and memory
limits, skip, switching the action's kind) and Python modules from `hooks.transformsDir`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.mapped import events_of, finished_run, logged, runs_of
from tests.support.wait import eventually

SECRET = "payload-marker-8d3b7e21"

TRANSFORMS: dict[str, str] = {
    # Quotes the payload in its error message: that text must reach neither the caller nor the log.
    "throws.js": """
export default function ({ payload }) {
  throw new Error("cannot handle " + JSON.stringify(payload));
}
""",
    "spin.js": """
export default function ({ payload }) {
  if (payload.spin) { while (true) {} }
  return { message: "spin ok " + payload.n };
}
""",
    "smi.js": """
export default function ({ payload }) {
  const a = new Array(payload.n).fill(0);
  return { kind: "wake", text: "filled " + a.length };
}
""",
    "bomb.js": """
export default function ({ payload }) {
  if (payload.bomb) {
    const hoard = [];
    while (true) hoard.push(new Array(1e6).fill(payload.bomb));
  }
  return { message: "bomb ok " + payload.n };
}
""",
    "skip.js": """
export default function ({ payload }) {
  return payload.keep ? undefined : null;
}
""",
    "switch.js": """
export function route({ payload, action }) {
  if (payload.severity === "info") {
    return { kind: "wake", text: "FYI: " + payload.title, mode: "next-heartbeat" };
  }
  return { message: action.message + " [paged]" };
}
""",
    "batch.js": """
export default function ({ payload }) {
  const bounced = payload.filter((e) => e.event === "bounce").map((e) => e.email);
  return { kind: "wake", text: payload.length + " events, bounced: " + bounced.join(", ") };
}
""",
    "batch_py.py": """
def transform(ctx):
    return {"kind": "wake", "text": f"py: {len(ctx.payload)} events, first {ctx.payload[0]['event']}"}
""",
    "enrich.py": """
def transform(ctx):
    return {"message": f"py saw {ctx.payload['n']} via {ctx.path}", "name": "Py " + ctx.extracted["who"]}
""",
}

MAPPINGS: list[dict[str, Any]] = [
    {
        "id": "js-throws",
        "match": {"path": "throws"},
        "messageTemplate": "m",
        "transform": {"module": "throws.js"},
    },
    {
        "id": "js-spin",
        "match": {"path": "spin"},
        "messageTemplate": "m",
        "transform": {"module": "spin.js"},
    },
    {
        "id": "js-bomb",
        "match": {"path": "bomb"},
        "messageTemplate": "m",
        "transform": {"module": "bomb.js"},
    },
    {
        "id": "js-skip",
        "match": {"path": "skip"},
        "messageTemplate": "kept {{n}}",
        "transform": {"module": "skip.js"},
    },
    {
        "id": "js-switch",
        "match": {"path": "alerts"},
        "messageTemplate": "Alert: {{title}}",
        "transform": {"module": "switch.js", "export": "route"},
    },
    {
        "id": "js-smi",
        "match": {"path": "smi"},
        "messageTemplate": "m",
        "transform": {"module": "smi.js"},
    },
    {
        "id": "js-batch",
        "match": {"path": "batch"},
        "messageTemplate": "m",
        "transform": {"module": "batch.js"},
    },
    {
        "id": "py-batch",
        "match": {"path": "batch-py"},
        "messageTemplate": "m",
        "transform": {"module": "batch_py.py"},
    },
    {
        "id": "py-enrich",
        "match": {"path": "enrich"},
        "extract": {"who": "$.user.name"},
        "messageTemplate": "templated",
        "transform": {"module": "enrich.py"},
    },
]


@pytest.fixture(scope="module")
def gw(
    tmp_path_factory: pytest.TempPathFactory, start_module_gateway: Callable[..., GatewayProcess]
) -> GatewayProcess:
    workdir = tmp_path_factory.mktemp("transforms")
    tdir = workdir / "gw" / "hooks" / "transforms"  # inside <config dir>/hooks/transforms
    tdir.mkdir(parents=True)
    for name, text in TRANSFORMS.items():
        (tdir / name).write_text(text, encoding="utf-8")
    config = {
        "hooks": {
            "enabled": True,
            "token": HOOK_TOKEN,
            "transformsDir": str(tdir),
            "transformLimits": {"timeoutMs": 500, "memoryMb": 32, "poolSize": 1},
            "mappings": MAPPINGS,
        },
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
    }
    return start_module_gateway(config, workdir=workdir / "gw")


def _healthy(gw: GatewayProcess) -> bool:
    assert gw.client is not None
    r = gw.client.get("/healthz")
    return r.status_code == 200 and r.json() == {"ok": True}


def test_a_transform_that_raises_is_500_transform_failed(gw: GatewayProcess) -> None:
    r = gw.hook("throws", {"x": SECRET})
    assert r.status_code == 500, r.text
    body = r.json()
    assert (body["ok"], body["code"], body["rule"]) == (False, "transform_failed", "js-throws")
    assert SECRET not in r.text
    assert runs_of(gw, "js-throws") == []
    entry = eventually(lambda: logged(gw, "/hooks/throws"), what="the request log line")[0]
    assert (entry["status"], entry["code"], entry["rule"]) == (500, "transform_failed", "js-throws")


def test_an_endless_transform_is_504_and_the_next_request_works(gw: GatewayProcess) -> None:
    r = gw.hook("spin", {"spin": True, "x": SECRET})
    assert r.status_code == 504, r.text
    body = r.json()
    assert (body["code"], body["rule"]) == ("transform_timeout", "js-spin")
    assert runs_of(gw, "js-spin") == []
    # poolSize 1: the next call needs the context that was stopped to have been replaced.
    again = gw.hook("spin", {"n": 2})
    assert again.status_code == 202, again.text
    assert finished_run(gw, again.json()["runId"])["reply"] == "echo: spin ok 2"


def test_a_memory_bomb_is_500_and_the_gateway_stays_healthy(gw: GatewayProcess) -> None:
    r = gw.hook("bomb", {"bomb": SECRET})
    assert r.status_code == 500, r.text
    body = r.json()
    assert (body["code"], body["rule"]) == ("transform_failed", "js-bomb")
    assert "memory" in body["error"]
    assert runs_of(gw, "js-bomb") == []
    assert _healthy(gw)
    again = gw.hook("bomb", {"n": 3})
    assert again.status_code == 202, again.text
    assert finished_run(gw, again.json()["runId"])["reply"] == "echo: bomb ok 3"


def test_one_big_small_integer_array_is_held_to_the_heap_limit(gw: GatewayProcess) -> None:
    # 3e7 small integers: ~114 MiB in one allocation, past the 32 MiB limit before V8 collects
    r = gw.hook("smi", {"n": 30_000_000})
    assert r.status_code == 500, r.text
    body = r.json()
    assert (body["code"], body["rule"]) == ("transform_failed", "js-smi")
    assert "32 MiB memory limit" in body["error"]
    assert _healthy(gw)
    again = gw.hook("smi", {"n": 10})
    assert again.status_code == 200, again.text


def test_a_transform_returning_null_is_204_with_nothing_stored(gw: GatewayProcess) -> None:
    r = gw.hook("skip", {"n": 1, "x": SECRET})
    assert r.status_code == 204
    assert r.content == b""
    assert runs_of(gw, "js-skip") == [] and events_of(gw, "js-skip") == []
    entry = eventually(lambda: logged(gw, "/hooks/skip"), what="the request log line")[0]
    assert (entry["status"], entry["code"], entry["rule"]) == (204, "skipped", "js-skip")


def test_a_transform_returning_nothing_keeps_the_templated_action(gw: GatewayProcess) -> None:
    r = gw.hook("skip", {"n": 2, "keep": True})
    assert r.status_code == 202, r.text
    assert r.json()["rule"] == "js-skip"
    assert finished_run(gw, r.json()["runId"])["reply"] == "echo: kept 2"


def test_a_transform_can_switch_an_agent_mapping_to_wake(gw: GatewayProcess) -> None:
    r = gw.hook("alerts", {"severity": "info", "title": "backup done"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["rule"], body["mode"]) == ("js-switch", "next-heartbeat")
    [event] = events_of(gw, "js-switch")
    assert event["eventId"] == body["eventId"] and event["text"] == "FYI: backup done"
    assert runs_of(gw, "js-switch") == []


def test_a_named_js_export_overrides_the_templated_message(gw: GatewayProcess) -> None:
    r = gw.hook("alerts", {"severity": "critical", "title": "db down"})
    assert r.status_code == 202, r.text
    assert finished_run(gw, r.json()["runId"])["reply"] == "echo: Alert: db down [paged]"


def test_a_python_transform_from_the_transforms_dir_shapes_the_run(gw: GatewayProcess) -> None:
    r = gw.hook("enrich", {"n": 7, "user": {"name": "ada"}})
    assert r.status_code == 202, r.text
    run = finished_run(gw, r.json()["runId"])
    assert (run["rule"], run["name"]) == ("py-enrich", "Py ada")
    assert run["reply"] == "echo: py saw 7 via enrich"


def test_transform_failures_leave_payload_and_token_out_of_the_log(gw: GatewayProcess) -> None:
    before = {p: len(logged(gw, p)) for p in ("/hooks/throws", "/hooks/spin")}
    for name, payload in (("throws", {"x": SECRET}), ("spin", {"spin": True, "x": SECRET})):
        assert gw.hook(name, payload).status_code >= 500
    eventually(
        lambda: all(len(logged(gw, p)) > n for p, n in before.items()),
        what="the request log lines",
    )
    log = gw.stderr()
    assert "Application startup complete" in log  # the log is there, and is being written
    assert SECRET not in log
    assert HOOK_TOKEN not in log


def test_transform_failures_are_logged_with_the_rule_and_code(gw: GatewayProcess) -> None:
    assert gw.hook("bomb", {"bomb": SECRET}).status_code == 500
    line = eventually(
        lambda: [x for x in gw.stderr().splitlines() if "/hooks/bomb" in x and "js-bomb" in x],
        what="a log line naming the rule",
    )[-1]
    assert "WARNING" in line and "transform_failed" in line and "memory" in line
    assert SECRET not in line


BATCH = [
    {"email": "a@example.com", "event": "delivered"},
    {"email": "b@example.com", "event": "bounce"},
    {"email": "c@example.com", "event": "bounce"},
]


@pytest.mark.parametrize(
    ("name", "rule", "text"),
    [
        ("batch", "js-batch", "3 events, bounced: b@example.com, c@example.com"),
        ("batch-py", "py-batch", "py: 3 events, first delivered"),
    ],
)
def test_a_transform_sees_a_top_level_array_as_the_payload(
    gw: GatewayProcess, name: str, rule: str, text: str
) -> None:
    """SendGrid-style bodies (a JSON array of events) reach JS and Python transforms whole."""
    r = gw.hook(name, BATCH)
    assert r.status_code == 200, r.text
    [event] = [e for e in events_of(gw, rule) if e["eventId"] == r.json()["eventId"]]
    assert event["text"] == text
