"""Fan-out as the peer's configurations write it, through a running gateway (issue 30 point 4-5,
issue 25 point 5): a bare `forEach: messages`, each item's transform and templates seeing that
item (as `item` and as the payload with the list replaced by `[item]`), wake and agent in one
batch, the whole batch validated before anything is stored, and a batch over `forEachMax` refused
whole."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.mapped import events_of, logged, runs_of
from tests.support.wait import eventually

# decides the kind per item; checks that it sees only its own item
KIND_JS = """
export default function ({ payload, item }) {
  const m = payload.messages[0];
  if (payload.messages.length !== 1 || m.id !== item.id) {
    throw new Error("saw the whole batch");
  }
  if (m.kind === "agent") return { kind: "agent", message: "agent:" + m.id, deliver: false };
  if (m.kind === "wake") return { kind: "wake", text: "wake:" + m.id };
  return { kind: "wake", text: "   " };
}
"""


@pytest.fixture(scope="module")
def gw(
    tmp_path_factory: pytest.TempPathFactory, start_module_gateway: Callable[..., GatewayProcess]
) -> GatewayProcess:
    workdir: Path = tmp_path_factory.mktemp("fanout-parity") / "gw"
    tdir = workdir / "hooks" / "transforms"  # the default transformsDir, as the peer's
    tdir.mkdir(parents=True)
    (tdir / "kind.js").write_text(KIND_JS, encoding="utf-8")
    mappings = [
        {"id": "mixed", "match": {"path": "mixed"}, "forEach": "messages", "action": "wake",
         "textTemplate": "{{item.id}}", "wakeMode": "next-heartbeat",
         "transform": {"module": "kind.js"}},
        {"id": "mail", "match": {"path": "mail"}, "forEach": "messages", "action": "agent",
         "sessionKey": "hook:mail:{{messages[0].id}}",
         "messageTemplate": "{{messages[0].subject}}|{{item.subject}}|{{messages | length}}",
         "deliver": False},
        {"id": "small", "match": {"path": "small"}, "forEach": "items", "forEachMax": 3,
         "action": "wake", "textTemplate": "small {{item}}", "wakeMode": "next-heartbeat"},
        {"id": "big", "match": {"path": "big"}, "forEach": "$.items", "action": "wake",
         "textTemplate": "big {{item}}", "wakeMode": "next-heartbeat"},
    ]  # fmt: skip
    config = {
        "hooks": {"enabled": True, "token": HOOK_TOKEN, "mappings": mappings},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {"defaults": {"heartbeat": {"every": 0}}},
    }
    return start_module_gateway(config, workdir=workdir)


def test_a_bare_path_gives_each_item_its_own_kind(gw: GatewayProcess) -> None:
    batch = [
        {"id": "w1", "kind": "wake"},
        {"id": "w2", "kind": "wake"},
        {"id": "a1", "kind": "agent"},
    ]
    r = gw.hook("mixed", {"messages": batch})
    assert r.status_code == 202, r.text
    body = r.json()
    assert len(body["events"]) == 2 and len(body["runs"]) == 1
    assert sorted(e["text"] for e in events_of(gw, "mixed")) == ["wake:w1", "wake:w2"]
    assert [run["message"] for run in runs_of(gw, "mixed")] == ["agent:a1"]


def test_templates_see_the_current_item_under_a_bare_path(gw: GatewayProcess) -> None:
    mails = [{"id": "m1", "subject": "S1"}, {"id": "m2", "subject": "S2"}]
    r = gw.hook("mail", {"messages": mails})
    assert r.status_code == 202, r.text
    assert [x["sessionKey"] for x in r.json()["runs"]] == ["hook:mail:m1", "hook:mail:m2"]
    messages = sorted(run["message"] for run in runs_of(gw, "mail"))
    assert messages == ["S1|S1|1", "S2|S2|1"]


def test_an_invalid_item_after_a_valid_one_refuses_the_batch(gw: GatewayProcess) -> None:
    batch = [{"id": "v1", "kind": "wake"}, {"id": "bad"}, {"id": "v2", "kind": "agent"}]
    r = gw.hook("mixed", {"messages": batch})
    assert r.status_code == 400, r.text
    assert r.json()["code"] == "missing_field" and r.json()["rule"] == "mixed"
    texts = [e["text"] for e in events_of(gw, "mixed")]
    assert "wake:v1" not in texts
    assert all(run["message"] != "agent:v2" for run in runs_of(gw, "mixed"))


def test_a_batch_over_for_each_max_is_refused_whole(gw: GatewayProcess) -> None:
    r = gw.hook("small", {"items": ["a", "b", "c", "d"]})
    assert r.status_code == 413, r.text
    body = r.json()
    assert body["code"] == "for_each_max_exceeded" and body["field"] == "forEachMax"
    assert "forEachMax (3)" in body["error"] and "4 items" in body["error"]
    assert events_of(gw, "small") == []
    line = eventually(lambda: logged(gw, "/hooks/small")[:1], what="the refusal logged")[0]
    assert line["status"] == 413 and line["code"] == "for_each_max_exceeded"
    r = gw.hook("small", {"items": ["a", "b", "c"]})  # at the limit: every item
    assert r.status_code == 200 and len(r.json()["events"]) == 3


def test_the_default_limit_is_the_peers_200(gw: GatewayProcess) -> None:
    r = gw.hook("big", {"items": list(range(201))})
    assert r.status_code == 413 and r.json()["code"] == "for_each_max_exceeded"
    assert "forEachMax (200)" in r.json()["error"]
    assert events_of(gw, "big") == []
    r = gw.hook("big", {"items": list(range(25))})  # beyond the old silent cap of 20
    assert r.status_code == 200 and len(r.json()["events"]) == 25
