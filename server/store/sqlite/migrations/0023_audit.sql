-- hookwise store, version 23: the audit log of operator actions (server/store/audit.py): who,
-- when, from where, what, what it touched, the outcome. Never a token or a payload. Listed newest
-- first by `seq`, filtered by actor, action or outcome (each index ends in seq: SQLite appends the rowid), windowed by
-- time (`audit_at`); pruned by `retention.audit`.
CREATE TABLE IF NOT EXISTS audit (
    seq     INTEGER PRIMARY KEY,
    at      REAL NOT NULL,
    actor   TEXT NOT NULL,
    via     TEXT NOT NULL,
    client  TEXT NOT NULL,
    action  TEXT NOT NULL,
    targets TEXT NOT NULL,
    outcome TEXT NOT NULL,
    status  INTEGER NOT NULL,
    code    TEXT
);
CREATE INDEX IF NOT EXISTS audit_at ON audit (at);
CREATE INDEX IF NOT EXISTS audit_actor ON audit (actor);
CREATE INDEX IF NOT EXISTS audit_action ON audit (action);
CREATE INDEX IF NOT EXISTS audit_outcome ON audit (outcome);
