"""`approvals:`: who may decide a tool call that waits for approval, where the request is sent,
how long it waits and what a timeout means (see docs/approvals.md).

An approver is `<channel>:<user id>` (`telegram:123456`, `slack:U024BE7LH`, `console:alice`): in a
channel, only a listed approver's decision counts, checked on the user id the channel verified.
An operator holding the admin token may always decide (console, admin API, CLI). `via` is a
channel target as deliveries name them (`telegram:ops-chat`); unset, requests are only listed
(admin API, console, CLI). Telegram and Slack ask with buttons; any other channel gets the
request as text with a signed link to the approval's console page (`publicUrl`). Pure.
"""

from __future__ import annotations

import re
from typing import Literal

import attrs

from ..errors import ConfigIssue
from .durations import Duration

_APPROVER = re.compile(r"[a-z][a-z0-9_-]{0,31}:[^\s]{1,128}")


@attrs.frozen
class ApprovalsConfig:
    """`approvals.*`: approvers, the channel asked, the wait and its outcome."""

    approvers: tuple[str, ...] = ()
    via: str | None = None
    timeout: Duration = Duration(3600)
    on_timeout: Literal["deny", "approve"] = "deny"
    #: the gateway's public base URL (`https://hooks.example.com`): requests sent to a channel
    #: without buttons carry a signed link to the approval's console page under it
    public_url: str | None = None

    def check(self) -> list[ConfigIssue]:
        """Problems of the block (key paths under `approvals`)."""
        issues = [
            ConfigIssue(
                f"approvals.approvers[{i}]", "must be <channel>:<user id>, e.g. telegram:123"
            )
            for i, a in enumerate(self.approvers)
            if not _APPROVER.fullmatch(a)
        ]
        if self.timeout <= 0:
            issues.append(ConfigIssue("approvals.timeout", "must be positive"))
        if self.public_url is not None and not self.public_url.startswith(("http://", "https://")):
            issues.append(ConfigIssue("approvals.publicUrl", "must be an http:// or https:// URL"))
        if self.via is not None and ":" not in self.via:
            issues.append(ConfigIssue("approvals.via", "must be a channel target: <channel>:<to>"))
        return issues

    def approves(self, channel: str, user_id: str) -> bool:
        """Whether `user_id`, verified by `channel`, is a listed approver."""
        return f"{channel}:{user_id}" in self.approvers
