"""`hookwise init`: a commented starter configuration with freshly generated tokens.

The file is created, never overwritten (an existing file is an error), readable by its owner
only (it holds the tokens). It passes `hookwise config check` as written, runs offline (the
built-in `echo` model), and carries one example mapping for `hookwise rules test`; the rest is
commented out, ready to switch on: a real model, a channel, production settings.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

_TEMPLATE = """\
# hookwise configuration, written by `hookwise init`. Reference: schemas/config.schema.json;
# check it with `hookwise config check` (this file is the default config of every command,
# or point -c FILE / $HOOKWISE_CONFIG at it).
#
# The two tokens below were generated for you and are secrets: keep this file private
# (mode 0600), or move them out with `token: ${{HOOKWISE_HOOK_TOKEN}}` / `tokenFile: path`.
hooks:
  enabled: true
  # Senders authenticate with this token: `Authorization: Bearer <token>`.
  token: {hook_token}
  path: /hooks
  # Each mapped hook's payload is kept 7 days (256 KiB at most) so it can be replayed after a
  # rule fix; it may hold personal data: `retainPayloads: {{enabled: false}}` keeps none.
  # retainPayloads: {{for: 7d, maxBytes: 262144, builtIn: false}}
  # presets: [gmail]          # the built-in mail mapping: POST /hooks/gmail
  # rules: [rules/*.yaml]     # rule files, relative to this file
  mappings:
    # POST /hooks/alerts {{"service": "db-1", "summary": "disk almost full"}} becomes a system
    # event for the main session. Try it without a server:
    #   hookwise rules test --path alerts --payload alert.json
    - id: alerts
      match: {{path: alerts}}
      action: wake
      wakeMode: now
      textTemplate: "Alert from {{{{service | required}}}}: {{{{summary}}}}"
    # An agent run that may use tools (MCP, see tools: below). A mapping's runs get exactly
    # the tools its `tools:` grants (none without it), whatever the payload asks for:
    # - id: triage
    #   match: {{path: triage}}
    #   messageTemplate: "Triage: {{{{summary}}}}"
    #   tools: [monitoring.*, github.get_pull_request]   # server.tool, or server.* for all
gateway:
  auth:
    # The admin API (/api/*) token; it must differ from the hook token.
    token: {admin_token}
agents:
  defaults:
    # The built-in echo model answers `echo: <message>`, so everything works offline.
    model: echo/echo
    # model: local/llama3.2              # a provider below, then the model name
    # tools: [monitoring.query]          # what /agent runs and heartbeats may call (none)
# models:
#   providers:
#     # Any OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio):
#     local: {{api: openai, baseUrl: http://127.0.0.1:11434/v1}}
#     # A hosted one; the key comes from the environment:
#     openai: {{api: openai, apiKey: "${{OPENAI_API_KEY}}"}}
# channels:
#   # Where agent replies are delivered (deliver: true); the bot token from @BotFather:
#   telegram: {{botToken: "${{TELEGRAM_BOT_TOKEN}}", defaultTo: "-1001234567890"}}
# session:
#   lastRoute: {{channel: telegram, to: "-1001234567890"}}
# tools:
#   # MCP servers whose tools runs may be granted (hookwise tools list shows them):
#   mcpServers:
#     github: {{command: github-mcp, args: [stdio], env: {{GITHUB_TOKEN: "${{GITHUB_TOKEN}}"}}}}
#     monitoring: {{url: "http://127.0.0.1:9400/mcp", headers: {{Authorization: "Bearer ${{MON_TOKEN}}"}}}}
#   maxCallsPerRun: 8          # calls past it are not made; the run still replies
#   callTimeoutSeconds: 30     # one call; the run's timeoutSeconds bounds the whole loop
#   maxResultBytes: 65536      # a longer result is cut, with a marker the model sees
# For production (PostgreSQL, several workers, a proxy in front) see examples/production.yaml
# and the manual's deployment page (docs/deployment.md).
"""


class StarterExists(Exception):
    """The target file exists; `hookwise init` never overwrites."""


def new_token() -> str:
    """A fresh token: 32 random bytes, URL-safe (43 characters)."""
    return secrets.token_urlsafe(32)


def starter_config(hook_token: str, admin_token: str) -> str:
    """The starter file's text with these tokens."""
    return _TEMPLATE.format(hook_token=hook_token, admin_token=admin_token)


def write_starter(path: Path) -> None:
    """Create `path` (mode 0600) with fresh tokens. Raises `StarterExists` when it exists,
    `OSError` when it cannot be written."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise StarterExists(f"{path} already exists; not overwritten") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(starter_config(new_token(), new_token()))
