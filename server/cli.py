"""The `hookwise` command line: serve, config check, rules test/check, webhooks gmail.

Every subcommand has a complete `--help`. Errors in configuration are printed one per line with
their key path and exit with status 1.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from hookwise.engine.config import LoadedConfig
from hookwise.engine.errors import ConfigError

log = logging.getLogger("hookwise")


def _load(path: str) -> LoadedConfig | None:
    from hookwise.server.serve import load

    return load(path)


def cmd_serve(args: argparse.Namespace) -> int:
    from hookwise.server.serve import serve

    if args.workers < 1:
        print("hookwise: --workers must be at least 1", file=sys.stderr)
        return 2
    return serve(args)


def cmd_config_check(args: argparse.Namespace) -> int:
    """Everything `serve` would check at start-up, without starting: the config, the channels,
    the model providers and allowlist, the rules, and rules naming unconfigured channels."""
    from hookwise.engine.models import ModelPolicy
    from hookwise.server.channels.registry import load_channels
    from hookwise.server.gateway import compile_rules
    from hookwise.server.rules_cli import unconfigured_channel_issues
    from hookwise.server.runtime.providers.registry import Providers
    from hookwise.server.serve import print_problems

    loaded = _load(args.config)
    if loaded is None:
        return 1
    config = loaded.config
    issues = []
    ruleset = None
    for check in (
        lambda: load_channels(config.channels),
        lambda: ModelPolicy.from_config(config.agents.defaults),
        lambda: Providers.from_config(config.models, base_dir=loaded.base_dir),
    ):
        try:
            check()
        except ConfigError as e:
            issues.extend(e.issues)
    if config.hooks.enabled:
        try:
            ruleset = compile_rules(loaded)
        except ConfigError as e:
            issues.extend(e.issues)
        try:
            issues.extend(unconfigured_channel_issues(loaded, ruleset=ruleset))
        finally:
            if ruleset is not None:
                ruleset.close()
    if issues:
        print_problems(f"{args.config}: the configuration", ConfigError(issues))
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
        "--log-format",
        default=None,
        choices=["text", "json"],
        help="log lines as text or as one JSON object per line (default: logging.format "
        "from the config, else text)",
    )
    serve.add_argument(
        "--watch",
        action="store_true",
        help="reload the rules when the config file, a rule file or a transform changes "
        "(polled every second; SIGHUP always reloads)",
    )
    serve.add_argument(
        "--store",
        default=None,
        metavar="URL",
        help="the store: postgresql://user@host/db for several processes or machines, or "
        "sqlite:///path (default: store.url from the config, else <state dir>/hookwise.db)",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="number of worker processes sharing the port and the store (default 1)",
    )
    serve.add_argument("--socket-fd", type=int, default=None, help=argparse.SUPPRESS)
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
        from hookwise.server.rules_cli import add_cli as add_rules
    except ImportError:
        pass
    else:
        add_rules(sub)
    try:
        from hookwise.server.gmail.cli import add_cli as add_gmail
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
