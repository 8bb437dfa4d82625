"""The served doors: plain HTTP routes (app.py), MCP (mcp.py) and the browser UI (ui.py)."""
