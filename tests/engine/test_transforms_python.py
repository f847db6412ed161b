"""Python transforms: trusted operator code, sync or async, still time-bounded."""

from __future__ import annotations

from typing import Any

import pytest

from hookwise.engine.errors import ConfigError, Refusal
from hookwise.engine.transforms import TransformLimits
from hookwise.server.ingress.refusals import status_of
from tests.engine.conftest import Rules, make_request

FAST = TransformLimits(timeout_ms=200, pool_size=1)


def mapping(module: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": "py",
        "match": {"path": "hook"},
        "messageTemplate": "templated",
        "transform": {"module": module, **extra},
    }


def evaluate(
    rules: Rules, source: str, payload: dict[str, Any] | None = None, **request: Any
) -> Any:
    (rules.transforms_dir / "t.py").write_text(source)
    ruleset = rules.compile([mapping("t.py")], limits=FAST)
    return rules.outcome(ruleset, make_request("hook", payload or {}, **request))


def test_sync_transform_sees_the_context_including_raw_body(rules: Rules) -> None:
    source = (
        "def transform(ctx):\n"
        "    return {'message': '|'.join(map(str, [ctx.payload['a'], ctx['headers']['x-h'], "
        "ctx.query.get('q'),\n"
        "        ctx.path, ctx.extracted, ctx.now, ctx.action['kind'], "
        "ctx.raw_body.decode(), ctx.get('item')]))}\n"
    )
    outcome = evaluate(
        rules, source, {"a": 1}, headers={"X-H": "h"}, query={"q": "v"}, raw_body=b'{"a":1}'
    )
    assert outcome.actions[0].fields["message"] == (
        '1|h|v|hook|{}|2026-05-01T12:30:00.000Z|agent|{"a":1}|None'
    )


def test_async_transform(rules: Rules) -> None:
    source = (
        "import asyncio\nasync def transform(ctx):\n    await asyncio.sleep(0)\n    return "
        "{'kind': 'wake', 'text': 'async'}\n"
    )
    outcome = evaluate(rules, source)
    assert (outcome.actions[0].kind, outcome.actions[0].fields) == ("wake", {"text": "async"})


def test_named_export(rules: Rules) -> None:
    (rules.transforms_dir / "t.py").write_text("def other(ctx):\n    return {'message': 'other'}\n")
    ruleset = rules.compile([mapping("t.py", export="other")], limits=FAST)
    assert rules.outcome(ruleset, make_request("hook", {})).actions[0].fields["message"] == "other"


@pytest.mark.parametrize(
    ("source", "status", "code", "reason"),
    [
        (
            "def transform(ctx):\n    raise ValueError('bad ' + ctx.payload['secret'])\n",
            500,
            "transform_failed",
            "raised ValueError",
        ),
        ("def transform(ctx):\n    return 'text'\n", 500, "transform_failed", "returned str"),
        (
            "def transform(ctx):\n    return {'kind': 'email'}\n",
            500,
            "transform_failed",
            "kind other than",
        ),
        (
            "import time\ndef transform(ctx):\n    time.sleep(2)\n",
            504,
            "transform_timeout",
            "200 ms",
        ),
        (
            "import asyncio\nasync def transform(ctx):\n    await asyncio.sleep(5)\n",
            504,
            "transform_timeout",
            "200 ms",
        ),
    ],
)
def test_failures(rules: Rules, source: str, status: int, code: str, reason: str) -> None:
    with pytest.raises(Refusal) as caught:
        evaluate(rules, source, {"secret": "s3cr3t"})
    error = caught.value
    assert (status_of(error.code), error.code, error.rule_id) == (status, code, "py")
    assert reason in error.message and "s3cr3t" not in error.message


def test_after_a_timeout_the_next_call_works(rules: Rules) -> None:
    (rules.transforms_dir / "t.py").write_text(
        "import time\ndef transform(ctx):\n    if ctx.payload.get('slow'):\n        "
        "time.sleep(1)\n    return {'message': 'ok'}\n"
    )
    ruleset = rules.compile([mapping("t.py")], limits=TransformLimits(timeout_ms=200, pool_size=2))
    with pytest.raises(Refusal):
        rules.outcome(ruleset, make_request("hook", {"slow": True}))
    assert rules.outcome(ruleset, make_request("hook", {})).actions[0].fields["message"] == "ok"


@pytest.mark.parametrize(
    ("source", "export", "message"),
    [
        (
            "raise RuntimeError('broken at import')\n",
            None,
            "failed to import: RuntimeError: broken at import",
        ),
        (
            "def helper(ctx):\n    return {}\n",
            None,
            "no function 'transform'; its functions: helper",
        ),
        ("def transform(ctx):\n    return {}\n", "missing", "no function 'missing'"),
        ("def transform(:\n", None, "SyntaxError"),
    ],
)
def test_load_errors(rules: Rules, source: str, export: str | None, message: str) -> None:
    (rules.transforms_dir / "t.py").write_text(source)
    extra = {"export": export} if export else {}
    with pytest.raises(ConfigError) as caught:
        rules.compile([mapping("t.py", **extra)])
    (issue,) = caught.value.issues
    assert issue.rule_id == "py" and issue.path == "hooks.mappings[0].transform.module"
    assert message in issue.message
