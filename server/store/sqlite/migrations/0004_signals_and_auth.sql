-- hookwise store, version 4: what several gateway processes share beyond the queue:
-- signals (a cheap "something changed" counter per topic) and the auth-failure throttle.
CREATE TABLE signals (
    topic TEXT PRIMARY KEY,
    seq   INTEGER NOT NULL
);

CREATE TABLE auth_failures (
    client       TEXT PRIMARY KEY,
    window_start REAL NOT NULL,
    failures     INTEGER NOT NULL,
    locked_until REAL
);
