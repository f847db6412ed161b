"""JavaScript transforms in V8 (mini-racer): sandboxed, time- and memory-bounded, pooled.

How a call runs:
- One `JsHost` per rule set: a thread running an asyncio loop that hosts every V8 context of that
  rule set. Calls are submitted to it from the server's loop and awaited there, so V8 work never
  runs on (or blocks) the server's event loop.
- Each `JsTransform` keeps `pool_size` contexts, each with the module compiled once, at load.
  A call borrows one, runs, and gives it back; contexts are never created per request.
- A call is two evaluations under one deadline: `__hw_run(input)` starts the function (an async
  one settles in microtasks, which V8 runs right after that evaluation), then `__hw_take()` reads
  the settled outcome. The second evaluation only starts once the microtask queue is drained, so
  code that loops forever after an `await` is caught by the time limit too. A promise still
  pending then can never settle (timers, I/O and WebAssembly are removed), so it fails at once.
- After a timeout, a memory blow-up or a cancelled call the context is closed (which stops V8)
  and replaced by a fresh one, so the next request finds a healthy, unpolluted context.

The sandbox: no `require`, `process`, `fetch`, `import`, timers, `WebAssembly`, `WeakRef`; the
heap is capped (`set_hard_memory_limit`); the built-in prototypes and namespaces (`Object`,
`Array.prototype`, `JSON`, ...) are frozen before the module runs, so neither the module nor a
payload-driven merge can pollute them (in strict mode such writes throw). One consequence: code
that assigns an inherited built-in name on a plain object (`obj.toString = f`) throws; use
`Object.defineProperty` or a class. Module-level state lives per context: keep transforms
stateless.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from py_mini_racer import JSEvalException, JSOOMException, MiniRacer

from hookwise.engine.transforms import (
    KEEP,
    TransformBusy,
    TransformContext,
    TransformFailed,
    TransformLimits,
    TransformLoadError,
    TransformTimedOut,
)
from hookwise.engine.transforms.jsmodule import ModuleSyntaxError, module_to_script

_MIB = 1024 * 1024
_LOAD_TIMEOUT_S = 5.0

_LOCKDOWN = r"""
(function () {
  "use strict";
  const g = globalThis;
  for (const name of ["setTimeout", "clearTimeout", "setInterval", "clearInterval",
                      "__timer_manager"]) {
    try { g[name] = undefined; } catch (e) {}
  }
  for (const name of ["WebAssembly", "FinalizationRegistry", "WeakRef", "SharedArrayBuffer"]) {
    try { delete g[name]; } catch (e) {}
  }
  try { delete Atomics.waitAsync; delete Atomics.wait; } catch (e) {}
  const seen = new Set();
  const freeze = (o) => {
    if (o === null || o === undefined || seen.has(o)) return;
    if (typeof o !== "object" && typeof o !== "function") return;
    seen.add(o);
    Object.freeze(o);
  };
  for (const name of Object.getOwnPropertyNames(g)) {
    const d = Object.getOwnPropertyDescriptor(g, name);
    const v = d && d.value;
    if (typeof v === "function") { freeze(v); freeze(v.prototype); }
  }
  for (const name of ["JSON", "Math", "Reflect", "Atomics", "Intl", "console"]) freeze(g[name]);
  const protoOf = Object.getPrototypeOf;
  for (const fn of [function* () {}, async function () {}, async function* () {}]) {
    freeze(protoOf(fn)); freeze(protoOf(fn).prototype);
  }
  const arrayIter = protoOf([][Symbol.iterator]());
  freeze(arrayIter); freeze(protoOf(arrayIter));
  freeze(protoOf(new Map()[Symbol.iterator]()));
  freeze(protoOf(new Set()[Symbol.iterator]()));
  freeze(protoOf(""[Symbol.iterator]()));
  freeze(protoOf(Int8Array)); freeze(protoOf(Int8Array.prototype));
})();
"""

_BINDER = r"""
(function (exportName) {
  "use strict";
  const named = __hw_mod[0], cjs = __hw_mod[1];
  const names = exportName === null ? ["default", "transform"] : [exportName];
  let fn;
  for (const name of names) {
    if (typeof named[name] === "function") { fn = named[name]; break; }
    if (name === "default" && typeof cjs === "function") { fn = cjs; break; }
    if (cjs !== null && typeof cjs === "object" && typeof cjs[name] === "function") {
      fn = cjs[name]; break;
    }
  }
  if (fn === undefined) {
    const found = Object.keys(named).concat(
      cjs !== null && typeof cjs === "object" ? Object.keys(cjs) : []);
    return "missing:" + JSON.stringify(found);
  }
  let slot = null;
  const fail = (e) => {
    let name = "Error", message = "";
    try { name = String((e && e.name) || "Error"); } catch (x) {}
    try { message = String(e && e.message !== undefined ? e.message : e); } catch (x) {}
    return JSON.stringify({ error: { name: name.slice(0, 60), message: message.slice(0, 500) } });
  };
  const ok = (v) => {
    try {
      if (v === undefined) return '{"keep":true}';
      if (v === null) return '{"value":null}';
      if (typeof v !== "object" || Array.isArray(v)) {
        return JSON.stringify({ bad: Array.isArray(v) ? "list" : typeof v });
      }
      return JSON.stringify({ value: v });
    } catch (e) { return fail(e); }
  };
  Object.defineProperty(globalThis, "__hw_run", { value: function (text) {
    slot = '{"pending":true}';
    let r;
    try { r = fn(JSON.parse(text)); } catch (e) { slot = fail(e); return; }
    let then;
    try { then = r !== null && typeof r === "object" ? r.then : undefined; }
    catch (e) { slot = fail(e); return; }
    if (typeof then === "function") {
      Promise.resolve(r).then((v) => { slot = ok(v); }, (e) => { slot = fail(e); });
    } else {
      slot = ok(r);
    }
  } });
  Object.defineProperty(globalThis, "__hw_take", { value: function () {
    const s = slot; slot = null; return s;
  } });
  return "ok";
})
"""


class JsHost:
    """A thread with an asyncio loop that owns every V8 context of one rule set."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="hookwise-js", daemon=True
        )
        self._thread.start()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def close(self) -> None:
        if self._loop.is_closed():
            return
        with contextlib.suppress(Exception):
            self.submit(_cancel_other_tasks()).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()


async def _cancel_other_tasks() -> None:
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class JsTransform:
    """One JS module's export, with its pool of warm contexts on a `JsHost`."""

    def __init__(
        self, host: JsHost, script: str, export: str | None, limits: TransformLimits, name: str
    ) -> None:
        self.description = f"js:{name}" + (f"#{export}" if export else "")
        self._host = host
        self._script = script
        self._export = export
        self._limits = limits
        self._timeout = limits.timeout_ms / 1000
        self._acquire_timeout = max(5.0, 5 * self._timeout)
        self._pool: asyncio.Queue[MiniRacer] | None = None
        self._closed = False
        self._refills: set[asyncio.Task[None]] = set()

    @classmethod
    def load(
        cls, host: JsHost, path: Path, export: str | None, limits: TransformLimits
    ) -> JsTransform:
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TransformLoadError(f"cannot read transform module: {exc}") from None
        try:
            script = module_to_script(source, "__hw_mod")
        except ModuleSyntaxError as exc:
            raise TransformLoadError(f"{path.name}: {exc}") from None
        transform = cls(host, script, export, limits, path.name)
        host.submit(transform._fill()).result()
        return transform

    async def _fill(self) -> None:
        self._pool = asyncio.Queue()
        for _ in range(self._limits.pool_size):
            self._pool.put_nowait(await self._new_context())

    async def _new_context(self) -> MiniRacer:
        mr = MiniRacer()
        try:
            mr.set_hard_memory_limit(self._limits.memory_mb * _MIB)
            await self._eval_at_load(mr, _LOCKDOWN, "preparing the sandbox")
            await self._eval_at_load(mr, self._script, "evaluating the module")
            status = await self._eval_at_load(
                mr, f"{_BINDER}({json.dumps(self._export)})", "binding the export"
            )
        except BaseException:
            mr.close()
            raise
        if status != "ok":
            mr.close()
            found = json.loads(str(status)[len("missing:") :])
            wanted = repr(self._export) if self._export else "'default' (or 'transform')"
            raise TransformLoadError(
                f"module has no function export {wanted}; its exports: {', '.join(found) or 'none'}"
            )
        return mr

    @staticmethod
    async def _eval_at_load(mr: MiniRacer, code: str, step: str) -> Any:
        try:
            return await asyncio.wait_for(mr.eval_cancelable(code), _LOAD_TIMEOUT_S)
        except TimeoutError:
            raise TransformLoadError(f"{step} took longer than {_LOAD_TIMEOUT_S:g} s") from None
        except JSOOMException:
            raise TransformLoadError(f"{step} exceeded the memory limit") from None
        except JSEvalException as exc:
            first = str(exc).strip().splitlines()
            raise TransformLoadError(f"{step} failed: {' '.join(first[:3])}") from None

    async def __call__(self, ctx: TransformContext) -> Any:
        if self._closed:
            raise TransformFailed("transform is closed (the rule set was replaced)")
        text = json.dumps(ctx.to_js(), default=str)
        code = f"__hw_run({json.dumps(text)})"
        future = self._host.submit(self._run(code))
        try:
            raw = await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.cancel()
            raise
        return _decode(raw)

    async def _run(self, code: str) -> str:
        assert self._pool is not None
        if self._closed:
            raise TransformFailed("transform is closed")
        try:
            async with asyncio.timeout(self._acquire_timeout):
                mr = await self._pool.get()
        except TimeoutError:
            raise TransformBusy("no transform context became free in time") from None
        healthy = False
        try:
            async with asyncio.timeout(self._timeout):
                await mr.eval_cancelable(code)
                raw = await mr.eval_cancelable("__hw_take()")
            healthy = True
            return str(raw)
        except TimeoutError:
            raise TransformTimedOut(
                f"transform ran past its {self._limits.timeout_ms} ms limit"
            ) from None
        except JSOOMException:
            raise TransformFailed(
                f"transform exceeded its {self._limits.memory_mb} MiB memory limit"
            ) from None
        except JSEvalException as exc:
            raise TransformFailed("transform failed in V8", detail=str(exc)[:500]) from None
        finally:
            if healthy and not self._closed:
                self._pool.put_nowait(mr)
            else:
                mr.close()
                if not self._closed:
                    task = asyncio.get_running_loop().create_task(self._replace())
                    self._refills.add(task)
                    task.add_done_callback(self._refills.discard)

    async def _replace(self) -> None:
        assert self._pool is not None
        try:
            fresh = await self._new_context()
        except Exception:
            return  # the pool shrinks; calls fail with TransformBusy rather than hang
        if self._closed:
            fresh.close()
        else:
            self._pool.put_nowait(fresh)

    async def _drain(self) -> None:
        if self._refills:
            await asyncio.gather(*self._refills, return_exceptions=True)
        if self._pool is None:
            return
        while not self._pool.empty():
            self._pool.get_nowait().close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self._host.loop.is_closed():
            self._host.submit(self._drain()).result(timeout=10)


def _decode(raw: str) -> Any:
    try:
        outcome = json.loads(raw)
    except (TypeError, ValueError):
        raise TransformFailed("transform produced no readable result") from None
    if "keep" in outcome:
        return KEEP
    if "value" in outcome:
        return outcome["value"]
    if "pending" in outcome:
        raise TransformFailed(
            "async transform never settled (timers and I/O are not available to transforms)"
        )
    if "bad" in outcome:
        raise TransformFailed(
            f"transform returned a {outcome['bad']}; expected an object, null or nothing"
        )
    error = outcome.get("error") or {}
    name = str(error.get("name", "Error"))
    if not name.isidentifier():
        name = "Error"
    raise TransformFailed(f"transform threw {name}", detail=str(error.get("message", "")))
