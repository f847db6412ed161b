-- hookwise store, version 19: coalescing per key (server/store/coalesce.py).
-- A coalescing run is written at its first request with `not_before` (the end of its window),
-- which the claim respects, its mapping's rendered `coalesce_key` and `coalesce_until` (the first
-- request plus maxWait: `not_before` is never pushed past it). Later requests of the same mapping
-- and key join it while it waits and its window is open, under a row lock: `coalesced` counts
-- the requests folded into it, `coalesce_parts` keeps a `keep: all` digest's payloads (JSON).
ALTER TABLE runs ADD COLUMN IF NOT EXISTS not_before double precision;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS coalesce_key text;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS coalesce_until double precision;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS coalesced integer;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS coalesce_parts text;
CREATE INDEX IF NOT EXISTS runs_coalesce ON runs (rule_id, coalesce_key, seq)
    WHERE coalesce_key IS NOT NULL AND state IN ('queued', 'held');
