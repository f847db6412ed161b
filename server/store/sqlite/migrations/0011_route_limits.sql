-- hookwise store, version 11: nothing to change. Per-route limits (`rateLimit`, `maxInFlight`)
-- are counted in the gateway process on SQLite (server/ingress/limits.py); PostgreSQL's
-- migration 0011 adds the tables that count them across processes. Kept so both stores number
-- their versions alike.
SELECT 1;
