"""Fan-out as the peer does it, through HTTP: each item as `item` and as the payload with the list
replaced by `[item]`, the whole batch validated first, a missing or non-list `forEach` refused, and
an identical redelivery without `Idempotency-Key` replayed (durably)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.mapped import runs_of

# The peer's gmail mapping, as an OpenClaw user writes it (messages[0] is the current message).
PEER_GMAIL = {
    "id": "peer-gmail",
    "match": {"path": "gmail"},
    "action": "agent",
    "name": "Gmail",
    "forEach": "$.messages",
    "sessionKey": "hook:gmail:{{messages[0].id}}",
    "messageTemplate": "New email from {{messages[0].from}}\nSubject: {{messages[0].subject}}\n"
    "{{messages[0].snippet}}\n{{messages[0].body}}",
    "deliver": False,
}
NAME_ONLY_JS = """
export default function ({ payload }) {
  return payload.message ? { message: payload.message } : { name: "no message here" };
}
"""
SUBJECT_JS = """
export default function ({ payload }) {
  return { message: "js sees " + payload.messages.length + " x " + payload.messages[0].subject };
}
"""


def mail(i: int, **extra: Any) -> dict[str, Any]:
    return {"id": f"m{i}", "from": f"u{i}@example.com", "subject": f"S{i}", "snippet": "",
            "body": f"b{i}", **extra}  # fmt: skip


@pytest.fixture(scope="module")
def gw(
    tmp_path_factory: pytest.TempPathFactory, start_module_gateway: Callable[..., GatewayProcess]
) -> GatewayProcess:
    workdir: Path = tmp_path_factory.mktemp("fanout")
    (workdir / "gw" / "hooks" / "transforms").mkdir(parents=True)
    (workdir / "gw" / "hooks" / "transforms" / "subject.js").write_text(
        SUBJECT_JS, encoding="utf-8"
    )
    (workdir / "gw" / "hooks" / "transforms" / "name.js").write_text(NAME_ONLY_JS, encoding="utf-8")
    mappings = [
        PEER_GMAIL,
        {"id": "js", "match": {"path": "js"}, "forEach": "$.messages[*]",
         "transform": {"module": "subject.js"}, "deliver": False},
        {"id": "item", "match": {"path": "item"}, "forEach": "$.batch.items",
         "textTemplate": "{{index}} {{item.n}} {{batch.items[0].n}} {{batch.items | length}}",
         "action": "wake", "wakeMode": "next-heartbeat"},
        {"id": "bare", "match": {"path": "bare"}, "transform": {"module": "name.js"},
         "deliver": False},
        {"id": "keys", "match": {"path": "keys"}, "forEach": "$.messages",
         "sessionKey": "{{messages[0].key}}", "messageTemplate": "{{item.key}}", "deliver": False},
    ]  # fmt: skip
    config = {
        "hooks": {
            "enabled": True,
            "token": HOOK_TOKEN,
            "transformsDir": str(workdir / "gw" / "hooks" / "transforms"),
            "mappings": mappings,
        },
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
    }
    return start_module_gateway(config, workdir=workdir / "gw")


def test_each_message_is_messages_0_as_the_peer_shows_it(gw: GatewayProcess) -> None:
    r = gw.hook("gmail", {"source": "gmail", "messages": [mail(1), mail(2), mail(3)]})
    assert r.status_code == 202
    keys = [run["sessionKey"] for run in r.json()["runs"]]
    assert keys == ["hook:gmail:m1", "hook:gmail:m2", "hook:gmail:m3"]
    runs = {run["sessionKey"]: run for run in runs_of(gw, "peer-gmail")}
    assert runs["hook:gmail:m2"]["message"] == "New email from u2@example.com\nSubject: S2\n\nb2"
    assert runs["hook:gmail:m3"]["message"].startswith("New email from u3@example.com")


def test_a_transform_sees_the_payload_with_the_current_item(gw: GatewayProcess) -> None:
    r = gw.hook("js", {"messages": [mail(1), mail(2)]})
    assert r.status_code == 202
    runs = sorted(runs_of(gw, "js"), key=lambda run: run["message"])
    assert [run["message"] for run in runs] == ["js sees 1 x S1", "js sees 1 x S2"]


def test_item_and_index_stay_and_a_nested_list_is_replaced(gw: GatewayProcess) -> None:
    r = gw.hook("item", {"batch": {"items": [{"n": "a"}, {"n": "b"}]}})
    assert r.status_code == 200
    texts = sorted(e["text"] for e in gw.admin("/api/events", limit=50)["items"])
    assert "0 a a 1" in texts and "1 b b 1" in texts


def test_one_bad_item_refuses_the_whole_batch(gw: GatewayProcess) -> None:
    r = gw.hook("keys", {"messages": [{"key": "hook:a"}, {"key": "main"}, {"key": "hook:c"}]})
    assert r.status_code == 400
    body = r.json()
    assert body["code"] == "session_key_reserved" and body["rule"] == "keys"
    assert runs_of(gw, "keys") == []
    r = gw.hook("keys", {"messages": [{"key": "hook:a"}, {"key": "hook:b"}]})
    assert r.status_code == 202 and len(runs_of(gw, "keys")) == 2


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ({"source": "gmail", "mesages": [mail(1)]}, "$.messages is missing from the payload"),
        ({"messages": {"id": "m1"}}, "$.messages is not a list (it is a mapping)"),
        ({"messages": "m1"}, "$.messages is not a list (it is a string)"),
        ({"messages": None}, "$.messages is missing from the payload"),
    ],
)
def test_a_missing_or_non_list_for_each_is_refused_naming_the_path(
    gw: GatewayProcess, payload: dict[str, Any], problem: str
) -> None:
    before = len(runs_of(gw, "peer-gmail"))
    r = gw.hook("gmail", payload)
    assert r.status_code == 400
    body = r.json()
    assert body["code"] == "missing_value" and body["field"] == "forEach"
    assert body["rule"] == "peer-gmail" and problem in body["error"]
    assert len(runs_of(gw, "peer-gmail")) == before


def test_an_empty_list_is_204(gw: GatewayProcess) -> None:
    r = gw.hook("gmail", {"messages": []})
    assert r.status_code == 204 and r.content == b""


def test_an_identical_redelivery_replays_the_first_answer_durably(gw: GatewayProcess) -> None:
    batch = {"source": "gmail", "messages": [mail(21), mail(22)]}
    first = gw.hook("gmail", batch)
    assert first.status_code == 202 and "idempotent-replayed" not in first.headers
    count = len(runs_of(gw, "peer-gmail"))
    again = gw.hook("gmail", batch)
    assert again.status_code == 202 and again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert len(runs_of(gw, "peer-gmail")) == count
    gw.restart()
    third = gw.hook("gmail", batch)
    assert third.json() == first.json() and third.headers["idempotent-replayed"] == "true"
    other = gw.hook("gmail", {"source": "gmail", "messages": [mail(23)]})
    assert other.status_code == 202 and "idempotent-replayed" not in other.headers
    assert len(runs_of(gw, "peer-gmail")) == count + 1
    keyed = gw.hook("gmail", batch, headers={"Idempotency-Key": "caller-key-1"})
    assert keyed.status_code == 202 and keyed.json() != first.json()  # the caller's key rules


def test_an_agent_mapping_without_message_template_relies_on_its_transform(
    gw: GatewayProcess,
) -> None:
    r = gw.hook("bare", {"message": "from the transform"})
    assert r.status_code == 202
    assert [run["message"] for run in runs_of(gw, "bare")] == ["from the transform"]
    r = gw.hook("bare", {})
    assert r.status_code == 400
    body = r.json()
    assert (body["code"], body["field"], body["rule"]) == ("missing_field", "message", "bare")
    assert "rule 'bare'" in body["error"]
    assert len(runs_of(gw, "bare")) == 1
