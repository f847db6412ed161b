"""Approvals as stored (`approvals`, `approval_refusals`, migration 0021): the records both
stores speak, and the transitions they make.

A run whose model asked for calls that need approval is *parked*: its state becomes
`awaiting_approval`, its conversation so far is written in `runs.parked` (JSON, see
`hookwise.server.runtime.parking`), and one `approvals` row per gated call is written `pending`,
all in one transaction, only while the run is still `running`. The run then holds nothing: no
lane slot, no lease; its session's later runs keep waiting (the claims' session check counts an
`awaiting_approval` run as one that runs).

A decision is one conditional update (`WHERE state = 'pending' AND expires_at > now`): a second,
late or replayed decision changes no row, and is written to `approval_refusals` instead. In the
same transaction, once no approval of its run is pending, the run goes back to `queued` (only
from `awaiting_approval`): the lane claims it like any run, in any process, and resumes it from
`runs.parked`. Timeouts are the same update made by a periodic sweep, so two processes sweeping
at once decide each approval once.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

ApprovalState = Literal["pending", "approved", "denied", "timed_out"]
Decision = Literal["approved", "denied"]
APPROVAL_STATES: tuple[str, ...] = ("pending", "approved", "denied", "timed_out")

COLUMNS = (
    "approval_id, run_id, seq, call_id, server, tool, arguments, arguments_digest, token_hash,"
    " state, created_at, expires_at, decided_at, decided_by, via, agent_id, rule_id,"
    " session_key, sender, verified"
)
WIDTH = COLUMNS.count(",") + 1
REFUSAL_COLUMNS = "approval_id, at, by, via, reason"


@attrs.frozen
class ApprovalRecord:
    """One tool call waiting for (or given) a person's decision."""

    approval_id: str
    run_id: str
    seq: int
    #: the model's id of the call (its result answers it)
    call_id: str
    server: str
    tool: str
    #: the call's arguments (JSON object): needed to make the call once approved
    arguments: str
    arguments_digest: str
    #: SHA-256 of the single-use token that channels and links carry (never the token)
    token_hash: str
    state: str
    created_at: float
    expires_at: float
    decided_at: float | None = None
    #: who decided: `console:<name>`, `admin`, `telegram:<id>`, `slack:<id>`, `timeout`
    decided_by: str | None = None
    #: through what: `api`, `cli`, `console`, `link`, `telegram`, `slack`, `sweep`
    via: str | None = None
    agent_id: str | None = None
    rule_id: str | None = None
    session_key: str | None = None
    #: who sent the hook that started the run (the source as the request log names it)
    sender: str | None = None
    #: whether the hook's signature was verified
    verified: bool = False

    def row(self) -> tuple[Any, ...]:
        return attrs.astuple(self, recurse=False)

    @classmethod
    def from_row(cls, row: Any) -> ApprovalRecord:
        values = list(row)
        values[WIDTH - 1] = bool(values[WIDTH - 1])
        return cls(*values)

    def to_json(self, *, arguments: bool) -> dict[str, Any]:
        """As the admin API shows it; the arguments only where payloads are kept."""
        return {
            "approvalId": self.approval_id,
            "runId": self.run_id,
            "seq": self.seq,
            "server": self.server,
            "tool": self.tool,
            "arguments": self.arguments if arguments else None,
            "argumentsDigest": self.arguments_digest,
            "state": self.state,
            "createdAt": self.created_at,
            "expiresAt": self.expires_at,
            "decidedAt": self.decided_at,
            "decidedBy": self.decided_by,
            "via": self.via,
            "agentId": self.agent_id,
            "rule": self.rule_id,
            "sessionKey": self.session_key,
            "sender": self.sender,
            "verified": self.verified,
        }


@attrs.frozen
class Refusal:
    """A decision refused (forged, replayed, late, second, not an approver): it changed nothing."""

    approval_id: str | None
    at: float
    by: str
    via: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "approvalId": self.approval_id,
            "at": self.at,
            "by": self.by,
            "via": self.via,
            "reason": self.reason,
        }


@attrs.frozen
class Decided:
    """What a decision did: whether it counted, and whether it released its run."""

    counted: bool
    resumed: bool
    #: the approval as it is now (None: no such approval)
    approval: ApprovalRecord | None = None


@attrs.frozen
class PendingStats:
    """The pending approvals: how many, and the creation time of the oldest."""

    count: int
    oldest_created_at: float | None
