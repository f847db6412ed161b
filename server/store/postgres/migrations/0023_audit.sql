-- hookwise store, version 23: the audit log of operator actions (server/store/audit.py): who,
-- when, from where, what, what it touched, the outcome. Never a token or a payload. Listed newest
-- first by `seq`, filtered by actor, action or outcome (each index ends in seq), windowed by
-- time (`audit_at`); pruned by `retention.audit`.
CREATE TABLE IF NOT EXISTS audit (
    seq     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      double precision NOT NULL,
    actor   text NOT NULL,
    via     text NOT NULL,
    client  text NOT NULL,
    action  text NOT NULL,
    targets text NOT NULL,
    outcome text NOT NULL,
    status  integer NOT NULL,
    code    text
);
CREATE INDEX IF NOT EXISTS audit_at ON audit (at, seq);
CREATE INDEX IF NOT EXISTS audit_actor ON audit (actor, seq);
CREATE INDEX IF NOT EXISTS audit_action ON audit (action, seq);
CREATE INDEX IF NOT EXISTS audit_outcome ON audit (outcome, seq);
