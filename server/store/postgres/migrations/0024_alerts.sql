-- hookwise store, version 24: alerts (`alerts:` rules, `hookwise.server.alerts`). One row per
-- alert: its rule and key, its state (open -> acknowledged -> resolved, or open -> resolved),
-- its times, how often it was seen while active, and the ids of the requests, runs and
-- deliveries behind it (JSON). At most one active (not resolved) alert per rule and key: the
-- partial unique index is the deduplication, whichever process evaluates.
CREATE TABLE IF NOT EXISTS alerts (
    seq              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    alert_id         TEXT NOT NULL UNIQUE,
    rule             TEXT NOT NULL,
    kind             TEXT NOT NULL,
    alert_key        TEXT NOT NULL,
    state            TEXT NOT NULL,
    summary          TEXT NOT NULL,
    value            DOUBLE PRECISION NOT NULL,
    threshold        DOUBLE PRECISION NOT NULL,
    seen             INTEGER NOT NULL DEFAULT 1,
    opened_at        DOUBLE PRECISION NOT NULL,
    last_seen_at     DOUBLE PRECISION NOT NULL,
    acked_at         DOUBLE PRECISION,
    acked_by         TEXT,
    resolved_at      DOUBLE PRECISION,
    subjects         TEXT NOT NULL,
    notifications    TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS alerts_active ON alerts (rule, alert_key)
    WHERE state <> 'resolved';
CREATE INDEX IF NOT EXISTS alerts_state ON alerts (state, seq);
CREATE INDEX IF NOT EXISTS alerts_rule ON alerts (rule, seq);
CREATE INDEX IF NOT EXISTS alerts_opened ON alerts (opened_at);
