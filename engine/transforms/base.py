"""What every transform runtime shares: the limits, the context a transform receives, what a call
may yield (`KEEP`), the errors, and the `Transform` protocol. `TransformHost` (the package's
`__init__`) loads transforms with them; the runtimes (`js`, `python`, `typescript`) and the
worker pool import them from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import attrs

from ..config.mapping import TransformConfig


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
    #: the language it is written in: `js`, `ts` or `python`
    runtime: str

    async def __call__(self, ctx: TransformContext) -> Any: ...

    def close(self) -> None: ...


def effective_limits(base: TransformLimits, config: TransformConfig) -> TransformLimits:
    """The mapping's own `timeoutMs`/`memoryMb`, where given, over the gateway's defaults."""
    return attrs.evolve(
        base,
        timeout_ms=config.timeout_ms if config.timeout_ms is not None else base.timeout_ms,
        memory_mb=config.memory_mb if config.memory_mb is not None else base.memory_mb,
    )
