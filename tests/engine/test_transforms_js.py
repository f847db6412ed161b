"""JavaScript transforms in V8: module loading, the call contract, the sandbox, the pool."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs
import pytest

from hookwise.engine.errors import ConfigError, Refusal
from hookwise.engine.rules.ruleset import ActionSpec
from hookwise.engine.transforms import TransformLimits
from hookwise.engine.transforms.jsmodule import ModuleSyntaxError, module_to_script
from hookwise.server.ingress.refusals import status_of
from tests.engine.conftest import Rules, make_request, run

FAST = TransformLimits(timeout_ms=200, memory_mb=32, pool_size=1)


def mapping(module: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": "js",
        "match": {"path": "hook"},
        "messageTemplate": "templated",
        "transform": {"module": module, **extra},
    }


def call(rules: Rules, ruleset: Any, payload: dict[str, Any] | None = None, **request: Any) -> Any:
    return rules.outcome(ruleset, make_request("hook", payload or {}, **request))


def failure(rules: Rules, ruleset: Any, payload: dict[str, Any] | None = None) -> Refusal:
    with pytest.raises(Refusal) as caught:
        call(rules, ruleset, payload)
    assert caught.value.rule_id == "js"
    return caught.value


# --- module styles ---------------------------------------------------------------------------

MODULE_STYLES = [
    ("export default function (ctx) { return { message: 'a:' + ctx.payload.x }; }", None),
    ("export default function named(ctx) { return { message: 'a:' + ctx.payload.x }; }", None),
    (
        "export default async function (ctx) { await null; return { message: 'a:' + "
        "ctx.payload.x }; }",
        None,
    ),
    ("export default (ctx) => ({ message: 'a:' + ctx.payload.x });", None),
    ("const f = (ctx) => ({ message: 'a:' + ctx.payload.x });\nexport default f;", None),
    ("export function transform(ctx) { return { message: 'a:' + ctx.payload.x }; }", None),
    ("export async function pick(ctx) { return { message: 'a:' + ctx.payload.x }; }", "pick"),
    ("export const pick = (ctx) => ({ message: 'a:' + ctx.payload.x });", "pick"),
    (
        "function inner(ctx) { return { message: 'a:' + ctx.payload.x }; }\nexport { inner "
        "as pick };",
        "pick",
    ),
    ("module.exports = function (ctx) { return { message: 'a:' + ctx.payload.x }; };", None),
    ("exports.transform = (ctx) => ({ message: 'a:' + ctx.payload.x });", None),
    (
        "const importantValue = 'a:';\nexport default (ctx) => ({ message: importantValue + "
        "ctx.payload.x });",
        None,
    ),
]


@pytest.mark.parametrize(("source", "export"), MODULE_STYLES)
def test_module_styles_load_and_run(
    rules: Rules, write_transform: Any, source: str, export: str | None
) -> None:
    write_transform("t.mjs", source)
    extra = {"export": export} if export else {}
    ruleset = rules.compile([mapping("t.mjs", **extra)], limits=FAST)
    assert call(rules, ruleset, {"x": 1}).actions[0].fields["message"] == "a:1"


@pytest.mark.parametrize(
    "source",
    [
        "import fs from 'fs';\nexport default () => null;",
        "import { x } from './y.js';",
        "export * from './y.js';",
        "import './side.js';",
    ],
)
def test_imports_are_refused_at_load(source: str) -> None:
    with pytest.raises(ModuleSyntaxError, match="import"):
        module_to_script(source, "__m")


def test_load_errors_name_the_rule(rules: Rules, write_transform: Any) -> None:
    write_transform("syntax.js", "export default function ( {")
    write_transform("noexport.js", "export function other() {}\nexport const value = 1;")
    write_transform("throws.js", "throw new Error('at load');")
    write_transform("types.tsx", "export default (ctx: any) => <b>{ctx}</b>;")
    write_transform("imports.js", "import x from 'y';")
    write_transform("notes.txt", "hello")
    with pytest.raises(ConfigError) as caught:
        rules.compile(
            [
                {"id": f"r{i}", "messageTemplate": "m", "transform": {"module": name}}
                for i, name in enumerate(
                    [
                        "syntax.js",
                        "noexport.js",
                        "throws.js",
                        "types.tsx",
                        "imports.js",
                        "notes.txt",
                    ]
                )
            ],
            limits=FAST,
        )
    issues = {i.rule_id: (i.path, i.message) for i in caught.value.issues}
    assert set(issues) == {"r0", "r1", "r2", "r3", "r4", "r5"}
    assert all(path.endswith(".transform.module") for path, _ in issues.values())
    assert "SyntaxError" in issues["r0"][1]
    assert "other, value" in issues["r1"][1]
    assert "at load" in issues["r2"][1]
    assert ".tsx" in issues["r3"][1] and "use .ts" in issues["r3"][1]
    assert "import" in issues["r4"][1]
    assert "unsupported" in issues["r5"][1]


@pytest.mark.parametrize(
    "module",
    ["/etc/passwd.js", "../outside.js", "sub/../../outside.js", "link/evil.js", "escape.js"],
)
def test_module_paths_must_stay_inside_transforms_dir(
    rules: Rules, transforms_dir: Path, tmp_path: Path, module: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "evil.js").write_text("export default () => ({message: 'evil'});")
    (tmp_path / "outside.js").write_text("export default () => ({message: 'evil'});")
    os.symlink(outside, transforms_dir / "link")
    os.symlink(outside / "evil.js", transforms_dir / "escape.js")
    with pytest.raises(ConfigError) as caught:
        rules.compile([{"id": "sneaky", "messageTemplate": "m", "transform": {"module": module}}])
    (issue,) = caught.value.issues
    assert issue.rule_id == "sneaky" and issue.path == "hooks.mappings[0].transform.module"


def test_a_symlink_inside_transforms_dir_is_fine(
    rules: Rules, transforms_dir: Path, write_transform: Any
) -> None:
    (transforms_dir / "lib").mkdir()
    write_transform("lib/real.js", "export default () => ({message: 'real'});")
    os.symlink(transforms_dir / "lib" / "real.js", transforms_dir / "alias.js")
    ruleset = rules.compile([mapping("alias.js")], limits=FAST)
    assert call(rules, ruleset).actions[0].fields["message"] == "real"


# --- the call contract -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "actions"),
    [
        ("return null;", ()),
        (
            "return;",
            (ActionSpec("agent", {"message": "templated", "wakeMode": "now", "channel": "last"}),),
        ),
        (
            "return undefined;",
            (ActionSpec("agent", {"message": "templated", "wakeMode": "now", "channel": "last"}),),
        ),
        (
            "return {};",
            (ActionSpec("agent", {"message": "templated", "wakeMode": "now", "channel": "last"}),),
        ),
        (
            "return {kind: 'wake', text: 't', mode: 'next-heartbeat'};",
            (ActionSpec("wake", {"text": "t", "mode": "next-heartbeat"}),),
        ),
        (
            "return {message: 'm', deliver: false, channel: null};",
            (
                ActionSpec(
                    "agent",
                    {"message": "m", "wakeMode": "now", "channel": "last", "deliver": False},
                ),
            ),
        ),
        (
            "return Promise.resolve({message: 'p'});",
            (ActionSpec("agent", {"message": "p", "wakeMode": "now", "channel": "last"}),),
        ),
    ],
)
def test_return_contract(
    rules: Rules, write_transform: Any, body: str, actions: tuple[ActionSpec, ...]
) -> None:
    write_transform("t.js", f"export default function (ctx) {{ {body} }}")
    ruleset = rules.compile([mapping("t.js")], limits=FAST)
    outcome = call(rules, ruleset)
    assert outcome.actions == actions
    assert outcome.skipped is (actions == ())


def test_the_transform_sees_the_request(rules: Rules, write_transform: Any) -> None:
    write_transform(
        "t.js",
        "export default function (ctx) {\n"
        "  return { message: JSON.stringify([ctx.payload.a, ctx.headers['x-h'], "
        "ctx.headers.authorization,\n"
        "    ctx.query.q, ctx.query.token, ctx.path, ctx.extracted.first, ctx.now, "
        "ctx.action.kind,\n"
        "    ctx.action.message, ctx.item, ctx.index, Object.keys(ctx).sort()]) };\n}",
    )
    ruleset = rules.compile([{**mapping("t.js"), "extract": {"first": "$.a"}}], limits=FAST)
    outcome = call(
        rules,
        ruleset,
        {"a": 1},
        headers={"X-H": "h", "Authorization": "Bearer t"},
        query={"q": "v", "token": "t"},
    )
    import json

    assert json.loads(outcome.actions[0].fields["message"]) == [
        1,
        "h",
        None,
        "v",
        None,
        "hook",
        1,
        "2026-05-01T12:30:00.000Z",
        "agent",
        "templated",
        None,
        None,
        ["action", "extracted", "headers", "now", "path", "payload", "query"],
    ]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("throw new TypeError('bad ' + ctx.payload.secret);", "threw TypeError"),
        ("return Promise.reject(new RangeError('no'));", "threw RangeError"),
        ("return 'text';", "returned a string"),
        ("return [1, 2];", "returned a list"),
        ("return 42;", "returned a number"),
        ("const a = {}; a.self = a; return a;", "threw TypeError"),
        ("return new Promise(() => {});", "never settled"),
        ("return {kind: 'email'};", "kind other than"),
    ],
)
def test_failures_are_500_transform_failed_without_the_payload(
    rules: Rules, write_transform: Any, body: str, reason: str
) -> None:
    write_transform("t.js", f"export default function (ctx) {{ {body} }}")
    # time enough on a loaded machine: these fail by what they do, never by the clock
    ruleset = rules.compile([mapping("t.js")], limits=attrs.evolve(FAST, timeout_ms=3000))
    error = failure(rules, ruleset, {"secret": "s3cr3t-payload"})
    assert (status_of(error.code), error.code) == (500, "transform_failed")
    assert reason in error.message and "'js'" in error.message
    assert "s3cr3t-payload" not in error.message


def test_the_js_error_message_is_kept_apart_for_the_rule_author(
    rules: Rules, write_transform: Any
) -> None:
    write_transform(
        "t.js", "export default (ctx) => { throw new Error('detail ' + ctx.payload.n); }"
    )
    ruleset = rules.compile([mapping("t.js")], limits=FAST)
    error = failure(rules, ruleset, {"n": 7})
    assert getattr(error.__cause__, "detail", None) == "detail 7"
    assert "detail 7" not in error.message


# --- the sandbox -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "while (true) {}",
        "for (;;) { Math.random(); }",
        "return (async () => { await null; while (true) {} })();",
        "Promise.resolve().then(() => { while (true) {} }); return {message: 'sneaky'};",
    ],
)
def test_a_runaway_transform_times_out_with_504_and_the_next_request_works(
    rules: Rules, write_transform: Any, body: str
) -> None:
    write_transform(
        "t.js",
        f"export default function (ctx) {{ if (ctx.payload.spin) {{ {body} }} return "
        f"{{message: 'ok'}}; }}",
    )
    ruleset = rules.compile([mapping("t.js")], limits=FAST)
    error = failure(rules, ruleset, {"spin": True})
    assert (status_of(error.code), error.code) == (504, "transform_timeout")
    assert "200 ms" in error.message
    for _ in range(3):
        assert call(rules, ruleset, {"spin": False}).actions[0].fields["message"] == "ok"


@pytest.mark.parametrize(
    "body",
    [
        "const a = []; while (true) { a.push(new Array(100000).fill(1.5)); }",
        "const keep = []; let i = 0; while (true) { keep.push('x'.repeat(1000000) + i++); }",
        "globalThis.hog = []; while (true) { globalThis.hog.push({a: [1, 2, 3], b: "
        "'xxxxxxxxxxxxxxxx'}); }",
    ],
)
def test_a_memory_bomb_fails_with_500_and_the_next_request_works(
    rules: Rules, write_transform: Any, body: str
) -> None:
    write_transform(
        "t.js",
        f"export default function (ctx) {{ if (ctx.payload.bomb) {{ {body} }} return "
        f"{{message: 'ok'}}; }}",
    )
    ruleset = rules.compile(
        [mapping("t.js")], limits=TransformLimits(timeout_ms=5000, memory_mb=32, pool_size=1)
    )
    error = failure(rules, ruleset, {"bomb": True})
    assert (status_of(error.code), error.code) == (500, "transform_failed")
    assert "32 MiB memory limit" in error.message
    assert call(rules, ruleset, {"bomb": False}).actions[0].fields["message"] == "ok"


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("typeof require", "undefined"),
        ("typeof process", "undefined"),
        ("typeof fetch", "undefined"),
        ("typeof XMLHttpRequest", "undefined"),
        ("typeof setTimeout", "undefined"),
        ("typeof setInterval", "undefined"),
        ("typeof WebAssembly", "undefined"),
        ("typeof Deno + typeof Bun", "undefinedundefined"),
        ("typeof Atomics.waitAsync", "undefined"),
        ("typeof globalThis.__hw_mod", "object"),
    ],
)
def test_no_host_access(rules: Rules, write_transform: Any, expression: str, expected: str) -> None:
    write_transform("t.js", f"export default () => ({{ message: String({expression}) }});")
    ruleset = rules.compile([mapping("t.js")], limits=FAST)
    assert call(rules, ruleset).actions[0].fields["message"] == expected


def test_dynamic_import_is_rejected(rules: Rules, write_transform: Any) -> None:
    write_transform(
        "t.js",
        "export default async () => { const fs = await import('fs'); return {message: "
        "'imported'}; };",
    )
    ruleset = rules.compile([mapping("t.js")], limits=FAST)
    error = failure(rules, ruleset)
    assert error.code == "transform_failed"


POLLUTE = """
function merge(target, source) {
  for (const key of Object.keys(source)) {
    if (source[key] && typeof source[key] === 'object') {
      if (!target[key]) target[key] = {};
      merge(target[key], source[key]);
    } else {
      target[key] = source[key];
    }
  }
  return target;
}
export default function (ctx) {
  if (ctx.payload.attack === 'merge') merge({}, ctx.payload.data);
  if (ctx.payload.attack === 'direct') Object.prototype.polluted = 'yes';
  if (ctx.payload.attack === 'array') Array.prototype.map = () => 'hijacked';
  if (ctx.payload.attack === 'json') JSON.stringify = () => '{"value":{"message":"hijacked"}}';
  return { message: String(({}).polluted) + ',' + String([1].map((x) => x)) };
}
"""


@pytest.mark.parametrize("attack", ["merge", "direct", "array", "json"])
def test_prototype_pollution_fails_and_does_not_stick(
    rules: Rules, write_transform: Any, attack: str
) -> None:
    write_transform("t.js", POLLUTE)
    ruleset = rules.compile([mapping("t.js")], limits=FAST)
    payload = {
        "attack": attack,
        "data": {
            "__proto__": {"polluted": "yes"},
            "constructor": {"prototype": {"polluted": "yes"}},
        },
    }
    outcome_or_error: Any
    try:
        outcome_or_error = call(rules, ruleset, payload).actions[0].fields["message"]
    except Refusal as exc:
        outcome_or_error = exc.code
    assert outcome_or_error in ("transform_failed", "undefined,1")
    assert call(rules, ruleset, {"attack": "none"}).actions[0].fields["message"] == "undefined,1"


def test_a_proto_key_in_the_payload_is_plain_data(rules: Rules, write_transform: Any) -> None:
    write_transform(
        "t.js",
        "export default (ctx) => ({ message: String(ctx.payload.polluted) + ',' + "
        "JSON.stringify(Object.keys(ctx.payload)) });",
    )
    ruleset = rules.compile([mapping("t.js")], limits=FAST)
    message = call(rules, ruleset, {"__proto__": {"polluted": "yes"}}).actions[0].fields["message"]
    assert message == 'undefined,["__proto__"]'


# --- the pool --------------------------------------------------------------------------------

COUNTER = "let calls = 0;\nexport default () => { calls += 1; return { message: String(calls) }; };"


def test_contexts_are_reused_not_created_per_request(rules: Rules, write_transform: Any) -> None:
    write_transform("t.js", COUNTER)
    ruleset = rules.compile([mapping("t.js")], limits=FAST)
    assert [call(rules, ruleset).actions[0].fields["message"] for _ in range(4)] == [
        "1",
        "2",
        "3",
        "4",
    ]


def test_a_pool_of_two_spreads_calls_over_two_warm_contexts(
    rules: Rules, write_transform: Any
) -> None:
    import asyncio

    write_transform("t.js", COUNTER)
    ruleset = rules.compile(
        [mapping("t.js")], limits=TransformLimits(timeout_ms=1000, memory_mb=32, pool_size=2)
    )
    request = make_request("hook", {})
    rule = ruleset.select(request)

    async def burst() -> list[int]:
        outcomes = await asyncio.gather(*(ruleset.evaluate(rule, request) for _ in range(10)))
        return sorted(int(o.actions[0].fields["message"]) for o in outcomes)

    counts = run(burst())
    # two warm contexts, each counting its own calls: two sequences 1..a and 1..b, a + b = 10
    assert counts.count(1) == 2 and max(counts) < 10
    a = max(counts)
    assert sorted(counts) == sorted([*range(1, a + 1), *range(1, 10 - a + 1)])


def test_a_timed_out_context_is_replaced_by_a_fresh_one(rules: Rules, write_transform: Any) -> None:
    write_transform(
        "t.js",
        "let calls = 0;\nexport default (ctx) => { calls += 1; if (ctx.payload.spin) { while "
        "(true) {} } return { message: String(calls) }; };",
    )
    ruleset = rules.compile([mapping("t.js")], limits=FAST)
    assert call(rules, ruleset).actions[0].fields["message"] == "1"
    assert call(rules, ruleset).actions[0].fields["message"] == "2"
    assert failure(rules, ruleset, {"spin": True}).code == "transform_timeout"
    assert call(rules, ruleset).actions[0].fields["message"] == "1"


def test_two_rules_with_the_same_module_share_one_pool(rules: Rules, write_transform: Any) -> None:
    write_transform("t.js", COUNTER)
    ruleset = rules.compile(
        [
            {**mapping("t.js"), "id": "a", "match": {"path": "a"}},
            {**mapping("t.js"), "id": "b", "match": {"path": "b"}},
        ],
        limits=FAST,
    )
    seen = [
        rules.outcome(ruleset, make_request(p, {})).actions[0].fields["message"]
        for p in ("a", "b", "a")
    ]
    assert seen == ["1", "2", "3"]


def test_per_mapping_limits_override_the_defaults(rules: Rules, write_transform: Any) -> None:
    write_transform("t.js", "export default () => { while (true) {} };")
    ruleset = rules.compile(
        [mapping("t.js", timeoutMs=50)], limits=TransformLimits(timeout_ms=10_000, pool_size=1)
    )
    error = failure(rules, ruleset)
    assert error.code == "transform_timeout" and "50 ms" in error.message


def test_close_frees_the_contexts(rules: Rules, write_transform: Any) -> None:
    write_transform("t.js", COUNTER)
    ruleset = rules.compile([mapping("t.js")], limits=FAST)
    call(rules, ruleset)
    ruleset.close()
    with pytest.raises(Refusal) as caught:
        call(rules, ruleset)
    assert caught.value.code == "transform_failed"


def test_compile_and_evaluate_from_inside_a_running_loop(
    transforms_dir: Path, write_transform: Any
) -> None:
    from hookwise.engine.config.convert import structure
    from hookwise.engine.config.mapping import MappingConfig
    from hookwise.engine.rules.ruleset import RuleSet

    write_transform("t.js", "export default () => ({ message: 'in loop' });")

    async def serve() -> str:
        config = structure(mapping("t.js"), MappingConfig)
        ruleset = RuleSet.compile([config], transforms_dir=transforms_dir, limits=FAST)
        try:
            request = make_request("hook", {})
            outcome = await ruleset.evaluate(ruleset.select(request), request)
            return outcome.actions[0].fields["message"]
        finally:
            ruleset.close()

    assert run(serve()) == "in loop"
