-- hookwise store, version 6: the admin API.
-- Every listing walks an index newest first (no sort): one index per filter, ending in seq
-- (SQLite adds the rowid to each index itself, so (x) serves `x = ? ORDER BY seq DESC`), and one
-- on each creation time, from which `since`/`until` become bounds on seq.
-- The request log links to what a request created, runs link back, and retries are recorded.
ALTER TABLE request_log ADD COLUMN request_id TEXT;
ALTER TABLE request_log ADD COLUMN event_ids TEXT;
ALTER TABLE request_log ADD COLUMN run_ids TEXT;
CREATE UNIQUE INDEX request_log_id ON request_log (request_id);
CREATE INDEX request_log_status ON request_log (status);
CREATE INDEX request_log_rule ON request_log (rule_id);
CREATE INDEX request_log_at ON request_log (at);

ALTER TABLE runs ADD COLUMN request_id TEXT;
CREATE INDEX runs_rule ON runs (rule_id);
CREATE INDEX runs_channel ON runs (channel);
CREATE INDEX runs_created ON runs (created_at);
CREATE INDEX runs_agent_seq ON runs (agent_id);  -- 0005 has (agent_id, state, seq): not in seq order

CREATE INDEX events_session ON events (session);
CREATE INDEX events_created ON events (created_at);

CREATE INDEX deliveries_state ON deliveries (state);
CREATE INDEX deliveries_channel ON deliveries (channel);
CREATE INDEX deliveries_created ON deliveries (created_at);

CREATE INDEX heartbeats_started ON heartbeats (started_at);

-- who sent a failed run or delivery back to the queue, and when
CREATE TABLE retries (
    seq        INTEGER PRIMARY KEY,
    kind       TEXT NOT NULL,
    target_id  TEXT NOT NULL,
    from_state TEXT NOT NULL,
    error      TEXT,
    attempts   INTEGER NOT NULL,
    actor      TEXT NOT NULL,
    at         REAL NOT NULL
);
CREATE INDEX retries_target ON retries (target_id);

-- raw requests kept for replay (hooks.retainPayloads; off by default): the body and the headers
-- without auth headers, the query without `token`; never in the request log
CREATE TABLE payloads (
    request_id TEXT PRIMARY KEY,
    path       TEXT NOT NULL,
    query      TEXT NOT NULL,
    headers    TEXT NOT NULL,
    body       BLOB NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX payloads_created ON payloads (created_at);
