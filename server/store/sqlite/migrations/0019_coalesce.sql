-- hookwise store, version 19: coalescing per key (server/store/coalesce.py).
-- A coalescing run is written at its first request with `not_before` (the end of its window),
-- which the claim respects, its mapping's rendered `coalesce_key` and `coalesce_until` (the first
-- request plus maxWait: `not_before` is never pushed past it). Later requests of the same mapping
-- and key join it while it waits and its window is open: `coalesced` counts the requests folded
-- into it, `coalesce_parts` keeps a `keep: all` digest's payloads (JSON).
ALTER TABLE runs ADD COLUMN not_before REAL;
ALTER TABLE runs ADD COLUMN coalesce_key TEXT;
ALTER TABLE runs ADD COLUMN coalesce_until REAL;
ALTER TABLE runs ADD COLUMN coalesced INTEGER;
ALTER TABLE runs ADD COLUMN coalesce_parts TEXT;
-- the waiting coalescing runs only (a run leaves it when claimed); the join repeats its WHERE
-- term (server/store/sqlite/coalesce.py)
CREATE INDEX runs_coalesce ON runs (rule_id, coalesce_key, seq)
    WHERE coalesce_key IS NOT NULL AND state IN ('queued', 'held');
