"""Alerts that reach a person: the `alerts:` rules evaluated over the store (`kinds`), opened,
deduplicated, notified through the channels as durable deliveries and resolved by one process
at a time (`evaluator`); acknowledged and retried through the admin API, the CLI and the
console."""
