"""A JS module's heap limit in a warm context (`JsModule`, as a sandbox worker runs it): the
heap is measured only when calls may have filled the room it had left, so thousands of small
calls neither pay a measurement each nor fail on the garbage they leave, while one call that
passes the limit still fails, however many cheap calls came before it."""

from __future__ import annotations

import asyncio
import json

import pytest

from hookwise.engine.transforms.base import TransformFailed
from hookwise.engine.transforms.js import JsModule
from hookwise.engine.transforms.jsmodule import module_to_script

SOURCE = """
export default function ({ payload }) {
  if (payload.n) {
    const a = new Array(payload.n).fill(0);
    return { text: "filled " + a.length };
  }
  return { text: "small " + JSON.stringify(payload).length };
}
"""


def _module(memory_mb: int) -> JsModule:
    spec = {
        "script": module_to_script(SOURCE, "__hw_mod"),
        "export": None,
        "memory_mb": memory_mb,
        "pool_size": 1,
    }
    return JsModule(spec)


def _input(payload: dict[str, object]) -> str:
    return json.dumps({"payload": payload, "headers": {}, "url": "", "path": "hook"})


def test_thousands_of_small_calls_all_succeed_under_a_small_limit() -> None:
    async def main() -> int:
        module = _module(32)
        await module.refill()
        try:
            done = 0
            for n in range(3000):
                raw = await module.call(_input({"i": n, "pad": "x" * 200}), 2000)
                assert raw.startswith('{"value"'), raw
                done += 1
            return done
        finally:
            module.close()

    assert asyncio.run(main()) == 3000


def test_one_call_past_the_limit_fails_after_many_cheap_ones() -> None:
    async def main() -> str:
        module = _module(32)
        await module.refill()
        try:
            for n in range(300):
                await module.call(_input({"i": n}), 2000)
            # 3e7 small integers: ~114 MiB in one allocation, past 32 MiB before V8 collects
            with pytest.raises(TransformFailed, match="32 MiB memory limit"):
                await module.call(_input({"n": 30_000_000}), 5000)
            return await module.call(_input({"n": 10}), 2000)  # a fresh context took its place
        finally:
            module.close()

    assert json.loads(asyncio.run(main())) == {"value": {"text": "filled 10"}}
