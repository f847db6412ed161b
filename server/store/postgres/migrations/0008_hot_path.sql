-- hookwise store, version 8: one index fewer to keep up on every run written.
-- runs_lease (state, lease_until) served only the recovery of expired leases, which runs_state
-- (state, seq) serves as well (the running runs are few: at most the run lanes' concurrency).
DROP INDEX IF EXISTS runs_lease;
