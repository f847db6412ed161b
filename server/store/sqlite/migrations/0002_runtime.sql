-- hookwise store, version 2: session transcripts, heartbeats, deliveries, the last route.
CREATE TABLE sessions (
    session_key  TEXT PRIMARY KEY,
    last_channel TEXT,
    last_to      TEXT,
    updated_at   REAL NOT NULL
);

CREATE TABLE turns (
    seq         INTEGER PRIMARY KEY,
    session_key TEXT NOT NULL,
    role        TEXT NOT NULL,
    content     TEXT NOT NULL,
    run_id      TEXT,
    created_at  REAL NOT NULL
);
CREATE INDEX turns_session ON turns (session_key, seq);

CREATE TABLE heartbeats (
    seq          INTEGER PRIMARY KEY,
    heartbeat_id TEXT NOT NULL UNIQUE,
    reason       TEXT NOT NULL,
    state        TEXT NOT NULL,
    events       INTEGER NOT NULL,
    requested_at REAL,
    started_at   REAL NOT NULL,
    finished_at  REAL NOT NULL,
    reply        TEXT,
    error        TEXT,
    acknowledged INTEGER NOT NULL DEFAULT 0,
    model_used   TEXT
);

ALTER TABLE events ADD COLUMN heartbeat_id TEXT;

CREATE TABLE deliveries (
    seq              INTEGER PRIMARY KEY,
    delivery_id      TEXT NOT NULL UNIQUE,
    run_id           TEXT,
    heartbeat_id     TEXT,
    channel          TEXT,
    recipient        TEXT,
    fallback_channel TEXT,
    text             TEXT NOT NULL,
    state            TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT,
    message_ids      TEXT,
    created_at       REAL NOT NULL,
    updated_at       REAL NOT NULL,
    next_attempt_at  REAL NOT NULL,
    lease_until      REAL
);
CREATE INDEX deliveries_due ON deliveries (state, next_attempt_at);
CREATE INDEX deliveries_run ON deliveries (run_id);
