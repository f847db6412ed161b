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

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import attrs

from ..mapping import TransformConfig


@attrs.frozen
class TransformLimits:
    """Per-call limits of transforms, how many warm JS contexts each transform keeps (in each
    worker), how many sandbox worker processes a rule set runs, and each worker's memory ceiling
    (MiB beyond what V8 reserves at start-up), and when a worker is replaced by a fresh one
    (after `worker_recycle_calls` calls, or once its resident memory has grown
    `worker_recycle_mb` MiB past what it was when it started: see `pool`)."""

    timeout_ms: int = 1000
    memory_mb: int = 64
    pool_size: int = 2
    workers: int = 2
    worker_memory_mb: int = 512
    worker_recycle_calls: int = 10_000
    worker_recycle_mb: int = 64


class _Keep:
    __slots__ = ()

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()
"""What a transform's call yields when it returned nothing: keep the templated action."""


class TransformError(Exception):
    """A transform call that failed. `reason` is safe to show; `detail` may quote payload data
    (a JS error message) and is only for the rule author's tools, never for logs or responses."""

    def __init__(self, reason: str, detail: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


class TransformFailed(TransformError):
    """The transform raised, returned something unusable, or blew its memory limit."""


class TransformTimedOut(TransformError):
    """The transform ran past its time limit."""


class TransformBusy(TransformError):
    """No transform context became free in time (every one busy)."""


class TransformLoadError(ValueError):
    """A transform that cannot be loaded; the message says why (no payload involved)."""


@attrs.frozen
class TransformContext:
    """What a transform receives. Python transforms get this object (attribute or `ctx["key"]`
    access); JS transforms get the same fields, except `raw_body`, as a plain object."""

    payload: Mapping[str, Any] | list[Any]
    headers: Mapping[str, str]
    query: Mapping[str, str]
    path: str
    extracted: Mapping[str, Any]
    now: str
    action: Mapping[str, Any]
    raw_body: bytes = b""
    item: Any = None
    index: int | None = None

    def __getitem__(self, key: str) -> Any:
        if key not in _CTX_KEYS:
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in _CTX_KEYS else default

    def to_js(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "payload": self.payload,
            "headers": self.headers,
            "query": self.query,
            "path": self.path,
            "extracted": self.extracted,
            "now": self.now,
            "action": self.action,
        }
        if self.index is not None:
            out["item"] = self.item
            out["index"] = self.index
        return out


_CTX_KEYS = frozenset(a.name for a in attrs.fields(TransformContext))


class Transform(Protocol):
    """A loaded transform. Calling it yields None (skip), KEEP, or a dict override."""

    description: str

    async def __call__(self, ctx: TransformContext) -> Any: ...

    def close(self) -> None: ...


def effective_limits(base: TransformLimits, config: TransformConfig) -> TransformLimits:
    """The mapping's own `timeoutMs`/`memoryMb`, where given, over the gateway's defaults."""
    return attrs.evolve(
        base,
        timeout_ms=config.timeout_ms if config.timeout_ms is not None else base.timeout_ms,
        memory_mb=config.memory_mb if config.memory_mb is not None else base.memory_mb,
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
