-- hookwise store, version 12: session lanes. At most one run of a session runs at a time, in
-- acceptance order: the claim takes a queued run only when no run of its session is `running`
-- and none older is still waiting (`queued` or `held`). Both checks are seeks in this index of
-- the active runs only (finished runs leave it), however long a session's history.
CREATE INDEX runs_lane ON runs (session_key, state, seq)
    WHERE state IN ('queued', 'running', 'held');

-- Pauses: a mapping (`rule_id`) or an agent whose runs and wakes are held. A run accepted while
-- its mapping or agent is paused is written `held` (the trigger); pausing holds the queued ones,
-- resuming sends them back to `queued` in their order (server/store/postgres/lanes.py).
-- `session` is an agent's main session (its wakes stay pending while it is paused).
CREATE TABLE pauses (
    kind      TEXT NOT NULL,
    name      TEXT NOT NULL,
    session   TEXT,
    reason    TEXT,
    paused_by TEXT NOT NULL,
    paused_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (kind, name)
);
CREATE FUNCTION hookwise_hold_paused_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = 'queued' AND EXISTS (SELECT 1 FROM pauses
        WHERE (kind = 'agent' AND name = NEW.agent_id)
           OR (kind = 'mapping' AND name = NEW.rule_id)) THEN
        NEW.state := 'held';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER runs_held_when_paused BEFORE INSERT ON runs
    FOR EACH ROW EXECUTE FUNCTION hookwise_hold_paused_run();
