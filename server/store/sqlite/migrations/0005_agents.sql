-- hookwise store, version 5: several agents. A run belongs to an agent (its lane claims only
-- its runs), a heartbeat is one agent's, and a delivery follows (and updates) the last route
-- of one agent's main session. Rows written before keep the single agent, `main`.
ALTER TABLE runs ADD COLUMN agent_id TEXT NOT NULL DEFAULT 'main';
CREATE INDEX runs_agent ON runs (agent_id, state, seq);
ALTER TABLE heartbeats ADD COLUMN agent_id TEXT NOT NULL DEFAULT 'main';
ALTER TABLE deliveries ADD COLUMN route_session TEXT NOT NULL DEFAULT 'main';
