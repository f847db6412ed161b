-- hookwise store, version 1: system events, agent runs, idempotency keys, request log.
CREATE TABLE events (
    seq         INTEGER PRIMARY KEY,
    event_id    TEXT NOT NULL UNIQUE,
    session     TEXT NOT NULL,
    text        TEXT NOT NULL,
    source      TEXT NOT NULL,
    mode        TEXT NOT NULL,
    trusted     INTEGER NOT NULL DEFAULT 0,
    created_at  REAL NOT NULL,
    consumed_at REAL
);
CREATE INDEX events_pending ON events (session, consumed_at, seq);

CREATE TABLE runs (
    seq              INTEGER PRIMARY KEY,
    run_id           TEXT NOT NULL UNIQUE,
    session_key      TEXT NOT NULL,
    name             TEXT NOT NULL,
    message          TEXT NOT NULL,
    rule_id          TEXT,
    state            TEXT NOT NULL DEFAULT 'queued',
    wake_mode        TEXT NOT NULL,
    deliver          INTEGER NOT NULL,
    channel          TEXT NOT NULL,
    recipient        TEXT,
    model            TEXT,
    thinking         TEXT,
    timeout_seconds  REAL,
    fallback_channel TEXT,
    allow_unsafe     INTEGER NOT NULL DEFAULT 0,
    attempts         INTEGER NOT NULL DEFAULT 0,
    created_at       REAL NOT NULL,
    started_at       REAL,
    finished_at      REAL,
    reply            TEXT,
    error            TEXT,
    model_used       TEXT,
    input_tokens     INTEGER,
    output_tokens    INTEGER
);
CREATE INDEX runs_state ON runs (state, seq);
CREATE INDEX runs_session ON runs (session_key, seq);

CREATE TABLE idempotency_keys (
    key         TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    status      INTEGER NOT NULL,
    body        BLOB NOT NULL,
    created_at  REAL NOT NULL
);
CREATE INDEX idempotency_created ON idempotency_keys (created_at);

CREATE TABLE request_log (
    seq     INTEGER PRIMARY KEY,
    at      REAL NOT NULL,
    path    TEXT NOT NULL,
    status  INTEGER NOT NULL,
    client  TEXT,
    size    INTEGER NOT NULL,
    action  TEXT,
    rule_id TEXT,
    code    TEXT
);
