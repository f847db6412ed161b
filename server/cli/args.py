"""The options every `hookwise` command shares, and how it ends.

The shared options themselves (`-c/--config`, `--debug`, the missing-config hint) live in
`hookwise.server.options`, below the CLI, since `serve` and the mail watcher's command use them
too; they are re-exported here for the CLI's modules. Exit status: 0 success, 2 a usage error
(argparse's own: an unknown option, a missing argument), 1 everything else (an invalid
configuration, a port in use, a failed check).
"""

from __future__ import annotations

from ..options import (
    CONFIG_ENV,
    DEFAULT_CONFIG,
    add_common_options,
    add_config_option,
    add_debug_option,
    missing_config_hint,
)

EXIT_FAILURE = 1
EXIT_USAGE = 2

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_CONFIG",
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "add_common_options",
    "add_config_option",
    "add_debug_option",
    "missing_config_hint",
]
