-- hookwise store, version 7: the console filters the request log by path.
CREATE INDEX request_log_path ON request_log (path);
-- a run's summary event is found by its source (`run:<id>`)
CREATE INDEX events_source ON events (source);
-- every delivery attempt with its outcome, shown by the console; gone with its delivery
CREATE TABLE delivery_attempts (
    seq         INTEGER PRIMARY KEY,
    delivery_id TEXT NOT NULL REFERENCES deliveries (delivery_id) ON DELETE CASCADE,
    at          REAL NOT NULL,
    channel     TEXT,
    recipient   TEXT,
    outcome     TEXT NOT NULL,
    error       TEXT
);
CREATE INDEX delivery_attempts_delivery ON delivery_attempts (delivery_id);
