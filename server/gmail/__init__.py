"""The mail-provider preset's helpers: the IMAP IDLE watcher and the setup command.

- `run_watcher(config, hook_url=, hook_token=, state_dir=, stop=)`: watch `hooks.gmail.label`
  and POST each new message to `{hook_path}/gmail` (`server.gmail.watcher`).
- `run_setup(config_path, account=, ...) -> SetupReport`: write the preset's configuration
  after checking the IMAP login (`server.gmail.setup`).
- `add_cli(subparsers)`: the `webhooks gmail setup|run` subcommands (`server.gmail.cli`).
"""

from __future__ import annotations

from server.gmail.cli import add_cli
from server.gmail.setup import SetupError, SetupReport, run_setup
from server.gmail.watcher import WatcherError, run_watcher

__all__ = ["SetupError", "SetupReport", "WatcherError", "add_cli", "run_setup", "run_watcher"]
