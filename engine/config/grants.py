"""Tool grants: which MCP tools a run may see and call.

A grant is a list of `server.tool` entries (`*` as the tool name grants every tool of the server),
written on a mapping (`hooks.mappings[].tools`), on an agent (`agents.list[].tools`) or in
`agents.defaults.tools`. Grants are closed by default: no list, no tools. A mapped run gets
exactly its mapping's grant, never its agent's by inheritance; an `/agent` run and the agent's
heartbeats get the agent's.

This module checks the entries (shape at load; an unknown server is a warning, since the
server's list is only known once connected) and answers `allows(server, tool)`. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import attrs

from ..errors import ConfigIssue

#: an MCP server's name as written under `tools.mcpServers` (it prefixes its tools' names)
SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")
_TOOL = re.compile(r"[^\s]{1,128}")


@attrs.frozen
class Grant:
    """The tools a run may use: whole servers (`server.*`) and single tools (`server.tool`)."""

    servers: frozenset[str] = frozenset()
    tools: frozenset[tuple[str, str]] = frozenset()

    @classmethod
    def parse(cls, entries: Iterable[str] | None) -> Grant:
        """The grant of well-formed entries (malformed ones are dropped: `check` reports them)."""
        servers: set[str] = set()
        tools: set[tuple[str, str]] = set()
        for entry in entries or ():
            split = split_entry(entry)
            if split is None:
                continue
            server, tool = split
            if tool == "*":
                servers.add(server)
            else:
                tools.add((server, tool))
        return cls(frozenset(servers), frozenset(tools))

    def __bool__(self) -> bool:
        return bool(self.servers or self.tools)

    def allows(self, server: str, tool: str) -> bool:
        return server in self.servers or (server, tool) in self.tools

    @property
    def server_names(self) -> frozenset[str]:
        """Every server the grant names."""
        return self.servers | {s for s, _ in self.tools}


NO_TOOLS = Grant()


def split_entry(entry: object) -> tuple[str, str] | None:
    """`server.tool` -> (server, tool); None when malformed. The tool part may hold dots."""
    if not isinstance(entry, str):
        return None
    server, dot, tool = entry.strip().partition(".")
    if not dot or not SERVER_NAME.fullmatch(server) or not _TOOL.fullmatch(tool):
        return None
    return server, tool


def check_grant(
    entries: Iterable[str] | None, where: str, servers: Iterable[str] | None
) -> tuple[list[ConfigIssue], list[str]]:
    """Problems of a grant at `where` (its key path): a malformed entry is an issue; a server
    not under `tools.mcpServers` (when `servers` is given) is a warning."""
    issues: list[ConfigIssue] = []
    warnings: list[str] = []
    known = None if servers is None else frozenset(servers)
    for i, entry in enumerate(entries or ()):
        split = split_entry(entry)
        if split is None:
            issues.append(
                ConfigIssue(
                    f"{where}[{i}]",
                    "must be server.tool or server.* (a server of tools.mcpServers)",
                )
            )
        elif known is not None and split[0] not in known:
            listed = ", ".join(sorted(known)) or "none"
            warnings.append(
                f"{where}[{i}]: {entry!r} names the unknown MCP server {split[0]!r}"
                f" (tools.mcpServers: {listed}); it grants nothing"
            )
    return issues, warnings
