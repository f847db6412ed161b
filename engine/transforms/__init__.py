"""Transforms: operator code that reshapes a mapped hook's action, in JavaScript or Python.

A mapping's `transform.module` names a file inside `hooks.transformsDir`:

- `.js` / `.mjs` / `.cjs` run in V8 (mini-racer) with a per-call time limit and a heap limit, no
  host access (no `require`, `process`, `fetch`, `import`, timers or WebAssembly), intrinsics
  frozen so a call cannot pollute prototypes for the next one. Module text (`export default`,
  `export function`, `export const`) is turned into a script once, at load. Each transform keeps a
  small pool of pre-compiled contexts that calls reuse; see `hookwise.engine.transforms.js`.
- `.py` modules are trusted operator code: imported once at load, NOT sandboxed in the language
  sense; see `hookwise.engine.transforms.python`.
- Both run out of the gateway's process, in a supervised pool of sandbox worker processes with
  an OS memory ceiling each and a watchdog that kills a worker whose call overruns its time limit
  (`hookwise.engine.transforms.pool`): a runaway or fatal transform costs one worker and one
  request, never the gateway.
- `.ts` / `.mts` / `.cts` are compiled to JavaScript at load by TypeScript's own compiler
  (types stripped, enums compiled, sibling imports bundled) and then run as `.js` does; see
  `hookwise.engine.transforms.typescript`.

The call contract is the same for both: the transform receives the request (`payload`,
`headers`, `query`, `path`, `extracted`, `now`, `action` = the templated action with its `kind`,
and inside a `forEach` fan-out `item` and `index`; Python also gets `raw_body`) and returns
`null`/`None` (skip: no action), nothing (`undefined`; keep the templated action; a Python
function returns `{}` for this, since `None` means skip), or an object merged over the templated
action (which may set `kind` to switch between wake and agent).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config.mapping import TransformConfig
from .base import (
    KEEP,
    Transform,
    TransformBusy,
    TransformContext,
    TransformError,
    TransformFailed,
    TransformLimits,
    TransformLoadError,
    TransformTimedOut,
    effective_limits,
)


class TransformHost:
    """Loads transforms for one rule set and owns their runtime: one pool of sandbox worker
    processes (started at the first transform), which hold the JS contexts and Python modules.

    The same module and export loaded twice (two rules) is one transform with one pool.
    `close()` stops the workers.
    """

    def __init__(self, transforms_dir: Path | None, limits: TransformLimits) -> None:
        self._dir = transforms_dir
        self._limits = limits
        self._loaded: dict[tuple[Path, str | None, TransformLimits], Transform] = {}
        self._pool: Any = None
        self._ts: Any = None  # the TypeScript compiler, while a rule set loads

    def loaded(self) -> None:
        """Every transform is loaded: free what only loading needed (the TypeScript compiler)."""
        if self._ts is not None:
            self._ts.close()
            self._ts = None

    def load(self, config: TransformConfig) -> Transform:
        from ._paths import resolve_module

        if self._dir is None:
            raise TransformLoadError("a transform needs hooks.transformsDir to be set")
        if Path(config.module).suffix.lower() == ".tsx":
            raise TransformLoadError(
                f"{config.module!r}: .tsx (JSX) is not a transform module type: use .ts"
            )
        limits = effective_limits(self._limits, config)
        if min(limits.timeout_ms, limits.memory_mb, limits.pool_size, limits.workers) <= 0:
            raise TransformLoadError("transform limits must be positive")
        path = resolve_module(self._dir, config.module)
        key = (path, config.export, limits)
        if key in self._loaded:
            return self._loaded[key]
        suffix = path.suffix.lower()
        transform: Transform
        if suffix in (".js", ".mjs", ".cjs"):
            from .js import JsTransform

            transform = JsTransform.load(self._workers(), path, config.export, limits)
        elif suffix in (".ts", ".mts", ".cts"):
            from .js import JsTransform
            from .typescript import TsCompiler, bundle

            if self._ts is None:
                self._ts = TsCompiler()
            script = bundle(path, self._dir, self._ts, "__hw_mod")
            transform = JsTransform.load(
                self._workers(), path, config.export, limits, script=script
            )
        elif suffix == ".py":
            from .python import PyTransform

            transform = PyTransform.load(self._workers(), path, config.export, limits)
        else:
            raise TransformLoadError(
                f"unsupported transform module type {suffix or '(none)'!r}: use .js, .mjs, .ts"
                " or .py"
            )
        self._loaded[key] = transform
        return transform

    def _workers(self) -> Any:
        if self._pool is None:
            from .pool import WorkerPool

            self._pool = WorkerPool(
                size=self._limits.workers,
                memory_mb=self._limits.worker_memory_mb,
                recycle_calls=self._limits.worker_recycle_calls,
                recycle_mb=self._limits.worker_recycle_mb,
            )
        return self._pool

    def close(self) -> None:
        self.loaded()
        for transform in self._loaded.values():
            transform.close()
        self._loaded.clear()
        if self._pool is not None:
            self._pool.close()
            self._pool = None


__all__ = [
    "KEEP",
    "Transform",
    "TransformBusy",
    "TransformContext",
    "TransformError",
    "TransformFailed",
    "TransformHost",
    "TransformLimits",
    "TransformLoadError",
    "TransformTimedOut",
]
