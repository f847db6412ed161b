-- hookwise store, version 6: the admin API. Mirrors migrations/sqlite/0006_admin.sql.
-- Every listing walks an index newest first (no sort): one index per filter, (x, seq), and one
-- on each creation time, from which `since`/`until` become bounds on seq.
-- The request log links to what a request created, runs link back, and retries are recorded.
ALTER TABLE request_log ADD COLUMN request_id text;
ALTER TABLE request_log ADD COLUMN event_ids text;
ALTER TABLE request_log ADD COLUMN run_ids text;
CREATE UNIQUE INDEX request_log_id ON request_log (request_id);
CREATE INDEX request_log_status ON request_log (status, seq);
CREATE INDEX request_log_rule ON request_log (rule_id, seq);
CREATE INDEX request_log_at ON request_log (at, seq);

ALTER TABLE runs ADD COLUMN request_id text;
CREATE INDEX runs_rule ON runs (rule_id, seq);
CREATE INDEX runs_channel ON runs (channel, seq);
CREATE INDEX runs_created ON runs (created_at, seq);
CREATE INDEX runs_agent_seq ON runs (agent_id, seq);  -- 0005 has (agent_id, state, seq): not in seq order

CREATE INDEX events_session ON events (session, seq);
CREATE INDEX events_created ON events (created_at, seq);

CREATE INDEX deliveries_state ON deliveries (state, seq);
CREATE INDEX deliveries_channel ON deliveries (channel, seq);
CREATE INDEX deliveries_created ON deliveries (created_at, seq);
DROP INDEX deliveries_run;
CREATE INDEX deliveries_run ON deliveries (run_id, seq);

CREATE INDEX heartbeats_started ON heartbeats (started_at, seq);

-- who sent a failed run or delivery back to the queue, and when
CREATE TABLE retries (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind       text NOT NULL,
    target_id  text NOT NULL,
    from_state text NOT NULL,
    error      text,
    attempts   integer NOT NULL,
    actor      text NOT NULL,
    at         double precision NOT NULL
);
CREATE INDEX retries_target ON retries (target_id);

-- raw requests kept for replay (hooks.retainPayloads; off by default): the body and the headers
-- without auth headers, the query without `token`; never in the request log
CREATE TABLE payloads (
    request_id text PRIMARY KEY,
    path       text NOT NULL,
    query      text NOT NULL,
    headers    text NOT NULL,
    body       bytea NOT NULL,
    created_at double precision NOT NULL
);
CREATE INDEX payloads_created ON payloads (created_at);
