"""The transform sandbox through the real server: hostile transforms cost one worker process and
one request, never the gateway; answers come within the limits; broken contexts are not reused."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.mapped import logged, runs_of
from tests.support.processes import children
from tests.support.wait import eventually

TRANSFORMS: dict[str, str] = {
    # issue 17, point 1: an array sized from the payload; V8 dies of it ("invalid table size")
    "array.js": """
export default function (ctx) {
  if (ctx.payload.n) { return { message: "len " + new Array(ctx.payload.n).fill(0).length }; }
  return { message: "array ok" };
}
""",
    # point 2: ArrayBuffers live outside the V8 heap
    "buffers.js": """
export default function (ctx) {
  const keep = [];
  if (ctx.payload.big) keep.push(new Uint8Array(512 * 1024 * 1024));
  if (ctx.payload.many) for (let i = 0; i < 32; i++) keep.push(new ArrayBuffer(16 * 1024 * 1024));
  return { message: "buffers ok " + keep.length };
}
""",
    # point 4: a promise loop left running, and a transform that redefines the global JSON
    "loop.js": """
let calls = 0;
export default async function (ctx) {
  calls += 1;
  if (ctx.payload.loop) { const spin = () => Promise.resolve().then(spin); spin(); }
  return { message: "loop ok " + calls };
}
""",
    "json.js": """
export default function (ctx) {
  if (ctx.payload.attack) {
    try { globalThis.JSON = { parse: () => ({}), stringify: () => "{}" }; } catch (e) {}
    try { JSON.parse = () => ({}); } catch (e) {}
    throw new Error("attacked");
  }
  return { message: "json ok " + JSON.stringify(ctx.payload) };
}
""",
    "runaway.py": """
import time
def transform(ctx):
    if ctx.payload.get("hang"):
        while True:
            time.sleep(0.05)
    return {"message": "py ok"}
""",
}


def _mapping(name: str, module: str) -> dict[str, Any]:
    return {
        "id": name,
        "match": {"path": name},
        "messageTemplate": "templated",
        "transform": {"module": module},
    }


@pytest.fixture(scope="module")
def gw(
    tmp_path_factory: pytest.TempPathFactory, start_module_gateway: Callable[..., GatewayProcess]
) -> GatewayProcess:
    workdir = tmp_path_factory.mktemp("sandbox")
    tdir = workdir / "gw" / "hooks" / "transforms"  # inside <config dir>/hooks/transforms
    tdir.mkdir(parents=True)
    for name, text in TRANSFORMS.items():
        (tdir / name).write_text(text, encoding="utf-8")
    config = {
        "hooks": {
            "enabled": True,
            "token": HOOK_TOKEN,
            "transformsDir": str(tdir),
            "transformLimits": {
                "timeoutMs": 1000,
                "memoryMb": 64,
                "poolSize": 1,
                "workers": 2,
                "workerMemoryMb": 256,
            },
            "mappings": [
                _mapping("array", "array.js"),
                _mapping("buffers", "buffers.js"),
                _mapping("loop", "loop.js"),
                _mapping("json", "json.js"),
                _mapping("py", "runaway.py"),
            ],
        },
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
    }
    return start_module_gateway(config, workdir=workdir / "gw")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _alive(gw: GatewayProcess) -> None:
    assert gw.proc is not None and gw.proc.poll() is None, "the gateway process died"
    assert gw.client is not None
    assert gw.client.get("/healthz").json() == {"ok": True}


def _timed(gw: GatewayProcess, name: str, payload: dict[str, Any]) -> tuple[Any, float]:
    started = time.monotonic()
    r = gw.hook(name, payload)
    return r, time.monotonic() - started


@pytest.mark.parametrize("n", [2**30, 10**8])
def test_an_array_bomb_costs_one_request_within_the_limit(gw: GatewayProcess, n: int) -> None:
    assert gw.proc is not None
    before, runs = _rss_mib(gw.proc.pid), len(runs_of(gw, "array"))
    r, took = _timed(gw, "array", {"n": n})
    assert r.status_code in (500, 504), r.text
    body = r.json()
    assert body["ok"] is False and body["code"] in ("transform_failed", "transform_timeout")
    assert body["rule"] == "array"
    assert took < 1.0 + 0.25 + 1.0, f"answered after {took:.2f} s"  # limit + grace + slack
    _alive(gw)
    assert _rss_mib(gw.proc.pid) - before < 100  # the memory went to (and with) a worker
    r = gw.hook("array", {})
    assert (r.status_code, r.json()["ok"]) == (202, True), r.text
    assert len(runs_of(gw, "array")) == runs + 1  # the bomb stored nothing
    eventually(
        lambda: body["code"] in {e["code"] for e in logged(gw, "/hooks/array")},
        what="the request log line of the bomb",
    )


@pytest.mark.parametrize("payload", [{"big": True}, {"many": True}])
def test_buffer_bombs_hit_the_worker_memory_ceiling(
    gw: GatewayProcess, payload: dict[str, Any]
) -> None:
    assert gw.proc is not None
    before = _rss_mib(gw.proc.pid)
    r = gw.hook("buffers", payload)
    assert r.status_code == 500, r.text
    assert (r.json()["code"], r.json()["rule"]) == ("transform_failed", "buffers")
    _alive(gw)
    assert _rss_mib(gw.proc.pid) - before < 100
    r = gw.hook("buffers", {})
    assert r.status_code == 202, r.text


def test_a_context_left_with_a_promise_loop_is_not_reused(gw: GatewayProcess) -> None:
    runs = len(runs_of(gw, "loop"))
    r = gw.hook("loop", {"loop": True})
    assert r.status_code in (500, 504), r.text
    assert r.json()["code"] in ("transform_failed", "transform_timeout")
    for _ in range(3):
        r = gw.hook("loop", {})
        assert r.status_code == 202, r.text
    assert len(runs_of(gw, "loop")) == runs + 3


def test_redefining_json_breaks_neither_the_wrapper_nor_later_calls(gw: GatewayProcess) -> None:
    runs = len(runs_of(gw, "json"))
    r = gw.hook("json", {"attack": True})
    assert (r.status_code, r.json()["code"]) == (500, "transform_failed"), r.text
    for _ in range(3):
        r = gw.hook("json", {"a": 1})
        assert r.status_code == 202, r.text
    assert len(runs_of(gw, "json")) == runs + 3


def test_a_runaway_python_transform_is_killed_at_the_limit(gw: GatewayProcess) -> None:
    r, took = _timed(gw, "py", {"hang": True})
    assert (r.status_code, r.json()["code"]) == (504, "transform_timeout"), r.text
    assert took < 1.0 + 0.25 + 1.0
    r = gw.hook("py", {})
    assert r.status_code == 202, r.text
    # the request is answered at its limit; the worker is killed and logged just after
    eventually(
        lambda: "sandbox worker" in gw.stderr() and "killed" in gw.stderr(), what="the kill logged"
    )


def test_other_requests_are_unaffected_while_a_worker_is_killed(gw: GatewayProcess) -> None:
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        bomb = pool.submit(gw.hook, "array", {"n": 10**8})
        time.sleep(0.05)
        fine = [pool.submit(gw.hook, "json", {"i": i}) for i in range(6)]
        assert [f.result().status_code for f in fine] == [202] * 6
        assert bomb.result().status_code in (500, 504)
    _alive(gw)


def test_workers_do_not_outlive_a_killed_gateway(
    tmp_path: Path, start_gateway: Callable[..., GatewayProcess]
) -> None:
    tdir = tmp_path / "gw" / "hooks" / "transforms"
    tdir.mkdir(parents=True)
    (tdir / "runaway.py").write_text(TRANSFORMS["runaway.py"], encoding="utf-8")
    config = {
        "hooks": {
            "enabled": True,
            "token": HOOK_TOKEN,
            "transformsDir": str(tdir),
            "transformLimits": {"timeoutMs": 30000, "workers": 2},
            "mappings": [_mapping("py", "runaway.py")],
        },
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
    }
    gw = start_gateway(config, workdir=tmp_path / "gw")
    assert gw.proc is not None
    workers = children(gw.proc.pid)  # the sandbox workers, and SQLite's writer process
    sandbox = [w for w in workers if b"writer_child" not in Path(f"/proc/{w}/cmdline").read_bytes()]
    assert len(sandbox) == 2 and len(workers) == 3
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        hung = pool.submit(gw.hook, "py", {"hang": True})
        time.sleep(0.5)  # a worker is now inside the endless call
        gw.kill()
        with pytest.raises(Exception):  # noqa: B017 - the connection dies with the gateway
            hung.result()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(Path(f"/proc/{w}").exists() for w in workers):
        time.sleep(0.1)
    assert not any(Path(f"/proc/{w}").exists() for w in workers), "a child process outlived it"
