-- hookwise store, version 2: session transcripts, heartbeats, deliveries, the last route.
-- Mirrors migrations/sqlite/0002_runtime.sql.
CREATE TABLE sessions (
    session_key  text PRIMARY KEY,
    last_channel text,
    last_to      text,
    updated_at   double precision NOT NULL
);

CREATE TABLE turns (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_key text NOT NULL,
    role        text NOT NULL,
    content     text NOT NULL,
    run_id      text,
    created_at  double precision NOT NULL
);
CREATE INDEX turns_session ON turns (session_key, seq);

CREATE TABLE heartbeats (
    seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    heartbeat_id text NOT NULL UNIQUE,
    reason       text NOT NULL,
    state        text NOT NULL,
    events       integer NOT NULL,
    requested_at double precision,
    started_at   double precision NOT NULL,
    finished_at  double precision NOT NULL,
    reply        text,
    error        text,
    acknowledged boolean NOT NULL DEFAULT false,
    model_used   text
);

ALTER TABLE events ADD COLUMN heartbeat_id text;

CREATE TABLE deliveries (
    seq              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id      text NOT NULL UNIQUE,
    run_id           text,
    heartbeat_id     text,
    channel          text,
    recipient        text,
    fallback_channel text,
    text             text NOT NULL,
    state            text NOT NULL,
    attempts         integer NOT NULL DEFAULT 0,
    last_error       text,
    message_ids      text,
    created_at       double precision NOT NULL,
    updated_at       double precision NOT NULL,
    next_attempt_at  double precision NOT NULL,
    lease_until      double precision
);
CREATE INDEX deliveries_due ON deliveries (state, next_attempt_at);
CREATE INDEX deliveries_run ON deliveries (run_id);
