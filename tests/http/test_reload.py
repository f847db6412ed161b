"""Reloading the rules of a running server: on SIGHUP, on file change with `--watch`, keeping the
old rules when the new ones are broken, and letting a request in flight finish on the old rules.
Each reload is in the audit log (`via` `signal` or `watch`, `failed` when the rules broke)."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.gateway import GatewayProcess, base_config
from tests.support.mapped import runs_of
from tests.support.wait import eventually

Launch = Callable[..., GatewayProcess]


def mapping(rule_id: str, path: str, **more: Any) -> dict[str, Any]:
    return {
        "id": rule_id,
        "match": {"path": path},
        "messageTemplate": f"{rule_id}: {{{{n}}}}",
        **more,
    }


@pytest.fixture
def launch(start_gateway: Callable[..., GatewayProcess]) -> Launch:
    """Start a gateway with the given config and extra `serve` flags; stopped afterwards."""
    count = 0

    def start(
        config: dict[str, Any], *extra_args: str, workdir: Path | None = None
    ) -> GatewayProcess:
        nonlocal count
        count += 1
        return start_gateway(
            config, name=f"gw{count}", extra_args=list(extra_args), workdir=workdir
        )

    return start


def rewrite(gw: GatewayProcess, **hooks: Any) -> None:
    gw.config = base_config(**hooks)
    gw.write_config()


def answers(gw: GatewayProcess, name: str, status: int) -> Callable[[], httpx.Response | None]:
    def probe() -> httpx.Response | None:
        r = gw.hook(name, {"n": 1})
        return r if r.status_code == status else None

    return probe


def reloads(gw: GatewayProcess) -> list[tuple[str, str, str, str, str | None]]:
    """(actor, via, client, outcome, code) of the reloads in the audit log, newest first."""
    entries = gw.admin("/api/audit", action="reload")["items"]
    return [(e["actor"], e["via"], e["client"], e["outcome"], e["code"]) for e in entries]


def test_sighup_swaps_in_the_new_mappings(launch: Launch) -> None:
    gw = launch(base_config(mappings=[mapping("before", "before")]))
    assert gw.hook("before", {"n": 1}).status_code == 202
    rewrite(gw, mappings=[mapping("after", "after")])
    assert gw.proc is not None
    gw.proc.send_signal(signal.SIGHUP)
    r = eventually(answers(gw, "after", 202), what="the new mapping to answer")
    assert r.json()["rule"] == "after"
    assert [x["runId"] for x in runs_of(gw, "after")] == [r.json()["runId"]]
    gone = gw.hook("before", {"n": 2})
    assert gone.status_code == 404 and gone.json()["code"] == "not_found"
    assert "reload: rules swapped in" in gw.stderr()
    # (recorded once the swap is done: waited for, not raced)
    assert eventually(lambda: reloads(gw), what="the audit entry") == [
        ("-", "signal", "local", "ok", None)
    ]
    [entry] = gw.admin("/api/audit", action="reload")["items"]
    assert entry["targets"] == {"pid": str(gw.proc.pid)}


def test_a_broken_config_on_reload_keeps_the_old_rules_and_logs_why(launch: Launch) -> None:
    gw = launch(base_config(mappings=[mapping("before", "before")]))
    rewrite(gw, mappings=[{"id": "broken", "match": {"path": "x"}, "messageTemplate": "{{ oops"}])
    assert gw.proc is not None
    gw.proc.send_signal(signal.SIGHUP)
    log = eventually(lambda: (t := gw.stderr()) and "reload failed" in t and t, what="the failure")
    [line] = [line for line in log.splitlines() if "reload failed" in line]
    assert "keeping the current rules: rule 'broken': hooks.mappings[0].messageTemplate" in line
    assert "\\x0a" not in line  # the problems are joined, not an escaped line break
    r = gw.hook("before", {"n": 3})
    assert r.status_code == 202, r.text
    assert r.json()["rule"] == "before"
    assert gw.hook("x", {"n": 3}).status_code == 404
    assert [x["runId"] for x in runs_of(gw, "before")] == [r.json()["runId"]]
    assert eventually(lambda: reloads(gw), what="the audit entry") == [
        ("-", "signal", "local", "failed", "reload_failed")
    ]


def test_watch_reloads_a_changed_config_without_a_signal(launch: Launch) -> None:
    gw = launch(base_config(mappings=[mapping("before", "before")]), "--watch")
    rewrite(gw, mappings=[mapping("after", "after")])
    r = eventually(answers(gw, "after", 202), what="the watcher to reload")
    assert r.json()["rule"] == "after"
    assert [x["runId"] for x in runs_of(gw, "after")] == [r.json()["runId"]]
    assert gw.hook("before", {"n": 1}).status_code == 404
    assert eventually(lambda: reloads(gw), what="the audit entry")[0] == (
        "-",
        "watch",
        "local",
        "ok",
        None,
    )


def test_watch_sees_a_new_rule_file_and_ignores_other_files_beside_the_config(
    launch: Launch,
) -> None:
    gw = launch(base_config(rules=["rules/*.yaml"]), "--watch")
    (gw.workdir / "notes.txt").write_text("not read by a reload\n")  # beside the config
    rules = gw.workdir / "rules"
    rules.mkdir()
    (rules / "late.yaml").write_text(
        "- id: late\n  match: {path: late}\n  messageTemplate: 'late {{n}}'\n"
    )
    r = eventually(answers(gw, "late", 202), what="the watcher to see the new rule file")
    assert r.json()["rule"] == "late"
    reloads = [line for line in gw.stderr().splitlines() if "changed; reloading" in line]
    assert reloads and all("late.yaml" in line or "rules" in line for line in reloads), reloads
    assert not any("notes.txt" in line or "hookwise.db" in line for line in reloads)


def test_watch_reloads_a_changed_transform(launch: Launch, tmp_path: Path) -> None:
    tdir = tmp_path / "gw" / "hooks" / "transforms"  # inside <config dir>/hooks/transforms
    tdir.mkdir(parents=True)
    module = tdir / "version.py"
    module.write_text('def transform(ctx):\n    return {"sessionKey": "hook:v1"}\n')
    rule = mapping("versioned", "versioned", transform={"module": "version.py"})
    gw = launch(
        base_config(transformsDir=str(tdir), mappings=[rule]), "--watch", workdir=tmp_path / "gw"
    )
    assert gw.hook("versioned", {"n": 1}).json()["sessionKey"] == "hook:v1"
    module.write_text('def transform(ctx):\n    return {"sessionKey": "hook:version-2"}\n')
    r = eventually(
        lambda: (
            (r := gw.hook("versioned", {"n": 2})).json()["sessionKey"] == "hook:version-2" and r
        ),
        what="the watcher to load the new transform",
    )
    assert r.status_code == 202
    assert "hook:version-2" in [x["sessionKey"] for x in runs_of(gw, "versioned")]


def test_a_request_in_flight_finishes_on_the_old_rules(launch: Launch, tmp_path: Path) -> None:
    tdir = tmp_path / "gw" / "hooks" / "transforms"  # inside <config dir>/hooks/transforms
    tdir.mkdir(parents=True)
    (tdir / "slow.js").write_text(
        "export default function () {\n"
        "  const end = Date.now() + 3000;\n"
        "  while (Date.now() < end) {}\n"
        '  return { sessionKey: "hook:old-rules" };\n'
        "}\n"
    )
    slow = mapping("slow", "slow", transform={"module": "slow.js"})
    hooks: dict[str, Any] = {"transformsDir": str(tdir), "transformLimits": {"timeoutMs": 10000}}
    gw = launch(base_config(mappings=[slow], **hooks), workdir=tmp_path / "gw")
    answer: list[httpx.Response] = []
    request = threading.Thread(target=lambda: answer.append(gw.hook("slow", {"n": 1})))
    request.start()
    # Nothing outside V8 can see the transform start; it runs 3 s, so half a second in, the
    # request is past `select`. The asserts below fail (never pass wrongly) if that was not so.
    time.sleep(0.5)
    rewrite(gw, mappings=[mapping("fresh", "slow")], **hooks)
    assert gw.proc is not None
    gw.proc.send_signal(signal.SIGHUP)
    eventually(lambda: "reload: rules swapped in" in gw.stderr(), what="the reload")
    assert request.is_alive(), "the reload should have happened while the request ran"
    request.join(15)
    [r] = answer
    assert r.status_code == 202, r.text
    assert (r.json()["rule"], r.json()["sessionKey"]) == ("slow", "hook:old-rules")
    assert [x["sessionKey"] for x in runs_of(gw, "slow")] == ["hook:old-rules"]
    assert gw.hook("slow", {"n": 2}).json()["rule"] == "fresh"


def test_requests_are_answered_while_a_reload_loads_its_transforms(
    launch: Launch, tmp_path: Path
) -> None:
    """A reload compiles on a thread: while it starts sandbox workers and loads a transform that
    takes seconds to load, the gateway answers on its current rules (on the event loop, the
    reload stopped every request until it was done)."""
    tdir = tmp_path / "gw" / "hooks" / "transforms"  # inside <config dir>/hooks/transforms
    tdir.mkdir(parents=True)
    loading = tmp_path / "loading"
    (tdir / "slow_load.py").write_text(
        "import pathlib, time\n"
        f"pathlib.Path({str(loading)!r}).write_text('now')\n"
        "time.sleep(3)\n"
        "def transform(ctx):\n"
        '    return {"sessionKey": "hook:slow-load"}\n'
    )
    hooks: dict[str, Any] = {"transformsDir": str(tdir), "transformLimits": {"workers": 1}}
    gw = launch(
        base_config(mappings=[mapping("steady", "steady")], **hooks), workdir=tmp_path / "gw"
    )
    slow = mapping("slow", "slow", transform={"module": "slow_load.py"})
    rewrite(gw, mappings=[mapping("steady", "steady"), slow], **hooks)
    assert gw.proc is not None
    gw.proc.send_signal(signal.SIGHUP)
    eventually(loading.exists, what="the reload to load the slow transform")
    assert gw.hook("steady", {"n": 1}).status_code == 202
    assert "reload: rules swapped in" not in gw.stderr(), "answered only once the reload was done"
    eventually(lambda: "reload: rules swapped in" in gw.stderr(), what="the reload")
    assert gw.hook("slow", {"n": 1}).json()["sessionKey"] == "hook:slow-load"
