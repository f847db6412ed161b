"""The `hookwise` command line: serve, config check, rules test/check, webhooks gmail.

Every subcommand has a complete `--help`. Errors in configuration are printed one per line with
their key path and exit with status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from engine.config import LoadedConfig, load_config
from engine.errors import ConfigError

log = logging.getLogger("hookwise")


def _load(path: str) -> LoadedConfig | None:
    try:
        loaded = load_config(path)
    except ConfigError as e:
        print(
            f"hookwise: {path}: the configuration has {len(e.issues)} problem(s):", file=sys.stderr
        )
        for issue in e.issues:
            print(f"  {issue}", file=sys.stderr)
        return None
    for warning in loaded.warnings:
        print(f"hookwise: warning: {warning}", file=sys.stderr)
    return loaded


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from server import logs
    from server.app import create_app
    from server.gateway import Gateway

    logs.configure(args.log_level)
    loaded = _load(args.config)
    if loaded is None:
        return 1
    try:
        gateway = Gateway(loaded, state_dir=Path(args.state_dir))
    except ConfigError as e:
        print(
            f"hookwise: {args.config}: the rules have {len(e.issues)} problem(s):", file=sys.stderr
        )
        for issue in e.issues:
            print(f"  {issue}", file=sys.stderr)
        return 1
    app = create_app(gateway)
    sock = _bind(args.host, args.port)
    host, port = sock.getsockname()[:2]
    gateway.listen_port = port
    config = uvicorn.Config(
        app,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_config=None,
        server_header=False,
        date_header=False,
        timeout_graceful_shutdown=10,
    )
    server = uvicorn.Server(config)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGHUP, gateway.reload)
        watcher = None
        if args.watch:
            from server.watch import watch

            watcher = asyncio.create_task(watch(gateway), name="hookwise-watch")
        serve = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not serve.done():
            await asyncio.sleep(0.01)
        if server.started:
            shown = f"[{host}]" if ":" in host else host
            hook_state = (
                f"hooks at {loaded.config.hooks.path}" if gateway.hooks else "hooks disabled"
            )
            print(f"hookwise: listening on http://{shown}:{port} ({hook_state})", flush=True)
        await serve
        if watcher is not None:
            watcher.cancel()

    import uvloop

    uvloop.run(main())
    return 0 if server.started else 1


def cmd_config_check(args: argparse.Namespace) -> int:
    loaded = _load(args.config)
    if loaded is None:
        return 1
    if loaded.config.hooks.enabled:
        from server.gateway import compile_rules

        try:
            compile_rules(loaded).close()
        except ConfigError as e:
            print(
                f"hookwise: {args.config}: the rules have {len(e.issues)} problem(s):",
                file=sys.stderr,
            )
            for issue in e.issues:
                print(f"  {issue}", file=sys.stderr)
            return 1
    print(f"hookwise: {args.config}: the configuration is valid")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hookwise",
        description="hookwise: a webhook gateway for AI agents.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    serve = sub.add_parser("serve", help="run the service", description="Run the hookwise service.")
    serve.add_argument("--config", required=True, help="config file (.yaml, .json or .json5)")
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: loopback only)",
    )
    serve.add_argument(
        "--port",
        type=int,
        default=8787,
        help="port to listen on (default 8787; 0 picks a free one)",
    )
    serve.add_argument(
        "--state-dir",
        default=".hookwise",
        help="directory for the SQLite store (default ./.hookwise)",
    )
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="log level (default info)",
    )
    serve.add_argument(
        "--watch",
        action="store_true",
        help="reload the rules when the config file, a rule file or a transform changes "
        "(polled every second; SIGHUP always reloads)",
    )
    serve.set_defaults(func=cmd_serve)

    config = sub.add_parser(
        "config", help="configuration tools", description="Configuration tools."
    )
    config_sub = config.add_subparsers(dest="config_command", metavar="COMMAND", required=True)
    check = config_sub.add_parser(
        "check",
        help="validate a config file",
        description="Validate a config file and its rules; print every problem with its key path. Exit 1 on error.",
    )
    check.add_argument("--config", required=True, help="config file (.yaml, .json or .json5)")
    check.set_defaults(func=cmd_config_check)
    _add_optional_commands(sub)
    return parser


def _add_optional_commands(sub: Any) -> None:
    try:
        from server.rules_cli import add_cli as add_rules
    except ImportError:
        pass
    else:
        add_rules(sub)
    try:
        from server.gmail.cli import add_cli as add_gmail
    except ImportError:
        pass
    else:
        webhooks = sub.add_parser(
            "webhooks",
            help="helpers for webhook providers",
            description="Helpers for webhook providers.",
        )
        providers = webhooks.add_subparsers(dest="provider", metavar="PROVIDER", required=True)
        add_gmail(providers)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
