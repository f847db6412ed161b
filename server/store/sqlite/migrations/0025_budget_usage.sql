-- hookwise store, version 25: running totals of budgets. What the model calls of a mapping or an
-- agent spent, per bucket of 60 seconds (by the call's start): a budget's spend is the sum of
-- the whole buckets of its window plus the calls of the window's first partial bucket, read
-- from model_calls (server/store/modelcalls.py, SPEND_FAST). Written in the same transaction
-- as each model-call record. `seq` orders the rows for retention (pruned with
-- `retention.runs`, by `bucket`).
CREATE TABLE IF NOT EXISTS budget_usage (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    kind   TEXT NOT NULL,
    name   TEXT NOT NULL,
    bucket REAL NOT NULL,
    tokens INTEGER NOT NULL,
    cost   REAL NOT NULL,
    UNIQUE (kind, name, bucket)
);
-- the records stored before this version, in the order of their buckets
INSERT INTO budget_usage (kind, name, bucket, tokens, cost)
SELECT kind, name, bucket, SUM(tokens), SUM(cost) FROM (
    SELECT 'agent' AS kind, agent_id AS name, CAST(started_at / 60 AS INTEGER) * 60.0 AS bucket,
           COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0) AS tokens,
           COALESCE(cost, 0) AS cost
    FROM model_calls
    UNION ALL
    SELECT 'mapping', rule_id, CAST(started_at / 60 AS INTEGER) * 60.0,
           COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0), COALESCE(cost, 0)
    FROM model_calls WHERE rule_id IS NOT NULL
) AS calls
GROUP BY kind, name, bucket
HAVING SUM(tokens) <> 0 OR SUM(cost) <> 0
ORDER BY bucket, kind, name;
-- An operator's temporary raise of a budget (`POST /api/budgets/{kind}/{name}/raise`,
-- `hookwise budgets raise`): its limits (NULL: the configured one) until `until`, in every process.
CREATE TABLE IF NOT EXISTS budget_raises (
    kind      TEXT NOT NULL,
    name      TEXT NOT NULL,
    tokens    INTEGER,
    cost      REAL,
    until     REAL NOT NULL,
    raised_by TEXT NOT NULL,
    raised_at REAL NOT NULL,
    PRIMARY KEY (kind, name)
);
