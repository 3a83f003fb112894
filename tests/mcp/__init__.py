"""MCP: the transports with real clients, what `/mcp` lets through, and what the HTTP layer reads of
a message."""
