"""The options every `hookwise` command shares: `-c/--config FILE` (default `$HOOKWISE_CONFIG`,
else `hookwise.yaml` in the current directory) and `--debug` (show the traceback of an
unexpected error), and the one line printed when the config file does not exist.

Shared by the command line (`cli/`), the mail watcher's command (`gmail/cli`) and `serve`
(`lifecycle/serve`), so it lives here, below all three, not in `cli/`.
"""

from __future__ import annotations

import argparse
import os

CONFIG_ENV = "HOOKWISE_CONFIG"
DEFAULT_CONFIG = "hookwise.yaml"


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
