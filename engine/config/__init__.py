"""The configuration: the file's loading and models, structuring with key paths, and the policies
it declares (agents, channels, sessions, models, tool grants, limits, mappings as written, the Gmail
watcher's block, the store URL), with the JSON Schema drawn from the models."""
