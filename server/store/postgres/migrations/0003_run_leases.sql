-- hookwise store, version 3: a lease on claimed runs, so that several processes can share the
-- queue and a dead process's runs are taken over once its lease has expired.
ALTER TABLE runs ADD COLUMN lease_until double precision;
CREATE INDEX runs_lease ON runs (state, lease_until);
