"""Tool grants: which MCP tools a run may see and call.

A grant is a list of `server.tool` entries (`*` as the tool name grants every tool of the server),
written on a mapping (`hooks.mappings[].tools`), on an agent (`agents.list[].tools`) or in
`agents.defaults.tools`. Grants are closed by default: no list, no tools. A mapped run gets
exactly its mapping's grant, never its agent's by inheritance; an `/agent` run and the agent's
heartbeats get the agent's.

This module checks the entries (shape at load; an unknown server is a warning, since the
server's list is only known once connected) and answers `allows(server, tool)`. Pure.

Grants that ask (issue 34): an entry may be `{tool: server.tool, approve: true}`, and `approve:
[glob, ...]` beside a `tools` list names granted tools (`fnmatch` globs over `server.tool`) whose
calls wait for a person's decision; `needs_approval(server, tool)` answers for a granted tool.
`with_approvals(tools, approve)` folds both into one tuple of entries, the form `Grant.parse` reads.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence

import attrs

from ..errors import ConfigIssue
from .convert import converter

#: an MCP server's name as written under `tools.mcpServers` (it prefixes its tools' names)
SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")
_TOOL = re.compile(r"[^\s]{1,128}")


@attrs.frozen
class GrantEntry:
    """`{tool: server.tool, approve: true}`: a grant entry whose calls may need approval."""

    tool: str
    approve: bool = False


class ApproveGlob(str):
    """One glob of an `approve:` list, carried among a grant's entries (it grants nothing)."""


#: one entry of a `tools` list as configured
Entry = str | GrantEntry


def with_approvals(
    tools: Sequence[Entry] | None, approve: Sequence[str] | None
) -> tuple[Entry, ...]:
    """A `tools` list and its `approve` globs as one tuple of entries (what `Grant.parse` reads)."""
    return (*(tools or ()), *(ApproveGlob(g) for g in approve or ()))


@attrs.frozen
class Grant:
    """The tools a run may use: whole servers (`server.*`) and single tools (`server.tool`), and
    the globs (`server.tool` patterns) of those whose calls wait for approval."""

    servers: frozenset[str] = frozenset()
    tools: frozenset[tuple[str, str]] = frozenset()
    gated: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, entries: Iterable[Entry] | None) -> Grant:
        """The grant of well-formed entries (malformed ones are dropped: `check` reports them)."""
        servers: set[str] = set()
        tools: set[tuple[str, str]] = set()
        gated: set[str] = set()
        for entry in entries or ():
            if isinstance(entry, ApproveGlob):
                gated.add(entry.strip())
                continue
            name = entry.tool if isinstance(entry, GrantEntry) else entry
            split = split_entry(name)
            if split is None:
                continue
            server, tool = split
            if tool == "*":
                servers.add(server)
            else:
                tools.add((server, tool))
            if isinstance(entry, GrantEntry) and entry.approve:
                gated.add(f"{server}.{tool}")
        return cls(frozenset(servers), frozenset(tools), frozenset(gated))

    def __bool__(self) -> bool:
        return bool(self.servers or self.tools)

    def allows(self, server: str, tool: str) -> bool:
        return server in self.servers or (server, tool) in self.tools

    def needs_approval(self, server: str, tool: str) -> bool:
        """Whether a call of this (granted) tool waits for a person's decision."""
        name = f"{server}.{tool}"
        return any(fnmatch.fnmatchcase(name, glob) for glob in self.gated)

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
    entries: Iterable[Entry] | None,
    where: str,
    servers: Iterable[str] | None,
    approve: Sequence[str] | None = None,
) -> tuple[list[ConfigIssue], list[str]]:
    """Problems of a grant at `where` (its key path): a malformed entry is an issue; a server
    not under `tools.mcpServers` (when `servers` is given) is a warning; so is an `approve`
    glob (at `where` with `approve` for `tools`) that matches no entry's server."""
    issues: list[ConfigIssue] = []
    warnings: list[str] = []
    known = None if servers is None else frozenset(servers)
    listed = list(entries or ())
    beside = where.rsplit("tools", 1)[0] + "approve"
    for i, glob in enumerate(approve or ()):
        _server, dot, _ = glob.strip().partition(".")
        if not dot or not _TOOL.fullmatch(glob.strip()):
            issues.append(
                ConfigIssue(f"{beside}[{i}]", "must be a server.tool glob (server.merge_*)")
            )
        elif not listed:
            warnings.append(f"{beside}[{i}]: {glob!r} gates nothing: {where} grants no tool")
    for i, raw in enumerate(listed):
        entry = raw.tool if isinstance(raw, GrantEntry) else raw
        split = split_entry(entry)
        if split is None:
            issues.append(
                ConfigIssue(
                    f"{where}[{i}]",
                    "must be server.tool or server.* (a server of tools.mcpServers)",
                )
            )
        elif known is not None and split[0] not in known:
            names = ", ".join(sorted(known)) or "none"
            warnings.append(
                f"{where}[{i}]: {entry!r} names the unknown MCP server {split[0]!r}"
                f" (tools.mcpServers: {names}); it grants nothing"
            )
    return issues, warnings


def _structure_entry(value: object, _: object) -> Entry:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return converter.structure(value, GrantEntry)
    raise ValueError("must be server.tool, server.* or {tool: server.tool, approve: true}")


converter.register_structure_hook_func(lambda tp: tp == Entry, _structure_entry)
