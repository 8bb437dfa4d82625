"""The served doors: plain HTTP routes (app.py), MCP (mcp/) and the browser UI (ui.py)."""
