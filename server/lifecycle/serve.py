"""Running the service: one process, or a supervisor and `--workers N` worker processes.

With one worker, the process binds the socket and serves. With several, a supervisor binds the
socket once, starts N worker processes that inherit it (each with its own event loop, all
accepting on the same port), forwards SIGTERM/SIGINT/SIGHUP to them, and restarts a worker that
dies (giving up when workers keep dying). Workers share the store; see `hookwise.server.runtime.core` for
how they divide the work.

The supervisor hands each worker its `ServeOptions` whole (`options`: in the environment, with
the inherited socket's descriptor added), starts and reaps it with the one child-process helper
(`hookwise.plumbing.children`) and restarts it after the one back-off. The application itself is
made by a factory the caller passes in (the CLI passes `hookwise.server.app.create_app`): this
module sits below the application and imports neither it nor the CLI.

One shared listening socket rather than one per worker (SO_REUSEPORT): while a worker restarts,
connections wait in the shared queue for the others instead of being reset. The price is that
the kernel does not spread long-lived keep-alive connections evenly (a benchmark's 32 persistent
connections may cluster on one worker); many short connections from many senders even out.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import os
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ...engine.config.load import load_config
from ...engine.config.models import LoadedConfig
from ...engine.errors import ConfigError
from ...plumbing.backoff import Backoff
from ...plumbing.children import PIPE, Child, NotReady, describe_exit, forward, on_signals, stop_all
from ..logs import say
from ..options import missing_config_hint
from ..version import VERSION
from .options import ServeOptions

if TYPE_CHECKING:
    from .gateway import Gateway

log = logging.getLogger("hookwise")

READY = "hookwise: listening on"
WORKER_READY = "hookwise: worker ready"
MAX_RESTARTS_PER_MINUTE = 5
#: the wait before restarting a worker that died, by how many died in the last minute
RESTART = Backoff(base=0.25, cap=4.0, jitter=0.0)
#: how long the supervisor gives its workers to stop, in all, before it kills them
STOP_TIMEOUT = 20.0
#: how long a worker may take to say it is ready (its ready handshake)
READY_TIMEOUT = 60.0
#: a worker's program: the CLI's worker entry, which reads its `ServeOptions` from the environment
_WORKER_ENTRY = (
    "import sys; from hookwise.server.cli.main import serve_worker; sys.exit(serve_worker())"
)

AppFactory = Callable[["Gateway"], Any]
"""Makes the ASGI application for a gateway (`hookwise.server.app.create_app`)."""


def print_problems(what: str, error: ConfigError) -> None:
    say(f"hookwise: {what} has {len(error.issues)} problem(s):", stream=sys.stderr, level="ERROR")
    for issue in error.issues:
        say(f"  {issue}", stream=sys.stderr, level="ERROR")


def load(path: str, options: ServeOptions | None = None) -> LoadedConfig | None:
    """Load and validate a config file, printing every problem (None when invalid); for `serve`
    (`options`), the log format comes from the config unless `--log-format` was given."""
    hint = missing_config_hint(path)
    if hint:
        say(hint, stream=sys.stderr, level="ERROR")
        return None
    try:
        loaded = load_config(path)
    except ConfigError as e:
        print_problems(f"{path}: the configuration", e)
        return None
    if options is not None and options.log_format is None:
        from .. import logs

        logs.configure(options.log_level, loaded.config.logging.format)
    for warning in loaded.warnings:
        say(f"hookwise: warning: {warning}", stream=sys.stderr, level="WARNING")
    return loaded


class StartupError(Exception):
    """A start-up failure with a one-line explanation for the operator."""


def bind(host: str, port: int) -> socket.socket:
    """The listening socket. Raises `StartupError` with one line for the usual failures (the
    port in use, an address this machine does not have, a privileged port)."""
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as e:
        raise StartupError(f"cannot listen on {shown}: {e.strerror or e}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise StartupError(f"{shown} is in use; pick another with --port") from None
        if e.errno == errno.EACCES:
            raise StartupError(f"{shown}: permission denied; use a port above 1023") from None
        if e.errno == errno.EADDRNOTAVAIL:
            raise StartupError(f"{shown}: this machine has no address {host}; see --host") from None
        raise StartupError(f"cannot listen on {shown}: {e.strerror or e}") from None
    except socket.gaierror as e:
        sock.close()
        raise StartupError(f"cannot listen on {shown}: {e.strerror or e}") from None
    sock.set_inheritable(True)
    return sock


def _shown(sock: socket.socket) -> tuple[str, int]:
    host, port = sock.getsockname()[:2]
    return (f"[{host}]" if ":" in host else host), port


def serve(options: ServeOptions, make_app: AppFactory) -> int:
    """`hookwise serve`: one process, or a supervisor of `options.workers` workers (a worker
    is `serve` with `options.socket_fd` set)."""
    from .. import logs

    logs.configure(options.log_level, options.log_format or "text")
    try:
        if options.workers > 1 and not options.is_worker:
            return _supervise(options)
        return _run_process(options, make_app)
    except StartupError as e:
        say(f"hookwise: {e}", stream=sys.stderr, level="ERROR")
        return 1


def uvicorn_options(gw: Any) -> dict[str, Any]:
    """How hookwise runs uvicorn (everything but the app) for the gateway settings `gw`; the
    ingest bench runs its ceiling app with the same, so that the two compare like for like."""
    from ..ingress.http import JsonHttpProtocol

    return {
        "loop": "uvloop",
        # JSON for malformed requests, header size limit and read timeout (server.http)
        "http": JsonHttpProtocol.configured(
            max_head_bytes=gw.max_header_bytes, head_timeout=float(gw.header_timeout_seconds)
        ),
        # forwarded headers count only from gateway.trustedProxies (server.proxies)
        "proxy_headers": False,
        "lifespan": "on",
        "access_log": False,
        "log_config": None,
        "server_header": False,
        "date_header": False,
        "timeout_graceful_shutdown": 10,
    }


def _run_process(args: ServeOptions, make_app: AppFactory) -> int:
    import uvicorn
    import uvloop

    from ..store.sqlite import StoreInUse
    from .gateway import Gateway

    loaded = load(args.config, args)
    if loaded is None:
        return 1
    from ..ingress.proxies import TrustedProxies, parse_networks

    gw = loaded.config.gateway
    try:
        networks = parse_networks(gw.trusted_proxies)
    except ConfigError as e:
        print_problems(f"{args.config}: the configuration", e)
        return 1
    # the port first: when it is taken, nothing (no state dir, no store) has been created
    if args.socket_fd is not None:
        sock = socket.socket(fileno=args.socket_fd)
    else:
        sock = bind(args.host, args.port)
    try:
        gateway = Gateway(
            loaded, state_dir=Path(args.state_dir), store_url=args.store, workers=args.workers
        )
    except ConfigError as e:
        sock.close()
        print_problems(f"{args.config}: the rules", e)
        return 1
    except StoreInUse as e:
        sock.close()
        say(f"hookwise: {e}", stream=sys.stderr, level="ERROR")
        return 1
    app: Any = make_app(gateway)
    if networks:
        app = TrustedProxies(app, networks)
    host, port = _shown(sock)
    gateway.listen_port = port
    server = uvicorn.Server(uvicorn.Config(app, **uvicorn_options(gw)))

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGHUP, gateway.reload_in_background)
        watcher = None
        if args.watch:
            from .watch import watch

            watcher = asyncio.create_task(watch(gateway), name="hookwise-watch")
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not serving.done():
            await asyncio.sleep(0.01)
        if server.started:
            _settle_heap()
            sys.setswitchinterval(SWITCH_INTERVAL)
            if args.socket_fd is not None:
                print(f"{WORKER_READY} pid={os.getpid()}", flush=True)
            else:
                hooks = (
                    f"hooks at {loaded.config.hooks.path}" if gateway.hooks else "hooks disabled"
                )
                say(f"{READY} http://{host}:{port} (hookwise {VERSION}, {hooks})")
        await serving
        if watcher is not None:
            watcher.cancel()

    quiet = None if args.debug else _QuietStartup(server)
    try:
        uvloop.run(main())
    except SystemExit:  # uvicorn's own exit when the application's start-up failed
        if server.started:
            raise
    if quiet is not None and server.started:
        quiet.remove()  # (after a failed start-up it stays: asyncio reports uvicorn's exit late)
    if not server.started:
        say(
            f"hookwise: start-up failed: {_reason(gateway.startup_error)}",
            stream=sys.stderr,
            level="ERROR",
        )
        return 1
    return 0


#: the collector's first-generation threshold while serving (CPython's default is 700)
GC_GEN0_THRESHOLD = 20_000
#: how long the event loop may keep the GIL from a thread that waits for it (Python's default
#: is 5 ms). The store's writer thread needs the GIL back after every statement it runs, and
#: under load the loop hands it over only when forced to: each commit then waited up to 5 ms
#: before its requests could be answered. With 1 ms, `/wake` took 9-32% more requests/s in six
#: interleaved rounds out of six (bench/ingest.py's load); the loop pays a forced hand-over per
#: commit, a few hundred a second.
SWITCH_INTERVAL = 0.001


def _settle_heap() -> None:
    """Once started: move everything start-up made (modules, the app, the config, the rules)
    out of the cyclic collector's reach, and collect the youngest generation less often.

    A request allocates a few hundred objects and frees nearly all of them by reference count,
    so collections find little; with the default threshold one ran every few requests, and each
    oldest-generation collection walked the whole start-up heap: pauses of tens of milliseconds
    that showed as the p99 of the ingest bench. Cycles are still collected, in fewer, later
    passes over far fewer objects."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)


class _QuietStartup(logging.Filter):
    """Until the server has started, keeps the ASGI server's error lines (a traceback of the
    lifespan's failure) off the log: `hookwise serve` prints one line instead (`--debug` keeps
    them)."""

    def __init__(self, server: Any) -> None:
        super().__init__()
        self._server = server
        self._loggers = [logging.getLogger("uvicorn.error"), logging.getLogger("asyncio")]
        for lg in self._loggers:
            lg.addFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        return self._server.started or record.levelno < logging.ERROR

    def remove(self) -> None:
        for lg in self._loggers:
            lg.removeFilter(self)


def _reason(error: BaseException | None) -> str:
    """One line for an exception (the first leaf of an exception group)."""
    if error is None:
        return "see the log above (--debug shows the details)"
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = str(error).splitlines()[0] if str(error) else ""
    name = type(error).__name__
    if not text:
        return name
    # a builtin's text needs its name (`[Errno 111] Connection refused`); hookwise's own and
    # drivers' errors say what they are
    shown = f"{name}: {text}" if type(error).__module__ == "builtins" else text
    return f"{shown} (--debug shows the traceback)"


class _Worker:
    """One gateway worker: a child started with the supervisor's `ServeOptions` whole."""

    def __init__(self, options: ServeOptions, sock: socket.socket, index: int) -> None:
        self.index = index
        self.child = Child(
            Child.python("-c", _WORKER_ENTRY),
            stdout=PIPE,
            pass_fds=(sock.fileno(),),
            env=options.worker_env(sock.fileno()),
        )

    def wait_ready(self, timeout: float) -> bool:
        """Its ready handshake: the line `WORKER_READY` on its stdout (other lines are read
        past); False when it ends or stays silent past `timeout`."""
        deadline = time.monotonic() + timeout
        while self.child.alive:
            try:
                line = self.child.handshake(_readline, deadline - time.monotonic())
            except NotReady:
                return False
            if line.startswith(WORKER_READY):
                threading.Thread(target=self._drain, daemon=True).start()
                return True
            if not line:
                return False
        return False

    def _drain(self) -> None:
        assert self.child.proc.stdout is not None
        with contextlib.suppress(ValueError, OSError):  # closed by the reap of a dead worker
            for _ in iter(self.child.proc.stdout.readline, b""):
                pass


def _readline(out: IO[bytes]) -> str:
    return out.readline().decode(errors="replace")


def _supervise(args: ServeOptions) -> int:
    loaded = load(args.config, args)
    if loaded is None:
        return 1
    if loaded.config.hooks.enabled:
        from .gateway import compile_rules

        try:
            compile_rules(loaded).close()
        except ConfigError as e:
            print_problems(f"{args.config}: the rules", e)
            return 1
    sock = bind(args.host, args.port)
    metrics_dir = None
    if loaded.config.gateway.metrics.enabled:  # the workers' shared metric files
        from .. import metrics

        metrics_dir = metrics.multiprocess_dir(Path(args.state_dir))
        os.environ[metrics.ENV] = str(metrics_dir)
    try:
        return _supervise_workers(args, loaded, sock)
    finally:
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)


def _supervise_workers(args: ServeOptions, loaded: LoadedConfig, sock: socket.socket) -> int:
    host, port = _shown(sock)
    workers = [_Worker(args, sock, i) for i in range(args.workers)]

    def children() -> list[Child]:
        return [w.child for w in workers]

    if not all(w.wait_ready(READY_TIMEOUT) for w in workers):
        say("hookwise: a worker did not start; see the log above", stream=sys.stderr, level="ERROR")
        stop_all(children(), signal.SIGTERM, STOP_TIMEOUT)
        return 1
    hooks = (
        f"hooks at {loaded.config.hooks.path}" if loaded.config.hooks.enabled else "hooks disabled"
    )
    say(f"{READY} http://{host}:{port} (hookwise {VERSION}, {hooks}, {args.workers} workers)")

    stopping = threading.Event()

    def on_signal(signum: int) -> None:
        if signum == signal.SIGHUP:  # reload: every worker reloads its rules
            forward(children(), signal.SIGHUP)
            return
        stopping.set()
        forward(children(), signal.SIGTERM)

    on_signals((signal.SIGTERM, signal.SIGINT, signal.SIGHUP), on_signal)

    restarts: list[float] = []
    while not stopping.is_set():
        stopping.wait(0.2)
        for i, w in enumerate(workers):
            code = w.child.proc.poll()
            if code is None or stopping.is_set():
                continue
            now = time.monotonic()
            restarts = [t for t in restarts if t > now - 60] + [now]
            if len(restarts) > MAX_RESTARTS_PER_MINUTE:
                log.error("workers keep dying; stopping")
                stopping.set()
                stop_all(children(), signal.SIGTERM, STOP_TIMEOUT)
                return 1
            wait = RESTART.step(len(restarts) - 1)
            log.error(
                "worker %d (pid %d) exited with %s; restarting it in %g s",
                i,
                w.child.pid,
                describe_exit(code),
                wait,
            )
            w.child.reap()  # its pipes closed: a restarted worker leaks no descriptor
            if stopping.wait(wait):
                break
            workers[i] = _Worker(args, sock, i)
            if not workers[i].wait_ready(READY_TIMEOUT) and not stopping.is_set():
                # ended, or silent: reaped now, so the loop restarts it after the back-off
                new = workers[i].child
                silent = new.wait(1.0) is None  # (its output may end just before it does)
                how = new.reap(STOP_TIMEOUT, signum=signal.SIGTERM)
                log.error(
                    "worker %d (pid %d) %s (%s)",
                    i,
                    new.pid,
                    f"did not say it was ready in {READY_TIMEOUT:g} s" if silent else "ended",
                    how,
                )
    stop_all(children(), None, STOP_TIMEOUT)
    return 0
