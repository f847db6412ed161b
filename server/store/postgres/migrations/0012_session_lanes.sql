-- hookwise store, version 12: session lanes. At most one run of a session runs at a time, in
-- acceptance order: the claim takes a queued run only when no run of its session is `running`
-- and none older is still waiting (`queued` or `held`). Both checks are seeks in this index of
-- the active runs only (finished runs leave it), however long a session's history.
CREATE INDEX runs_lane ON runs (session_key, state, seq)
    WHERE state IN ('queued', 'running', 'held');
