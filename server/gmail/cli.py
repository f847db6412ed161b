"""The `hookwise webhooks gmail setup|run` subcommands (argparse), registered by `add_cli`.

`hookwise.server.cli.main` calls `add_cli(webhooks_subparsers)`: it adds `gmail` with `setup` and `run` under
the given subparsers action. Each leaf parser sets `func`, a handler taking the parsed namespace
and returning the process exit status.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from ...engine.config.gmail import GMAIL_IMAP_HOST
from ..options import add_common_options

DEFAULT_PORT = 8787
DEFAULT_STATE_DIR = ".hookwise"  # as `hookwise serve --state-dir`
STATE_DIR_ENV = "HOOKWISE_STATE_DIR"

_GMAIL_HELP = """\
The mail-provider preset (`hooks.presets: [gmail]`): `setup` writes its configuration, `run`
watches the mailbox over IMAP IDLE and POSTs each new message to {hook_path}/gmail.
"""

_SETUP_HELP = """\
Write the configuration for the gmail preset into the config file (created when missing):
enable hooks, generate a strong hook token if there is none, add `gmail` to hooks.presets and
write the hooks.gmail block. The IMAP login (and the folder) is checked first; when it fails,
nothing is written and the error says what failed. Running it twice changes nothing. Other keys
and, in YAML files, comments are kept; JSON and JSON5 files are rewritten as JSON.

Gmail: enable IMAP, create an app password (Google account > Security > App passwords), store
it in a file readable only by you, and pass --password-file, or put it in an environment
variable and pass --password-env (the config then says password: ${VAR}).
"""

_RUN_HELP = """\
Watch the hooks.gmail folder over IMAP IDLE (RFC 2177) and POST each new message to the hook
URL (default http://127.0.0.1:<port><hooks.path>/gmail) with the hook token, one message per
request, with an Idempotency-Key derived from its Message-ID. The last handed-over UID is kept
in the state dir, so a restart sends nothing twice and misses nothing. Reconnects with backoff,
retries while the gateway is down. Stop with Ctrl-C or SIGTERM. (`hookwise serve` starts the
watcher itself when hooks.gmail.account is set.)
"""


def add_cli(subparsers: Any) -> argparse.ArgumentParser:
    """Register `gmail setup` and `gmail run` under `subparsers` (the `webhooks` command's)."""
    gmail = subparsers.add_parser(
        "gmail",
        help="mail-provider preset: write its config, run the IMAP watcher",
        description=_GMAIL_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = gmail.add_subparsers(dest="gmail_command", metavar="{setup,run}", required=True)

    setup = sub.add_parser(
        "setup",
        help="write hooks.gmail and enable the gmail preset (checks the IMAP login first)",
        description=_SETUP_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    setup.add_argument("--account", required=True, help="the mailbox login, e.g. you@gmail.com")
    setup.add_argument(
        "--imap-host", help=f"IMAP server (default: the file's value, else {GMAIL_IMAP_HOST})"
    )
    setup.add_argument("--imap-port", type=int, help="IMAP port (default 993 with TLS, else 143)")
    setup.add_argument(
        "--tls",
        choices=("implicit", "starttls", "none"),
        help="implicit TLS (default, port 993), STARTTLS, or none (loopback testing only)",
    )
    cred = setup.add_mutually_exclusive_group()
    cred.add_argument("--password-file", metavar="FILE", help="file holding the (app) password")
    cred.add_argument(
        "--password-env", metavar="VAR", help="environment variable holding the password"
    )
    cred.add_argument(
        "--password-command", metavar="CMD", help="shell command printing the password"
    )
    cred.add_argument(
        "--oauth2-token-file", metavar="FILE", help="file holding an OAuth2 access token (XOAUTH2)"
    )
    cred.add_argument(
        "--oauth2-token-env", metavar="VAR", help="environment variable holding an OAuth2 token"
    )
    cred.add_argument(
        "--oauth2-token-command",
        metavar="CMD",
        help="shell command printing a fresh OAuth2 access token (run at each connect)",
    )
    setup.add_argument(
        "--label", default="INBOX", help="folder (Gmail label) to watch (default INBOX)"
    )
    setup.add_argument("--hook-url", help="POST target, when the gateway is not on 127.0.0.1")
    add_common_options(setup)
    setup.add_argument(
        "--no-login-check",
        action="store_true",
        help="write the configuration without logging in to the IMAP server first",
    )
    setup.set_defaults(func=_setup_command)

    run = sub.add_parser(
        "run",
        help="watch the mailbox and POST new mail to the gateway",
        description=_RUN_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common_options(run)
    run.add_argument(
        "--state-dir",
        type=Path,
        help=f"where the checkpoint lives; use serve's (default ${STATE_DIR_ENV}, else .hookwise)",
    )
    run.add_argument("--hook-url", help="POST target (default: hooks.gmail.hookUrl, else local)")
    run.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"the local gateway's port for the default hook URL (default {DEFAULT_PORT})",
    )
    run.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    run.set_defaults(func=_run_command)
    return gmail


def _setup_command(args: argparse.Namespace) -> int:
    from .setup import SetupError, run_setup

    try:
        report = run_setup(
            args.config,
            account=args.account,
            imap_host=args.imap_host,
            imap_port=args.imap_port,
            tls=args.tls,
            password_file=args.password_file,
            password_env=args.password_env,
            password_command=args.password_command,
            oauth2_token_file=args.oauth2_token_file,
            oauth2_token_env=args.oauth2_token_env,
            oauth2_token_command=args.oauth2_token_command,
            label=args.label,
            hook_url=args.hook_url,
            check_login=not args.no_login_check,
        )
    except SetupError as e:
        print(f"gmail setup failed: {e}", file=sys.stderr)
        return 1
    print(report.render())
    return 0


def _run_command(args: argparse.Namespace) -> int:
    from ...engine.config.load import load_config
    from ...engine.errors import ConfigError
    from .watcher import WatcherError, run_watcher

    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
    )
    try:
        loaded = load_config(args.config)
    except ConfigError as e:
        print(f"{args.config}: invalid configuration:\n{e}", file=sys.stderr)
        return 1
    hooks = loaded.config.hooks
    gmail = hooks.gmail
    if gmail is None:
        print(
            f"{args.config}: no hooks.gmail block; run `hookwise webhooks gmail setup` first",
            file=sys.stderr,
        )
        return 1
    if not hooks.token:
        print(f"{args.config}: hooks.token is not set", file=sys.stderr)
        return 1
    base_dir = loaded.base_dir
    state_dir = args.state_dir or Path(os.environ.get(STATE_DIR_ENV) or DEFAULT_STATE_DIR)
    hook_url = args.hook_url or gmail.resolve_hook_url(args.port, hooks.path)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        await run_watcher(
            gmail,
            hook_url=hook_url,
            hook_token=hooks.token or "",
            state_dir=state_dir,
            stop=stop,
            base_dir=base_dir,
        )

    try:
        asyncio.run(main())
    except WatcherError as e:
        print(f"gmail watcher cannot start: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


__all__ = ["add_cli"]
