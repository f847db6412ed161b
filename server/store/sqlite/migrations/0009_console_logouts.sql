-- hookwise store, version 9: a console logout ends its session for every gateway process (the
-- session cookie is signed, not stored: the ended sessions are). Kept a day, longer than a
-- session lives (12 h).
CREATE TABLE console_logouts (
    session_id TEXT PRIMARY KEY,
    ended_at   REAL NOT NULL
);
CREATE INDEX console_logouts_ended ON console_logouts (ended_at);
