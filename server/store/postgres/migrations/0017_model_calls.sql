-- hookwise store, version 17: accounting and breakers of model calls.
-- One row per model call of a run or a heartbeat (`owner_id`), by attempt of the run, in order: the model, how it
-- ended (`ok`, `error`, `skipped` by an open breaker), the error class, the tokens the provider
-- reported and the cost from the price table (NULL: no price, or no usage reported).
-- `seq` orders the rows for retention (pruned with `retention.runs`, by `started_at`).
CREATE TABLE IF NOT EXISTS model_calls (
    seq BIGSERIAL PRIMARY KEY,
    owner_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    call_seq INTEGER NOT NULL,
    model TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    rule_id TEXT,
    outcome TEXT NOT NULL,
    error_class TEXT,
    status INTEGER,
    error TEXT,
    started_at DOUBLE PRECISION NOT NULL,
    duration_ms DOUBLE PRECISION,
    input_tokens INTEGER,
    output_tokens INTEGER,
    cache_read_tokens INTEGER,
    cache_write_tokens INTEGER,
    cost DOUBLE PRECISION,
    UNIQUE (owner_id, attempt, call_seq)
);
-- A circuit breaker per provider/model, shared by every process of the store: no row is a
-- closed breaker without recent failures.
CREATE TABLE IF NOT EXISTS model_breakers (
    model TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    failures INTEGER NOT NULL,
    window_start DOUBLE PRECISION NOT NULL,
    open_until DOUBLE PRECISION,
    probe_until DOUBLE PRECISION,
    last_error_class TEXT,
    updated_at DOUBLE PRECISION NOT NULL
);
