"""Templates: OpenClaw compatibility, missing values, JSON rendering, filters, the sandbox."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import attrs
import pytest

from hookwise.engine.errors import Refusal
from hookwise.engine.request import InboundRequest
from hookwise.engine.rules.render import (
    RequestView,
    TemplateCompileError,
    TemplateVariables,
    compile_template,
    template_variables,
)
from hookwise.server.ingress.refusals import status_of
from tests.engine.conftest import Rules

PAYLOAD: dict[str, Any] = {
    "source": "gmail",
    "messages": [{"id": "m1", "from": "ann@example.com", "subject": "Hello", "tags": ["a", "b"]}],
    "items": [1, 2],
    "keys": "k",
    "obj": {"a": True, "n": None, "__proto__": {"polluted": 1}, "constructor": "c"},
    "flag": False,
    "count": 3,
    "ratio": 0.5,
    "nothing": None,
    "empty": "",
    "x-dash": "dashed",
    "__dunder__": "hidden",
    "_id": "under",
}


def text(rules: Rules, template: str, payload: dict[str, Any] = PAYLOAD, **request: Any) -> str:
    outcome = rules.one({"action": "wake", "textTemplate": template}, payload, **request)
    return outcome.actions[0].fields["text"]


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        # OpenClaw forms: bare payload paths and payload.x
        ("{{messages[0].subject}}", "Hello"),
        ("{{payload.messages[0].from}}", "ann@example.com"),
        ("{{ messages.0.id }}", "m1"),
        ("{{messages[-1].id}}", "m1"),
        ("{{payload['x-dash']}}", "dashed"),
        ("{{path}}|{{now}}", "hook|2026-05-01T12:30:00.000Z"),
        ("{{headers['x-event']}}|{{headers['X-Event']}}", "push|"),
        ("{{query.env}}", "prod"),
        # missing values render empty, at any depth
        ("[{{missing}}]", "[]"),
        ("[{{missing.a.b[3].c}}]", "[]"),
        ("[{{messages[5].subject}}]", "[]"),
        ("[{{messages[0].nope.deeper}}]", "[]"),
        ("[{{nothing}}]", "[]"),
        ("[{{ payload.nothing.x }}]", "[]"),
        # objects and lists as JSON, scalars as JSON spells them
        ("{{messages[0].tags}}", '["a","b"]'),
        ("{{ obj.a }} {{ flag }} {{ count }} {{ ratio }}", "true false 3 0.5"),
        ("{{ {'k': [1, none]} }}", '{"k":[1,null]}'),
        # data keys are data: never dict methods
        ("{{payload.items}}", "[1,2]"),
        ("{{items}}", "[1,2]"),
        ("{{payload.keys}}", "k"),
        ("[{{payload.get}}]", "[]"),
        # blocked keys never resolve
        ("[{{obj.__proto__}}{{obj['__proto__']}}{{obj.constructor}}{{obj.prototype}}]", "[]"),
        ("[{{__dunder__}}{{payload.__dunder__}}]", "[]"),
        ("{{_id}}", "under"),
        # filters
        ("{{ obj | tojson }}", '{"a":true,"n":null,"__proto__":{"polluted":1},"constructor":"c"}'),
        ("{{ missing | tojson }}", "null"),
        ("{{ '<b>&' | tojson }}", '"<b>&"'),
        ("{{ missing | default('none') }}", "none"),
        ("{{ empty | default('none', true) }}", "none"),
        ("{{ 'Hello world' | truncate(8, true, '…', 0) }}", "Hello w…"),
        ("{{ messages[0].subject | required }}", "Hello"),
        ("{{ messages[0].subject | upper }}", "HELLO"),
        ("{{ messages[0].subject.lower() }}", "hello"),
        ("{% for m in messages %}{{ m.id }};{% endfor %}", "m1;"),
        ("{% for t in missing %}x{% endfor %}ok", "ok"),
        ("{{ obj | items | list | length }}", "4"),
        ("plain text, no tags", "plain text, no tags"),
    ],
)
def test_template_renders(rules: Rules, template: str, expected: str) -> None:
    rendered = text(rules, template, headers={"X-Event": "push"}, query={"env": "prod"})
    assert rendered == expected


@pytest.mark.parametrize(
    "template",
    [
        "{{ ''.__class__.__mro__ }}",
        "{{ payload.__class__.__init__.__globals__ }}",
        "{{ messages.__class__ }}",
        "{{ self }}{{ self.__init__ }}{{ self._TemplateReference__context }}",
        "{{ range.__self__ }}{{ dict.__init__ }}",
        "{{ '{0.__class__}'.format(1) }}",
        "{{ messages[0].subject.__len__ }}",
        "{{ count.__class__ }}",
        "{{ headers.__class__ }}",
    ],
)
def test_escape_attempts_render_nothing(rules: Rules, template: str) -> None:
    assert text(rules, template) == ""


@pytest.mark.parametrize(
    "template",
    [
        "{{ lipsum() }}",
        "{{ cycler(1, 2) }}",
        "{{ missing() }}",
        "{{ ''.__class__.__mro__[1].__subclasses__()[0] }}",
    ],
)
def test_calls_to_missing_things_fail_as_template_error(rules: Rules, template: str) -> None:
    with pytest.raises(Refusal) as caught:
        text(rules, template)
    assert (status_of(caught.value.code), caught.value.code, caught.value.rule_id) == (
        400,
        "template_error",
        "mapping-1",
    )


def test_the_immutable_sandbox_refuses_mutation(rules: Rules) -> None:
    with pytest.raises(Refusal) as caught:
        text(rules, "{{ messages.append(1) }}")
    assert caught.value.code == "template_error"
    assert PAYLOAD["messages"][0]["id"] == "m1" and len(PAYLOAD["messages"]) == 1


def test_required_fails_the_request_with_400_naming_rule_and_field(rules: Rules) -> None:
    ruleset = rules.compile(
        [{"id": "mail", "match": {"path": "hook"}, "messageTemplate": "{{ subject | required }}"}]
    )
    from tests.engine.conftest import make_request, run

    request = make_request("hook", {"body": "secret-payload-text"})
    with pytest.raises(Refusal) as caught:
        run(ruleset.evaluate(ruleset.select(request), request))
    error = caught.value
    assert (status_of(error.code), error.code, error.rule_id, error.field) == (
        400,
        "missing_value",
        "mail",
        "messageTemplate",
    )
    assert "'subject'" in error.message and "mail" in error.message
    assert "secret-payload-text" not in error.message


def test_required_with_a_message_uses_it(rules: Rules) -> None:
    with pytest.raises(Refusal) as caught:
        text(rules, "{{ empty | required('the alert needs a title') }}")
    assert caught.value.code == "missing_value"
    assert "the alert needs a title" in caught.value.message


def test_render_errors_do_not_quote_the_payload(rules: Rules) -> None:
    with pytest.raises(Refusal) as caught:
        text(rules, "{{ messages[0].subject + 1 }}")
    assert caught.value.code == "template_error"
    assert "Hello" not in caught.value.message


def test_reserved_names_win_over_payload_keys(rules: Rules) -> None:
    payload = {"path": "spoofed", "headers": "spoofed", "now": "spoofed", "payload": "spoofed"}
    rendered = text(
        rules, "{{path}} {{now}} {{headers['x-a']}} {{payload.path}}", payload, headers={"x-a": "1"}
    )
    assert rendered == "hook 2026-05-01T12:30:00.000Z 1 spoofed"


def test_credentials_are_not_visible_to_templates(rules: Rules) -> None:
    rendered = text(
        rules,
        "[{{headers.authorization}}{{headers['x-service-token']}}{{query.token}}]{{headers.other}}",
        headers={"Authorization": "Bearer t0k3n", "x-service-token": "t0k3n", "other": "ok"},
        query={"token": "t0k3n"},
    )
    assert rendered == "[]ok"


def test_a_syntax_error_is_reported_at_compile_time_with_the_line() -> None:
    with pytest.raises(TemplateCompileError, match="line 2"):
        compile_template("fine\n{{ broken ")


def test_templates_without_tags_are_constants() -> None:
    assert compile_template("Gmail").is_constant
    assert not compile_template("{{ x }}").is_constant


# ----------------------------------------------------------- text-and-references fast path

FAST_VARIABLES: list[dict[str, Any]] = [
    {**PAYLOAD, "payload": PAYLOAD, "headers": {"x-e": "push"}, "path": "p", "now": "2026"},
    {"a": {"b": {"c": [1, {"d": 2}]}, "s": "text", "__x": 1}, "t": "x", "u": 1.5, "v": 10**20},
    {"a": "not a mapping", "b": None, "c": True, "d": [1, "two", None], "e": {}, "self": "me"},
    {},
]
FAST_TEMPLATES = [
    "{{source}} / {{count}} / {{ratio}} / {{flag}} / {{nothing}}.",
    "{{ messages }}|{{ obj }}|{{ items }}",
    "{{obj.a}} {{obj.n}} {{obj.__proto__}} {{obj.constructor}} {{obj['__proto__']}}",
    "{{payload.source}}{{payload['x-dash']}}{{headers['x-e']}}{{path}}{{now}}",
    "{{a.b.c}} {{a.b.missing.deeper}} {{a.s.upper}} {{a.s.__class__}} {{a['__x']}}",
    "{{a.b}} {{b.c}} {{c}} {{d}} {{e}} {{e.x}} {{t}} {{u}} {{v}}",
    "{{ a }}{{b}}\n{# a comment #}{{c}}\n",
    "{{ undefined_name }}{{ undefined_name.x['y'] }}{{__dunder__}}{{_id}}",
    "{{messages[0].subject}} {{messages[0]['tags'][1]}} {{messages[3]}} {{items[1]}} {{ a.0 }}",
    "{{ t[0] }} {{ d[1] }} {{ d[5] }} {{ a.b.c[1].d }} {{ a[0] }} {{ e[0] }} {{ keys[0] }}",
]


@pytest.mark.parametrize("template", FAST_TEMPLATES)
@pytest.mark.parametrize("variables", range(len(FAST_VARIABLES)))
def test_text_and_reference_templates_render_as_jinja_does(template: str, variables: int) -> None:
    compiled = compile_template(template)
    assert compiled._plain is not None  # the fast path is taken
    jinja_only = attrs.evolve(compiled, plain=None)
    scope = FAST_VARIABLES[variables]
    assert compiled.render(scope) == jinja_only.render(scope)


@pytest.mark.parametrize(
    "template",
    [
        "{{ x | upper }}",
        "{{ self }}",
        "{{ range }}",
        "{{ loop }}",
        "{{ a[true] }}",
        "{{ a[-1] }}",
        "{{ a[0.5] }}",
        "{{ 'lit' }}",
        "{% if a %}{{a}}{% endif %}",
        "{{ a ~ b }}",
        "{{ a() }}",
    ],
)
def test_anything_more_than_references_takes_jinjas_way(template: str) -> None:
    assert compile_template(template)._plain is None


def test_template_variables_resolved_by_name_match_the_whole_dict() -> None:
    """`TemplateVariables` resolves names one by one with `template_variables`' precedence (the
    request's names, then extracted values, then payload keys, hidden and dunder keys left out);
    the dict and the lazy mapping must agree on every name."""
    payload = {**PAYLOAD, "path": "from payload", "headers": "from payload", "picked": "payload"}
    request = InboundRequest(
        path="gmail",
        payload=payload,
        headers={"X-Trace": "t1", "Authorization": "Bearer secret"},
        query={"a": "1", "token": "secret"},
        now=datetime(2026, 11, 25, 4, 0, tzinfo=UTC),
    )
    extracted = {"picked": "extracted", "count": 7}
    view = RequestView(request)
    lazy = TemplateVariables(payload, extracted, view)
    whole = template_variables(
        payload,
        headers=view.headers,
        query=view.query,
        path=view.path,
        now=view.now,
        extracted=extracted,
    )
    assert dict(lazy) == whole
    for name in [*whole, "__dunder__", "missing", "item"]:
        assert lazy.get(name, "absent") == whole.get(name, "absent"), name
        assert (name in lazy) == (name in whole), name
    assert lazy["headers"] == {"x-trace": "t1"} and lazy["query"] == {"a": "1"}
    assert lazy["now"] == "2026-11-25T04:00:00.000Z" and lazy["picked"] == "extracted"
    fanned = TemplateVariables(payload, extracted, view, {"item": 1, "path": "item wins"})
    assert fanned["item"] == 1 and fanned["path"] == "item wins"
    assert dict(fanned) == {**whole, "item": 1, "path": "item wins"}
