-- hookwise store, version 13: where a run's outcome is posted when it ends (its mapping's
-- `callback`: the configured URL, or the one taken from the payload and judged at the door).
ALTER TABLE runs ADD COLUMN callback_url TEXT;
