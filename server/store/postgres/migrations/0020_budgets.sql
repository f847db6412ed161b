-- hookwise store, version 20: budgets. What a mapping's or an agent's runs spent in a window is
-- the sum of their `model_calls` since the window's start (server/store/postgres/modelcalls.py,
-- `spend`): a seek in one of these indexes, whatever the table's size.
CREATE INDEX IF NOT EXISTS model_calls_rule_spend ON model_calls (rule_id, started_at);
CREATE INDEX IF NOT EXISTS model_calls_agent_spend ON model_calls (agent_id, started_at);
-- An operator's release of a budget (`hookwise resume` of a lane held by its budget): the budget
-- is not checked for that mapping or agent until `until` (the end of the window it was spent in).
CREATE TABLE IF NOT EXISTS budget_waivers (
    kind      TEXT NOT NULL,
    name      TEXT NOT NULL,
    until     DOUBLE PRECISION NOT NULL,
    waived_by TEXT NOT NULL,
    PRIMARY KEY (kind, name)
);
