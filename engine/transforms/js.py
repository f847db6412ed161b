"""JavaScript transforms in V8 (mini-racer), run in sandbox worker processes.

Two halves:
- `JsTransform` (in the gateway): turns the request into JSON text, sends it to the worker pool
  (`hookwise.engine.transforms.pool`), and decodes the outcome. It never touches V8.
- `JsModule` (in a worker): the module's warm contexts. Each context has the module compiled once,
  at load; a call borrows the first ready context, and a context that timed out, ran out of
  memory, threw, returned something unusable or left its promise pending is discarded (closed)
  and replaced by a fresh one, never reused.

A call is two evaluations under one deadline: `__hw_run(input)` runs the function (and returns
the outcome of a synchronous one); microtasks (an async function's continuation, or work a sync
one queued) run after it, and the second evaluation, `__hw_take()`, starts only once they are
done, so work left behind is caught by the time and memory limits too; it reads an async
function's settled outcome. A promise still pending then can never settle (timers, I/O and
WebAssembly are removed), so it fails at once.

The sandbox: no `require`, `process`, `fetch`, `import`, timers, `WebAssembly`, `WeakRef`; the
heap is capped (`set_hard_memory_limit`, which V8 checks as it collects garbage, and once more
at load and after any call that may have passed it: a heap used past the limit then fails the
call as if V8 had stopped it, since one allocation, `new Array(3e7).fill(0)` (114 MiB of small
integers), can pass the limit between two collections. "May have": the heap is measured when
the calls since its last measurement have run long enough to fill the room it had left at
`MAX_HEAP_GROWTH`, far faster than V8 fills memory, so a call that grew it past the limit is
always measured; the worker's address-space ceiling bounds what one step can take); the built-in prototypes and namespaces (`Object`,
`Array.prototype`, `JSON`, ...) are frozen and the global bindings of the built-ins are made
read-only before the module runs, so neither the module nor a payload-driven merge can pollute
them (in strict mode such writes throw). The call wrapper takes its own references to what it
uses (`JSON.parse`, `JSON.stringify`, `Promise`, ...) before any user code runs, so a transform
cannot break it. One consequence of the freezing: code that assigns an inherited built-in name
on a plain object (`obj.toString = f`) throws; use `Object.defineProperty` or a class.
Module-level state lives per context: keep transforms stateless.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from py_mini_racer import JSEvalException, JSOOMException, MiniRacer

from .base import (
    KEEP,
    TransformContext,
    TransformFailed,
    TransformLimits,
    TransformLoadError,
    TransformTimedOut,
)
from .jsmodule import ModuleSyntaxError, module_to_script

_MIB = 1024 * 1024
_LOAD_TIMEOUT_MS = 5000
#: the fastest a V8 heap is taken to grow, in bytes per second of a call's wall time. Filling
#: memory measured 0.2-1.2 GB/s here (`new Array(3e7).fill(0)`: 120 MB in 102 ms); the bound is
#: well above it, so that a context whose heap was measured `used` bytes ago cannot have passed
#: its limit in less than `(limit - used) / MAX_HEAP_GROWTH` seconds of calls, and is measured
#: again only then (a measurement, `heap_stats`, costs about 250 µs of CPU: a third of a call)
MAX_HEAP_GROWTH = 20e9

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
  // The wrapper's own references, taken before any user code runs.
  const parse = JSON.parse, stringify = JSON.stringify, keys = Object.keys;
  const isArray = Array.isArray, toString = String, defineProperty = Object.defineProperty;
  const resolve = Promise.resolve.bind(Promise), apply = Reflect.apply;
  const then = Promise.prototype.then;
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
  // The built-ins' global bindings are read-only: `globalThis.JSON = ...` cannot replace them.
  for (const name of Object.getOwnPropertyNames(g)) {
    const d = Object.getOwnPropertyDescriptor(g, name);
    if (d && d.configurable && "value" in d && d.value !== undefined
        && (typeof d.value === "function" || typeof d.value === "object")) {
      try { defineProperty(g, name, { writable: false, configurable: false }); } catch (e) {}
    }
  }

  defineProperty(g, "__hw_bind", { value: function (mod, exportName) {
    const named = mod[0], cjs = mod[1];
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
      const found = keys(named).concat(
        cjs !== null && typeof cjs === "object" ? keys(cjs) : []);
      return "missing:" + stringify(found);
    }
    let slot = null;
    const fail = (e) => {
      let name = "Error", message = "";
      try { name = toString((e && e.name) || "Error"); } catch (x) {}
      try { message = toString(e && e.message !== undefined ? e.message : e); } catch (x) {}
      return stringify({ error: { name: name.slice(0, 60), message: message.slice(0, 500) } });
    };
    const ok = (v) => {
      try {
        if (v === undefined) return '{"keep":true}';
        if (v === null) return '{"value":null}';
        if (typeof v !== "object" || isArray(v)) {
          return stringify({ bad: isArray(v) ? "list" : typeof v });
        }
        return stringify({ value: v });
      } catch (e) { return fail(e); }
    };
    defineProperty(g, "__hw_run", { value: function (text) {
      slot = '{"pending":true}';
      let r;
      try { r = fn(parse(text)); } catch (e) { slot = null; return fail(e); }
      let thenable;
      try { thenable = r !== null && typeof r === "object" ? r.then : undefined; }
      catch (e) { slot = null; return fail(e); }
      if (typeof thenable === "function") {
        apply(then, resolve(r), [(v) => { slot = ok(v); }, (e) => { slot = fail(e); }]);
        return null;  // settles in microtasks: read it with __hw_take()
      }
      slot = null;
      return ok(r);
    } });
    defineProperty(g, "__hw_take", { value: function () {
      const s = slot; slot = null; return s;
    } });
    return "ok";
  } });
})();
"""


class JsTransform:
    """One JS module's export, run by the host's sandbox workers (see module docstring)."""

    #: the language it was written in: `js`, or `ts` (compiled to JavaScript at load)
    runtime = "js"

    def __init__(self, pool: Any, tid: int, limits: TransformLimits, name: str) -> None:
        self.description = name
        self._pool = pool
        self._tid = tid
        self._limits = limits
        self._closed = False

    @classmethod
    def load(
        cls,
        pool: Any,
        path: Path,
        export: str | None,
        limits: TransformLimits,
        *,
        script: str | None = None,
    ) -> JsTransform:
        """Load `path`'s module (or `script`, a module already made a script: TypeScript)."""
        if script is None:
            try:
                source = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise TransformLoadError(f"cannot read transform module: {exc}") from None
            try:
                script = module_to_script(source, "__hw_mod")
            except ModuleSyntaxError as exc:
                raise TransformLoadError(f"{path.name}: {exc}") from None
        spec = {
            "kind": "js",
            "script": script,
            "export": export,
            "memory_mb": limits.memory_mb,
            "pool_size": limits.pool_size,
        }
        tid = pool.load(spec)
        name = f"js:{path.name}" + (f"#{export}" if export else "")  # .ts runs in V8 too
        transform = cls(pool, tid, limits, name)
        if path.suffix.lower() in (".ts", ".mts", ".cts"):
            transform.runtime = "ts"
        return transform

    async def __call__(self, ctx: TransformContext) -> Any:
        if self._closed:
            raise TransformFailed("transform is closed (the rule set was replaced)")
        text = json.dumps(ctx.to_js(), default=str)
        raw = await self._pool.call(self._tid, text, self._limits.timeout_ms, self.description)
        return _decode(raw)

    def close(self) -> None:
        self._closed = True


def _decode(raw: Any) -> Any:
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


# --- inside a sandbox worker -----------------------------------------------------------------


class JsModule:
    """A module's warm V8 contexts inside one worker process (one call at a time). Runs on the
    worker's event loop: its contexts are created there, so each evaluation is one hop to V8's
    thread and back (`eval_cancelable`), with the deadline as an asyncio timeout."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self._script: str = spec["script"]
        self._export: str | None = spec["export"]
        self._memory_mb: int = spec["memory_mb"]
        self._size: int = spec["pool_size"]
        self._limit = self._memory_mb * _MIB
        self._ready: list[_Warm] = []

    @classmethod
    async def create(cls, spec: dict[str, Any]) -> JsModule:
        module = cls(spec)
        await module.refill()
        return module

    async def _new_context(self) -> _Warm:

        mr = MiniRacer()
        try:
            mr.set_hard_memory_limit(self._memory_mb * _MIB)
            await self._eval_at_load(mr, _LOCKDOWN, "preparing the sandbox")
            await self._eval_at_load(mr, self._script, "evaluating the module")
            status = await self._eval_at_load(
                mr, f"__hw_bind(__hw_mod, {json.dumps(self._export)})", "binding the export"
            )
            warm = _Warm(mr)
            if not self._measure(warm):
                raise TransformLoadError("evaluating the module exceeded the memory limit")
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
        return warm

    def _measure(self, warm: _Warm) -> bool:
        """Measure the context's heap: False if it holds more than its limit now, else True,
        with the time its calls may run before it is measured again. A heap past half its
        limit is collected first: V8 sizes its collections by its own (far larger) limit, so
        the garbage of thousands of calls would otherwise pile up past this one and fail an
        innocent call."""
        used = _used_heap(warm.mr)
        if self._limit // 2 < used <= self._limit:
            warm.mr.low_memory_notification()  # a full collection, every few hundred calls
            used = _used_heap(warm.mr)
        warm.budget = (self._limit - used) / MAX_HEAP_GROWTH
        return used <= self._limit

    @staticmethod
    async def _eval_at_load(mr: Any, code: str, step: str) -> Any:

        try:
            return await asyncio.wait_for(mr.eval_cancelable(code), _LOAD_TIMEOUT_MS / 1000)
        except TimeoutError:
            raise TransformLoadError(
                f"{step} took longer than {_LOAD_TIMEOUT_MS / 1000:g} s"
            ) from None
        except JSOOMException:
            raise TransformLoadError(f"{step} exceeded the memory limit") from None
        except JSEvalException as exc:
            first = str(exc).strip().splitlines()
            raise TransformLoadError(f"{step} failed: {' '.join(first[:3])}") from None

    async def call(self, text: str, timeout_ms: int) -> str:
        """Run one call; raise `TransformError`. The context is discarded unless the call
        returned a usable result."""

        if not self._ready:
            await self.refill()
        warm = self._ready.pop(0)
        mr = warm.mr
        healthy = False
        try:
            started = time.perf_counter()
            async with asyncio.timeout(timeout_ms / 1000):
                raw = await mr.eval_cancelable(f"__hw_run({json.dumps(text)})")
                # Always a second evaluation: V8 runs the microtasks the call left (an async
                # function's continuation, or work a sync one queued) before it.
                settled = await mr.eval_cancelable("__hw_take()")
            raw = str(settled if raw is None else raw)
            warm.budget -= time.perf_counter() - started
            if mr.was_hard_memory_limit_reached() or (warm.budget <= 0 and not self._measure(warm)):
                # work it left behind (a promise loop) blew up, or one allocation passed the
                # limit before V8 collected and could see it
                raise JSOOMException("memory limit reached")
            healthy = raw.startswith(('{"value"', '{"keep"'))
            return raw
        except TimeoutError:
            raise TransformTimedOut(f"transform ran past its {timeout_ms} ms limit") from None
        except JSOOMException:
            raise TransformFailed(
                f"transform exceeded its {self._memory_mb} MiB memory limit"
            ) from None
        except JSEvalException as exc:
            raise TransformFailed("transform failed in V8", detail=str(exc)[:500]) from None
        finally:
            if healthy:
                self._ready.insert(0, warm)
            else:
                mr.close()

    async def refill(self) -> None:
        """Bring the pool back to its size (after a discarded context), between calls."""
        while len(self._ready) < self._size:
            self._ready.append(await self._new_context())

    def close(self) -> None:
        for warm in self._ready:
            warm.mr.close()
        self._ready.clear()


def _used_heap(mr: Any) -> int:
    used = mr.heap_stats().get("used_heap_size", 0)
    return used if isinstance(used, int) else 0


class _Warm:
    """A warm context, and how many seconds of calls it may run before its heap is measured
    again (see `MAX_HEAP_GROWTH`)."""

    __slots__ = ("budget", "mr")

    def __init__(self, mr: Any) -> None:
        self.mr = mr
        self.budget = 0.0
