"""The options every `hookwise` command shares, and how it ends.

`-c/--config FILE` (default `$HOOKWISE_CONFIG`, else `hookwise.yaml` in the current directory)
and `--debug` (show the traceback of an unexpected error) exist on every command that reads a
configuration. Exit status: 0 success, 2 a usage error (argparse's own: an unknown option, a
missing argument), 1 everything else (an invalid configuration, a port in use, a failed check).
"""

from __future__ import annotations

import argparse
import os

CONFIG_ENV = "HOOKWISE_CONFIG"
DEFAULT_CONFIG = "hookwise.yaml"
EXIT_FAILURE = 1
EXIT_USAGE = 2


def add_config_option(parser: argparse.ArgumentParser) -> None:
    """`-c/--config FILE`, defaulting to `$HOOKWISE_CONFIG`, else `hookwise.yaml`."""
    parser.add_argument(
        "-c",
        "--config",
        default=os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG,
        metavar="FILE",
        help=f"config file, .yaml/.json/.json5 (default ${CONFIG_ENV}, else {DEFAULT_CONFIG})",
    )


def add_debug_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="on an unexpected error, print the Python traceback (default: one line)",
    )


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """Both shared options (see the module docstring)."""
    add_config_option(parser)
    add_debug_option(parser)


def missing_config_hint(path: str) -> str | None:
    """The one line to print when the config file does not exist (None when it does)."""
    if os.path.exists(path):
        return None
    return (
        f"hookwise: {path}: no such config file; create one with `hookwise init --path {path}`, "
        f"or name another with -c FILE or ${CONFIG_ENV}"
    )
