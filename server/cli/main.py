"""The `hookwise` command line: init, serve, config check, rules test/check, webhooks gmail.

Every subcommand has a complete `--help` and takes `-c/--config` (default `$HOOKWISE_CONFIG`,
else `hookwise.yaml`; see `hookwise.server.cli.args`). Errors in configuration are printed one per
line with their key path. Exit status: 2 for a usage error only, 1 for every other failure; an
unexpected error is one line (`--debug` shows the traceback).
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...engine.config.models import LoadedConfig
from ...engine.errors import ConfigError
from ..version import VERSION
from .args import EXIT_FAILURE, EXIT_USAGE, add_common_options

if TYPE_CHECKING:
    from ..lifecycle.gateway import Gateway

log = logging.getLogger("hookwise")


def _load(path: str) -> LoadedConfig | None:
    from ..lifecycle.serve import load

    return load(path)


def cmd_serve(args: argparse.Namespace) -> int:
    """`hookwise serve`: its options, typed once, and the application's factory, to `serve`."""
    from ..lifecycle.options import ServeOptions
    from ..lifecycle.serve import serve

    if args.workers < 1:
        print("hookwise: --workers must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    return serve(ServeOptions.from_namespace(args), _create_app)


def _create_app(gateway: Gateway) -> Any:
    """`hookwise.server.app.create_app`, imported when a process serves (a supervisor of
    workers never imports the application: it would only delay the workers' start)."""
    from ..app import create_app

    return create_app(gateway)


def serve_worker() -> int:
    """A gateway worker's entry (`serve --workers N`): its `ServeOptions` come whole from the
    supervisor, in the environment (see `hookwise.server.lifecycle.options`)."""
    from ..lifecycle.options import ServeOptions
    from ..lifecycle.serve import serve

    try:
        options = ServeOptions.take_from_env()
    except ValueError as e:
        print(f"hookwise: {e}", file=sys.stderr)
        return EXIT_FAILURE
    return _run("serve", options.debug, lambda: serve(options, _create_app))


def cmd_init(args: argparse.Namespace) -> int:
    """Write a commented starter config with fresh tokens; never overwrite."""
    from .starter import StarterExists, write_starter

    try:
        write_starter(Path(args.config))
    except StarterExists as e:
        print(f"hookwise: {e}", file=sys.stderr)
        return EXIT_FAILURE
    except OSError as e:
        print(f"hookwise: cannot write {args.config}: {e.strerror or e}", file=sys.stderr)
        return EXIT_FAILURE
    print(
        f"hookwise: wrote {args.config} with fresh hook and admin tokens (mode 0600); "
        f"next: hookwise config check -c {args.config}"
    )
    return 0


def cmd_config_check(args: argparse.Namespace) -> int:
    """Everything `serve` would check at start-up, without starting: the config, the channels,
    the model providers and allowlist, the rules, and rules naming unconfigured channels."""
    from ...engine.config.load import check_config
    from ...engine.config.model_policy import ModelPolicy
    from ..channels.registry import load_channels
    from ..lifecycle.gateway import compile_rules, provider_ids
    from ..lifecycle.serve import print_problems
    from ..runtime.providers.registry import Providers
    from .args import missing_config_hint
    from .rules import rule_warnings, unconfigured_channel_issues

    hint = missing_config_hint(args.config)
    if hint:
        print(hint, file=sys.stderr)
        return EXIT_FAILURE
    # every problem in one pass: the keys at fault are set aside and the rest is checked on
    loaded, issues = check_config(args.config)
    if loaded is None:
        print_problems(f"{args.config}: the configuration", ConfigError(issues))
        return EXIT_FAILURE
    for warning in loaded.warnings:
        print(f"hookwise: warning: {warning}", file=sys.stderr)
    config = loaded.config
    ruleset = None
    from ..alerts.evaluator import check_targets

    for check in (
        lambda: check_targets(config.alerts, load_channels(config.channels)),
        lambda: issues.extend(
            ModelPolicy.from_config(config.agents.defaults, provider_ids(config)).unavailable()
        ),
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
            issues.extend(loaded.beside_faults(e.issues))
        try:
            issues.extend(unconfigured_channel_issues(loaded, ruleset=ruleset))
            found = rule_warnings(ruleset) if ruleset is not None else []
            for warning in loaded.warnings_beside_faults(found):
                print(f"hookwise: warning: {warning}", file=sys.stderr)
        finally:
            if ruleset is not None:
                ruleset.close()
    if issues:
        print_problems(f"{args.config}: the configuration", ConfigError(issues))
        return 1
    from .tools import server_lines

    for line in server_lines(config.tools):
        print(f"hookwise: {line}")
    print(f"hookwise: {args.config}: the configuration is valid")
    return 0


def _parser(optional: bool = True) -> argparse.ArgumentParser:
    """The command line's parser; without the `optional` commands (those of the other CLI
    modules) for `serve`, which would only wait for their imports."""
    parser = argparse.ArgumentParser(
        prog="hookwise",
        description="hookwise: a webhook gateway for AI agents.",
        epilog="Every command reads its config from -c FILE, else $HOOKWISE_CONFIG, else "
        "./hookwise.yaml. Exit status: 0 success, 2 usage error, 1 any other failure.",
    )
    parser.add_argument("--version", action="version", version=f"hookwise {VERSION}")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="on an unexpected error, print the Python traceback (default: one line)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    init = sub.add_parser(
        "init",
        help="write a starter config with fresh tokens",
        description="Write a commented starter configuration with freshly generated hook and "
        "admin tokens (mode 0600). An existing file is never overwritten (exit 1).",
    )
    init.add_argument(
        "--path",
        "-c",
        "--config",
        dest="config",
        default=_default_config(),
        metavar="FILE",
        help="where to write it (default $HOOKWISE_CONFIG, else hookwise.yaml)",
    )
    init.set_defaults(func=cmd_init)

    serve = sub.add_parser("serve", help="run the service", description="Run the hookwise service.")
    add_common_options(serve)
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
        "(file-system notifications; SIGHUP always reloads)",
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
    add_common_options(check)
    check.set_defaults(func=cmd_config_check)
    if optional:
        _add_optional_commands(sub)
    return parser


def _add_optional_commands(sub: Any) -> None:
    """The commands of the other CLI modules. Imported here, not at the top, so that `serve`
    does not load them; never inside `except ImportError`: a module of the project's own that
    fails to import is a defect to see, not a command to drop without a word."""
    from ..gmail.cli import add_cli as add_gmail
    from .admin import add_cli as add_admin
    from .alerts import add_cli as add_alerts
    from .approvals import add_cli as add_approvals
    from .audit import add_cli as add_audit
    from .budgets import add_cli as add_budgets
    from .lanes import add_cli as add_lanes
    from .rules import add_cli as add_rules
    from .signatures import add_cli as add_sign
    from .sources import add_cli as add_sources
    from .tools import add_cli as add_tools

    add_rules(sub)
    add_tools(sub)

    webhooks = sub.add_parser(
        "webhooks",
        help="helpers for webhook providers",
        description="Helpers for webhook providers.",
    )
    providers = webhooks.add_subparsers(dest="provider", metavar="PROVIDER", required=True)
    add_sign(providers)
    add_admin(sub)
    add_sources(sub)
    add_audit(sub)
    add_lanes(sub)
    add_budgets(sub)
    add_alerts(sub)
    add_approvals(sub)
    add_gmail(providers)


def _default_config() -> str:
    import os

    from .args import CONFIG_ENV, DEFAULT_CONFIG

    return os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit status (argparse exits 2 itself on a usage error)."""
    argv = sys.argv[1:] if argv is None else argv
    # the command is the first word that is not an option (the top level's take no values)
    command = next((a for a in argv if not a.startswith("-")), None)
    args = _parser(optional=command != "serve").parse_args(argv)
    return _run(args.command, getattr(args, "debug", False), lambda: args.func(args))


def _run(command: str, debug: bool, run: Callable[[], int | None]) -> int:
    """Run a command; an unexpected error is one line (the traceback with `--debug`)."""
    try:
        return int(run() or 0)
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        if debug:
            traceback.print_exc()
        else:
            log.debug("unexpected error", exc_info=True)
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            print(
                f"hookwise: {command} failed: {reason} (--debug shows the traceback)",
                file=sys.stderr,
            )
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
