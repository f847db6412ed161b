-- hookwise store, version 7: the console filters the request log by path.
CREATE INDEX request_log_path ON request_log (path, seq);
-- a run's summary event is found by its source (`run:<id>`)
CREATE INDEX events_source ON events (source, seq);
-- every delivery attempt with its outcome, shown by the console; gone with its delivery
CREATE TABLE delivery_attempts (
    seq         bigserial PRIMARY KEY,
    delivery_id text NOT NULL REFERENCES deliveries (delivery_id) ON DELETE CASCADE,
    at          double precision NOT NULL,
    channel     text,
    recipient   text,
    outcome     text NOT NULL,
    error       text
);
CREATE INDEX delivery_attempts_delivery ON delivery_attempts (delivery_id, seq);
