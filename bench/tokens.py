"""What the MCP door costs an agent's context: tokens (characters / 4) of each answer.

    .venv/bin/python bench/tokens.py
    PYTHONPATH=/path/to/older/checkout/src .venv/bin/python bench/tokens.py   # the same figures, before

Drives the real MCP server in-process (the SDK's client over `build_server(McpDoor(...))`) on the
search evaluation catalog (bench/search_eval.py: 1,472 tools), acting as an admin, and counts the
characters the model reads:

- tools/list: the four meta-tools (name, description, input schema) as the client receives them;
- search: the text of a 10-result page (and, for information, its structured content);
- whoami: the text (the structured content keeps the full record of GET /whoami: every key);
- describe_tools: the text for one 4-param tool (`k8s.pod_logs`).

Budgets: tools/list <= 500, a search page <= 300, whoami <= 80, describe_tools of a 4-param tool <= 200.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

# bench/mcp.py would shadow the mcp package: take this directory off the path, load the catalog
# generator by file.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]


def catalog_text() -> str:
    import importlib.util

    sys.path.insert(0, str(HERE))
    try:
        spec = importlib.util.spec_from_file_location("search_eval", HERE / "search_eval.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(HERE))
    text: str = module.catalog_text()
    return text


BUDGETS = {"tools/list": 500, "search page (10)": 300, "whoami": 80, "describe_tools (4 params)": 200}


def tokens(text: str) -> int:
    return round(len(text) / 4)


def measure(workdir: Path) -> dict[str, tuple[int, int | None]]:
    from mcp import Client

    from toolrun.models import Identity
    from toolrun.server.mcp.door import McpDoor, build_server
    from toolrun.service import ToolService
    from toolrun.settings import Settings

    path = workdir / "tools.yaml"
    path.write_text(catalog_text(), encoding="utf-8")
    settings = Settings.load(environ={"TOOLRUN_HOME": str(workdir / "home")})
    service = ToolService.from_paths([str(path)], settings)
    admin = Identity(username="ada", email="ada@example.com", groups=frozenset({"admin", "ops"}), anonymous=False)
    door = McpDoor(service, lambda ctx: admin)

    def text(result: Any) -> str:
        return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")

    def structured(result: Any) -> int:
        return tokens(json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":")))

    async def main() -> dict[str, tuple[int, int | None]]:
        async with Client(build_server(door)) as client:
            listed = await client.list_tools()
            tools = [t.model_dump(by_alias=True, exclude_none=True) for t in listed.tools]
            page = await client.call_tool("search", {"query": "postgres", "limit": 10})
            who = await client.call_tool("whoami", {})
            described = await client.call_tool("describe_tools", {"keys": ["k8s.pod_logs"]})
            return {
                "tools/list": (tokens(json.dumps(tools, ensure_ascii=False, separators=(",", ":"))), None),
                "search page (10)": (tokens(text(page)), structured(page)),
                "whoami": (tokens(text(who)), structured(who)),
                "describe_tools (4 params)": (tokens(text(described)), structured(described)),
            }

    return anyio.run(main)


def main() -> None:
    import toolrun

    with tempfile.TemporaryDirectory() as tmp:
        figures = measure(Path(tmp))
    print(f"toolrun from {Path(toolrun.__file__).parent}; 1,472 tools; tokens = characters / 4")
    print(f"{'answer':<28} {'text':>7} {'budget':>7} {'verdict':>8} {'structured':>11}")
    for name, (text_tokens, structured_tokens) in figures.items():
        budget = BUDGETS[name]
        verdict = "ok" if text_tokens <= budget else "OVER"
        extra = "" if structured_tokens is None else str(structured_tokens)
        print(f"{name:<28} {text_tokens:>7} {budget:>7} {verdict:>8} {extra:>11}")


if __name__ == "__main__":
    main()
