"""toolrun: write tools once in a YAML catalog, call them from the terminal, HTTP, MCP and a browser."""

__version__ = "0.1.0"
