"""The MCP door: the SDK server and its fast path, sessions, streams, stdio, and the meta-tools."""
