-- hookwise store, version 4: the auth-failure throttle, shared by every gateway process.
-- `failures` holds the times (epoch seconds) of the failures still inside the window;
-- `updated_at` is the last failure, so that prune() can forget idle clients.
CREATE TABLE auth_failures (
    client       text PRIMARY KEY,
    failures     jsonb NOT NULL DEFAULT '[]',
    locked_until double precision,
    updated_at   double precision NOT NULL
);
CREATE INDEX auth_failures_updated ON auth_failures (updated_at);
