"""Python transforms: trusted operator code from `hooks.transformsDir`, time-bounded.

A `.py` module is imported once, at load, and must define `transform(ctx)` (or the function named
by `transform.export`), sync or async. It receives a `TransformContext` (attribute or `ctx["..."]`
access, including `raw_body`) and returns `None` (skip), `{}` (keep the templated action) or a
dict merged over the templated action.

These modules are NOT sandboxed: they run in the gateway process with its permissions, so only
operators put code there. Their time is still bounded: a sync function runs in this transform's
worker threads (`pool_size` of them) and the request fails with 504 once the limit passes; an async
function runs on the caller's loop and is cancelled at the limit. Python cannot stop a thread, so
a sync function that never returns keeps its worker busy; once every worker is stuck, later calls
of that transform time out too, while the rest of the gateway carries on.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import inspect
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from hookwise.engine.transforms import (
    TransformContext,
    TransformFailed,
    TransformLimits,
    TransformLoadError,
    TransformTimedOut,
)


class PyTransform:
    """One Python function loaded from a transform module."""

    def __init__(self, fn: Any, limits: TransformLimits, name: str) -> None:
        self.description = f"py:{name}"
        self._fn = fn
        self._timeout = limits.timeout_ms / 1000
        self._limit_ms = limits.timeout_ms
        self._is_async = inspect.iscoroutinefunction(fn)
        self._executor: ThreadPoolExecutor | None = None
        if not self._is_async:
            self._executor = ThreadPoolExecutor(
                max_workers=limits.pool_size, thread_name_prefix="hookwise-py-transform"
            )

    @classmethod
    def load(cls, path: Path, export: str | None, limits: TransformLimits) -> PyTransform:
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
        names = [export] if export else ["transform", "default"]
        for name in names:
            fn = getattr(module, name, None)
            if callable(fn):
                return cls(fn, limits, f"{path.name}#{name}")
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        wanted = repr(export) if export else "'transform'"
        raise TransformLoadError(
            f"{path.name} has no function {wanted}; its functions: {', '.join(found) or 'none'}"
        )

    async def __call__(self, ctx: TransformContext) -> Any:
        try:
            if self._is_async:
                result = await asyncio.wait_for(self._fn(ctx), self._timeout)
            else:
                assert self._executor is not None
                future = asyncio.wrap_future(self._executor.submit(self._fn, ctx))
                result = await asyncio.wait_for(future, self._timeout)
        except TimeoutError:
            raise TransformTimedOut(f"transform ran past its {self._limit_ms} ms limit") from None
        except Exception as exc:
            raise TransformFailed(
                f"transform raised {type(exc).__name__}", detail=str(exc)[:500]
            ) from None
        if result is None or isinstance(result, dict):
            return result
        raise TransformFailed(
            f"transform returned {type(result).__name__}; expected a dict, None or {{}}"
        )

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
