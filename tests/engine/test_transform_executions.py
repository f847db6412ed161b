"""When and where a transform call ran (`executions`, a traced request's `transform.execute`
span): a call made while a caller asks is reported by the sandbox worker that ran it (its
times, its pid, how it failed), JS and Python alike; a call made without asking reports
nothing (every other transform test); what a worker reports is checked, not believed."""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

import pytest

from hookwise.engine.errors import Refusal
from hookwise.engine.transforms import TransformLimits
from hookwise.engine.transforms.executions import Execution, executions, report
from tests.engine.conftest import Rules, make_request, run
from tests.support.processes import sandbox_workers

FAST = TransformLimits(timeout_ms=500, memory_mb=32, pool_size=1, workers=1)


def _mapping(module: str) -> dict[str, Any]:
    return {
        "id": "t",
        "match": {"path": "hook"},
        "messageTemplate": "m",
        "transform": {"module": module},
    }


def _asking(rules: Rules, module: str) -> tuple[list[Execution], int, int]:
    """Evaluate one request through `module`'s rule while asking; what was reported, and the
    clock before and after."""
    ruleset = rules.compile([_mapping(module)], limits=FAST)
    request = make_request("hook", {"x": 1})
    sink: list[Execution] = []

    async def evaluate() -> None:
        reset = executions.set(sink)
        try:
            rule = ruleset.select(request)
            assert rule is not None
            await ruleset.evaluate(rule, request)
        finally:
            executions.reset(reset)

    before = time.time_ns()
    with contextlib.suppress(Refusal):
        run(evaluate())
    return sink, before, time.time_ns()


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("t.js", "export default (ctx) => ({ message: 'js ' + ctx.payload.x });"),
        ("t.ts", "export default (ctx: any) => ({ message: 'ts ' + ctx.payload.x });"),
        ("t.py", "def transform(ctx):\n    return {'message': 'py'}\n"),
    ],
)
def test_a_call_that_asks_is_reported_by_the_worker_that_ran_it(
    rules: Rules, write_transform: Any, name: str, source: str
) -> None:
    write_transform(name, source)
    [call], before, after = _asking(rules, name)
    assert before <= call.start_ns <= call.end_ns <= after
    assert call.error is None
    assert call.pid != os.getpid() and call.pid in sandbox_workers(os.getpid())


def test_a_failed_call_is_reported_with_its_stable_code(rules: Rules, write_transform: Any) -> None:
    # a Python transform's exception is the worker's failure (a JS one's outcome is read by
    # the gateway, which marks it: `server.telemetry.processes`)
    write_transform("boom.py", "def transform(ctx):\n    raise ValueError('no')\n")
    [call], _, _ = _asking(rules, "boom.py")
    assert call.error == "transform_failed"


def test_the_transform_s_runtime_is_named(rules: Rules, write_transform: Any) -> None:
    runtimes = {}
    for name, source in (
        ("a.js", "export default () => ({});"),
        ("b.ts", "export default (): object => ({});"),
        ("c.py", "def transform(ctx):\n    return {}\n"),
    ):
        write_transform(name, source)
        ruleset = rules.compile([_mapping(name)], limits=FAST)
        transform = ruleset.rules[0].transform
        assert transform is not None
        runtimes[name] = transform.runtime
    assert runtimes == {"a.js": "js", "b.ts": "ts", "c.py": "python"}


@pytest.mark.parametrize(
    "reply",
    [
        ["ok", "{}"],  # not timed
        ["ok", "{}", [1, 2]],
        ["ok", "{}", ["1", 2, 3]],
        ["ok", "{}", [1, 2, "pid"]],
        ["err", "failed", "reason", None],
        ["err", "failed", "reason", None, {"start": 1}],
    ],
)
def test_what_a_worker_reports_is_checked_not_believed(reply: list[Any]) -> None:
    sink: list[Execution] = []
    report(sink, reply)
    assert sink == []


def test_a_timed_reply_is_read() -> None:
    sink: list[Execution] = []
    report(sink, ["ok", "{}", [1, 2, 3]])
    report(sink, ["err", "timeout", "late", None, [4, 5, 6]])
    assert sink == [Execution(1, 2, 3, None), Execution(4, 5, 6, "transform_timeout")]
