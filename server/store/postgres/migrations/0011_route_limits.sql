-- hookwise store, version 11: per-route limits (`rateLimit`, `maxInFlight`) counted across every
-- gateway process (see server/ingress/limits.py). Each is one round trip: a function.

-- The rate: GCRA. `tat` is the theoretical arrival time (epoch seconds) of the next request
-- at the steady rate; a request is admitted while it is at most `burst` seconds ahead of now.
CREATE TABLE limit_rates (
    key text PRIMARY KEY,
    tat double precision NOT NULL
);

-- Requests being handled, per route and per gateway process (`owner`); a process's row counts
-- only while it was touched within `stale` seconds, so a dead process's count lapses.
CREATE TABLE limit_in_flight (
    key   text NOT NULL,
    owner text NOT NULL,
    n     integer NOT NULL,
    seen  double precision NOT NULL,
    PRIMARY KEY (key, owner)
);

-- 0 when admitted (and counted); otherwise the seconds until a request would be.
CREATE FUNCTION hookwise_limit_rate(
    p_key text, p_now double precision, p_step double precision, p_burst double precision
) RETURNS double precision LANGUAGE plpgsql AS $$
DECLARE
    t double precision;
BEGIN
    INSERT INTO limit_rates AS r (key, tat) VALUES (p_key, p_now + p_step)
    ON CONFLICT (key) DO UPDATE SET tat = GREATEST(r.tat, p_now) + p_step
        WHERE GREATEST(r.tat, p_now) + p_step - p_now <= p_burst
    RETURNING r.tat INTO t;
    IF FOUND THEN
        RETURN 0;
    END IF;
    SELECT r.tat INTO t FROM limit_rates AS r WHERE r.key = p_key;
    RETURN GREATEST(t + p_step - p_burst - p_now, 0.001);
END
$$;

-- True when admitted (and counted for `p_owner`); false when `p_most` are in flight already.
CREATE FUNCTION hookwise_limit_enter(
    p_key text, p_owner text, p_most integer, p_now double precision, p_stale double precision
) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    total bigint;
BEGIN
    -- two-int advisory locks: a key space apart from the leadership and migration locks
    PERFORM pg_advisory_xact_lock(1752132459, hashtext(p_key));
    SELECT COALESCE(SUM(f.n), 0) INTO total FROM limit_in_flight AS f
        WHERE f.key = p_key AND f.seen > p_now - p_stale;
    IF total >= p_most THEN
        RETURN false;
    END IF;
    INSERT INTO limit_in_flight AS f (key, owner, n, seen) VALUES (p_key, p_owner, 1, p_now)
    ON CONFLICT (key, owner) DO UPDATE
        SET n = CASE WHEN f.seen > p_now - p_stale THEN f.n + 1 ELSE 1 END, seen = p_now;
    RETURN true;
END
$$;
