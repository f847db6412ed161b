"""Mapped hooks' rules: where they come from, each compiled once (conditions, JSONPaths,
templates), the rule set's selection and evaluation per request, `forEach` fan-out, and what
`hookwise rules test` prints."""
