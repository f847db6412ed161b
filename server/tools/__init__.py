"""The tool tier: MCP servers as supervised children (stdio) or HTTP peers of the gateway process.

`host.ToolHost` is what the run loop sees: the tools a grant offers, and a call with limits.
`connection.McpConnection` owns one server's session (one per server per process, connected
lazily, restarted with back-off); `results` turns an MCP tool result into the text a model sees.
"""
