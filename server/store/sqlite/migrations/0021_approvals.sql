-- hookwise store, version 21: approvals (server/store/approvals.py). A run whose model asked for
-- a call that needs a person's approval is parked: state 'awaiting_approval', its conversation so
-- far in runs.parked (JSON), one approvals row per gated call. A decision is a conditional update
-- of its row (WHERE state = 'pending'); refused decisions are rows of approval_refusals.
ALTER TABLE runs ADD COLUMN parked TEXT;
CREATE TABLE approvals (
    approval_id      TEXT PRIMARY KEY,
    run_id           TEXT NOT NULL,
    seq              INTEGER NOT NULL,
    call_id          TEXT NOT NULL,
    server           TEXT NOT NULL,
    tool             TEXT NOT NULL,
    arguments        TEXT NOT NULL,
    arguments_digest TEXT NOT NULL,
    token_hash       TEXT NOT NULL UNIQUE,
    state            TEXT NOT NULL,
    created_at       REAL NOT NULL,
    expires_at       REAL NOT NULL,
    decided_at       REAL,
    decided_by       TEXT,
    via              TEXT,
    agent_id         TEXT,
    rule_id          TEXT,
    session_key      TEXT,
    sender           TEXT,
    verified         INTEGER NOT NULL
);
CREATE INDEX approvals_run ON approvals (run_id, seq);
CREATE INDEX approvals_pending ON approvals (state, expires_at);
CREATE TABLE approval_refusals (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    approval_id TEXT,
    at          REAL NOT NULL,
    by          TEXT NOT NULL,
    via         TEXT NOT NULL,
    reason      TEXT NOT NULL
);
CREATE INDEX approval_refusals_of ON approval_refusals (approval_id, at);
-- A run awaiting approval is active: its session's later runs wait behind it (the claim's
-- session check), so the partial index of active runs takes it in.
DROP INDEX runs_lane;
CREATE INDEX runs_lane ON runs (session_key, state, seq)
    WHERE state IN ('queued', 'running', 'held', 'awaiting_approval');
