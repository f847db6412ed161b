-- hookwise store, version 14: the request log keeps the provider's event type
-- (X-GitHub-Event, a Stripe event's type) and delivery id (X-GitHub-Delivery, a Stripe event's
-- id) where the path's signature scheme names them.
ALTER TABLE request_log ADD COLUMN event_type text;
ALTER TABLE request_log ADD COLUMN delivery_id text;
