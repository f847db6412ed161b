"""The mail-provider preset's helpers: the IMAP IDLE watcher and the setup command.

- `run_watcher(config, hook_url=, hook_token=, state_dir=, stop=)`: watch `hooks.gmail.label`
  and POST each new message to `{hook_path}/gmail` (`hookwise.server.gmail.watcher`).
- `run_setup(config_path, account=, ...) -> SetupReport`: write the preset's configuration
  after checking the IMAP login (`hookwise.server.gmail.setup`).
- `add_cli(subparsers)`: the `webhooks gmail setup|run` subcommands (`hookwise.server.gmail.cli`).
"""

from __future__ import annotations

from .cli import add_cli
from .setup import SetupError, SetupReport, run_setup
from .watcher import WatcherError, run_watcher

__all__ = ["SetupError", "SetupReport", "WatcherError", "add_cli", "run_setup", "run_watcher"]
