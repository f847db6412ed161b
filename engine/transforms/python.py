"""Python transforms: trusted operator code from `hooks.transformsDir`, run in sandbox workers.

A `.py` module must define `transform(ctx)` (or the function named by `transform.export`), sync
or async. It receives a `TransformContext` (attribute or `ctx["..."]` access, including
`raw_body`) and returns `None` (skip), `{}` (keep the templated action) or a dict merged over the
templated action.

These modules are NOT sandboxed in the language sense (Python cannot be): they are trusted code
with the gateway user's permissions, so only operators put code there. But they run in the
sandbox worker processes (`hookwise.engine.transforms.pool`), not in the gateway: a function that
never returns, blows up its memory (the worker's OS ceiling) or crashes the interpreter costs one
worker, which the watchdog kills at the time limit (plus a small grace) and replaces; the request
gets 504 `transform_timeout` or 500 `transform_failed`. The module is imported once per worker
(at load, and again in a replacement worker), so module-level state is per worker. What a
function returns crosses a process boundary: dicts, lists, strings, numbers, booleans and None
pass as they are, anything else (a datetime, a set) is sent as its `str()`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

from .base import (
    TransformContext,
    TransformFailed,
    TransformLimits,
    TransformLoadError,
)


class PyTransform:
    """One Python function of a transform module, run by the host's sandbox workers."""

    runtime = "python"

    def __init__(self, pool: Any, tid: int, limits: TransformLimits, name: str) -> None:
        self.description = f"py:{name}"
        self._pool = pool
        self._tid = tid
        self._limits = limits

    @classmethod
    def load(
        cls, pool: Any, path: Path, export: str | None, limits: TransformLimits
    ) -> PyTransform:
        name = pool.load({"kind": "py", "path": str(path), "export": export})
        return cls(pool, name, limits, path.name)

    async def __call__(self, ctx: TransformContext) -> Any:
        message = {
            "payload": ctx.payload,
            "headers": dict(ctx.headers),
            "query": dict(ctx.query),
            "path": ctx.path,
            "extracted": ctx.extracted,
            "now": ctx.now,
            "action": ctx.action,
            "raw_body": bytes(ctx.raw_body),
            "item": ctx.item,
            "index": ctx.index,
        }
        return await self._pool.call(self._tid, message, self._limits.timeout_ms, self.description)

    def close(self) -> None:
        pass


# --- inside a sandbox worker -----------------------------------------------------------------


def _import(path: Path) -> Any:
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    module_name = f"hookwise_transform_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise TransformLoadError(f"cannot load {path.name} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise TransformLoadError(
            f"{path.name} failed to import: {type(exc).__name__}: {exc}"
        ) from None
    return module


class PyModule:
    """A transform function imported inside a worker process."""

    def __init__(self, spec: dict[str, Any]) -> None:
        path = Path(spec["path"])
        export: str | None = spec["export"]
        module = _import(path)
        names = [export] if export else ["transform", "default"]
        for name in names:
            fn = getattr(module, name, None)
            if callable(fn):
                self._fn = fn
                self._is_async = inspect.iscoroutinefunction(fn)
                return
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        wanted = repr(export) if export else "'transform'"
        raise TransformLoadError(
            f"{path.name} has no function {wanted}; its functions: {', '.join(found) or 'none'}"
        )

    async def call(self, message: dict[str, Any], timeout_ms: int) -> Any:
        """Run one call (the watchdog in the gateway enforces `timeout_ms`)."""
        ctx = TransformContext(**message)
        try:
            result = await self._fn(ctx) if self._is_async else self._fn(ctx)
        except Exception as exc:
            raise TransformFailed(
                f"transform raised {type(exc).__name__}", detail=str(exc)[:500]
            ) from None
        if result is None or isinstance(result, dict):
            return result
        raise TransformFailed(
            f"transform returned {type(result).__name__}; expected a dict, None or {{}}"
        )

    async def refill(self) -> None:
        pass

    def close(self) -> None:
        pass
