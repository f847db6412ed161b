-- hookwise store, version 4: the auth-failure throttle, shared by every gateway process.
-- Mirrors the auth_failures table of migrations/sqlite/0004_signals_and_auth.sql (PostgreSQL
-- needs no `signals` table: LISTEN/NOTIFY carries the signals).
CREATE TABLE auth_failures (
    client       text PRIMARY KEY,
    window_start double precision NOT NULL,
    failures     integer NOT NULL,
    locked_until double precision
);
