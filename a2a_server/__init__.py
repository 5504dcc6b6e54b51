"""The gateway as an A2A server: the agent card and the JSON-RPC endpoint (A2A 1.0 and 0.3)."""
