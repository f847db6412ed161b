-- hookwise store, version 26: budgets by sender (`budget: {by: sender}`). Who the door verified
-- sent a run (`<scheme>#<n>`, `token`, `source:<name>`, `replay`; see
-- server/store/senders.py), stamped on the run when it is accepted and on each of its model
-- calls, so that spend is summed per sender. NULL on the rows from before this version (they
-- count as `none`). The running totals of `budget_usage` gain the kinds `mapping-sender` and
-- `agent-sender`, named `<mapping or agent>/<sender>`; a pause of those kinds holds the runs
-- of one sender only.
ALTER TABLE runs ADD COLUMN sender TEXT;
ALTER TABLE model_calls ADD COLUMN sender TEXT;
-- a sender's spend in the first, partial minute of its window is read from the records by the
-- same expression (server/store/modelcalls.py, SPEND_COLUMNS)
CREATE INDEX IF NOT EXISTS model_calls_rule_sender_spend ON model_calls ((rule_id || '/' || sender), started_at);
CREATE INDEX IF NOT EXISTS model_calls_agent_sender_spend ON model_calls ((agent_id || '/' || sender), started_at);
-- the calls of runs stored before this version are of the sender `none` (heartbeats have none)
UPDATE model_calls SET sender = 'none' WHERE owner_id IN (SELECT run_id FROM runs);
-- and so are their running totals
INSERT INTO budget_usage (kind, name, bucket, tokens, cost)
SELECT kind, name, bucket, SUM(tokens), SUM(cost) FROM (
    SELECT 'agent-sender' AS kind, agent_id || '/' || sender AS name, floor(started_at / 60) * 60 AS bucket,
           COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0) AS tokens,
           COALESCE(cost, 0) AS cost
    FROM model_calls WHERE sender IS NOT NULL
    UNION ALL
    SELECT 'mapping-sender', rule_id || '/' || sender, floor(started_at / 60) * 60,
           COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0), COALESCE(cost, 0)
    FROM model_calls WHERE rule_id IS NOT NULL AND sender IS NOT NULL
) AS calls
GROUP BY kind, name, bucket
HAVING SUM(tokens) <> 0 OR SUM(cost) <> 0
ORDER BY bucket, kind, name;
-- a run accepted while its sender is held by a budget of its mapping or agent is written `held`.
-- The pause found is locked (FOR KEY SHARE) until the accept commits: a release (which deletes
-- the pause, then sends its held runs back) committed meanwhile would not see this run and leave
-- it held with no pause to lift; it waits instead, and then sees it. A pause deleted first (not
-- yet committed) makes this accept wait, and then find no pause: the run is queued.
CREATE OR REPLACE FUNCTION hookwise_hold_paused_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = 'queued' THEN
        PERFORM 1 FROM pauses
        WHERE (kind = 'agent' AND name = NEW.agent_id)
           OR (kind = 'mapping' AND name = NEW.rule_id)
           OR (kind = 'agent-sender' AND name = NEW.agent_id || '/' || COALESCE(NEW.sender, 'none'))
           OR (kind = 'mapping-sender' AND name = NEW.rule_id || '/' || COALESCE(NEW.sender, 'none'))
        FOR KEY SHARE;
        IF FOUND THEN
            NEW.state := 'held';
        END IF;
    END IF;
    RETURN NEW;
END
$$;
