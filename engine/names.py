"""The default agent's names, which the engine and the store agree on: its id, and its main
session's key. A module of its own (no imports) so that the store's records, which SQLite's
writer process unpickles, do not load the configuration models with them."""

#: the id of the only agent when `agents.list` is absent
DEFAULT_AGENT_ID = "main"
#: the default agent's main session key (every other agent's is `agent:<id>:main`)
DEFAULT_MAIN_SESSION = "main"
