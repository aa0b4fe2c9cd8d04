"""The Model Context Protocol, both ways: use MCP servers' tools (client), offer ours (server)."""
