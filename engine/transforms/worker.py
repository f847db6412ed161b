"""A sandbox worker process: `python -m hookwise.engine.transforms.worker <memory MiB>`.

Started and supervised by `hookwise.engine.transforms.pool`. It reads requests on its stdin and
writes replies on its stdout (`hookwise.engine.transforms.wire`), one at a time, in order, on an
event loop (uvloop) that its V8 contexts are bound to; its
own file descriptors 0 and 1 are then pointed at /dev/null so that nothing a transform prints
can reach the protocol. Before it answers anything it starts V8 once (V8 reserves its address
space up front) and then sets its OS memory ceiling: `RLIMIT_DATA` = what it uses then plus
`<memory MiB>`. `RLIMIT_DATA` counts every private writable mapping, ArrayBuffer backing stores
included, so a buffer bomb fails inside V8 (a RangeError) or kills this process, never the
gateway. Core dumps are off. A worker whose gateway is gone exits within a second.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import threading
import time
from typing import Any

from .base import TransformError, TransformLoadError, TransformTimedOut
from .wire import WireClosed, read_request, write_reply

_MIB = 1024 * 1024


def _data_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def _limit_memory(memory_mb: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    ceiling = _data_bytes() + memory_mb * _MIB
    resource.setrlimit(resource.RLIMIT_DATA, (ceiling, ceiling))


async def _load(spec: dict[str, Any]) -> Any:
    if spec["kind"] == "js":
        from .js import JsModule

        return await JsModule.create(spec)
    from .python import PyModule

    return PyModule(spec)


async def _handle(modules: dict[int, Any], request: list[Any]) -> list[Any]:
    op = request[0]
    if op == "load":
        _, tid, spec = request
        try:
            modules[tid] = await _load(spec)
        except TransformLoadError as exc:
            return ["err", "load", str(exc), None]
        except Exception as exc:  # anything else a module does at load
            return ["err", "load", f"{type(exc).__name__}: {exc}", None]
        return ["ok", None]
    if op == "call":
        tid, message, timeout_ms = request[1], request[2], request[3]
        module = modules.get(tid)
        if module is None:
            return ["err", "failed", "transform is not loaded in this worker", None]
        if len(request) > 4:  # timed: when it ran, and where (`executions`)
            started = time.time_ns()
            reply = await _call(module, message, timeout_ms)
            reply.append([started, time.time_ns(), os.getpid()])
            return reply
        return await _call(module, message, timeout_ms)
    if op == "unload":
        module = modules.pop(request[1], None)
        if module is not None:
            module.close()
        return ["ok", None]
    return ["err", "failed", f"unknown request {op!r}", None]


async def _call(module: Any, message: Any, timeout_ms: int) -> list[Any]:
    try:
        return ["ok", await module.call(message, timeout_ms)]
    except TransformTimedOut as exc:
        return ["err", "timeout", exc.reason, None]
    except TransformError as exc:
        return ["err", "failed", exc.reason, exc.detail]
    except MemoryError:
        return ["err", "failed", "transform ran out of memory", None]


async def _serve(requests: int, replies: int, memory_mb: int) -> None:
    """One request at a time: a blocking read while idle is fine (nothing else runs then)."""
    from py_mini_racer import MiniRacer

    MiniRacer().close()  # starts V8 (its address space reservations) before the ceiling
    _limit_memory(memory_mb)
    write_reply(replies, ["ready", os.getpid()])
    modules: dict[int, Any] = {}
    while True:
        try:
            request = read_request(requests)
        except WireClosed:
            return
        reply = await _handle(modules, request)
        try:
            write_reply(replies, reply)
        except (OverflowError, TypeError, ValueError):
            write_reply(
                replies, ["err", "failed", "transform returned a value that cannot be sent", None]
            )
        if request[0] == "call" and request[1] in modules:
            with contextlib.suppress(Exception):  # the next call tries again, or reports it
                await modules[request[1]].refill()


def _exit_with_the_gateway() -> None:
    """End this worker when the gateway is gone, even while a call runs forever (a killed
    gateway closes the pipe, but a worker busy in Python code never reads it)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="hookwise-sandbox-orphan", daemon=True).start()


def main() -> None:
    _exit_with_the_gateway()
    memory_mb = int(sys.argv[1])
    requests, replies = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    import uvloop

    uvloop.run(_serve(requests, replies, memory_mb))


if __name__ == "__main__":
    main()
