-- hookwise store, version 22: trace context (issue 37, server/telemetry). A run keeps the W3C
-- `traceparent` of the request that created it, so that whichever process executes it (after a
-- restart, or another gateway) continues the request's trace; the request log keeps the trace id
-- of each request (32 hex digits). Both NULL when tracing is off.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS trace text;
ALTER TABLE request_log ADD COLUMN IF NOT EXISTS trace_id text;
