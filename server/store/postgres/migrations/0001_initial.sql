-- hookwise store, version 1: system events, agent runs, idempotency keys, request log.
-- Mirrors migrations/sqlite/0001_initial.sql: same tables, columns and indexes; times are epoch
-- seconds (double precision), flags are booleans.
CREATE TABLE events (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id    text NOT NULL UNIQUE,
    session     text NOT NULL,
    text        text NOT NULL,
    source      text NOT NULL,
    mode        text NOT NULL,
    trusted     boolean NOT NULL DEFAULT false,
    created_at  double precision NOT NULL,
    consumed_at double precision
);
CREATE INDEX events_pending ON events (session, consumed_at, seq);

CREATE TABLE runs (
    seq              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id           text NOT NULL UNIQUE,
    session_key      text NOT NULL,
    name             text NOT NULL,
    message          text NOT NULL,
    rule_id          text,
    state            text NOT NULL DEFAULT 'queued',
    wake_mode        text NOT NULL,
    deliver          boolean NOT NULL,
    channel          text NOT NULL,
    recipient        text,
    model            text,
    thinking         text,
    timeout_seconds  double precision,
    fallback_channel text,
    allow_unsafe     boolean NOT NULL DEFAULT false,
    attempts         integer NOT NULL DEFAULT 0,
    created_at       double precision NOT NULL,
    started_at       double precision,
    finished_at      double precision,
    reply            text,
    error            text,
    model_used       text,
    input_tokens     bigint,
    output_tokens    bigint
);
CREATE INDEX runs_state ON runs (state, seq);
CREATE INDEX runs_session ON runs (session_key, seq);

CREATE TABLE idempotency_keys (
    key         text PRIMARY KEY,
    fingerprint text NOT NULL,
    status      integer NOT NULL,
    body        bytea NOT NULL,
    created_at  double precision NOT NULL
);
CREATE INDEX idempotency_created ON idempotency_keys (created_at);

CREATE TABLE request_log (
    seq     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      double precision NOT NULL,
    path    text NOT NULL,
    status  integer NOT NULL,
    client  text,
    size    bigint NOT NULL,
    action  text,
    rule_id text,
    code    text
);
