-- hookwise store, version 10: the tool calls of runs, one row per call, in order.
-- Written `started` before the call is made and rewritten with its outcome after; arguments and
-- results only where payloads are kept (hooks.retainPayloads), their size and digest always.
CREATE TABLE IF NOT EXISTS run_tool_calls (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    outcome TEXT NOT NULL,
    started_at REAL NOT NULL,
    duration_ms REAL,
    arguments TEXT,
    arguments_bytes INTEGER NOT NULL DEFAULT 0,
    arguments_digest TEXT NOT NULL DEFAULT '',
    result TEXT,
    result_bytes INTEGER,
    result_digest TEXT,
    truncated INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, seq)
);
