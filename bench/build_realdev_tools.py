"""Builds bench/search_eval_realdev_tools.json, the tools of the real-dev set (issue 38): tool lists of public MCP
servers not used by the held-out `mcp` set, read from their repositories at the commits in SOURCES.

    .venv/bin/python bench/build_realdev_tools.py MIRRORS_DIR   # MIRRORS_DIR/<owner>+<name>/repo: bare git clones

Each source names a repository, the commit read, the file(s) and the way its tools are written there: a README's
list (`numbered`: "1. `name`" then indented "- description" and "- `param` (type): d" lines, as the reference
servers of modelcontextprotocol/servers write them; `dash`: "- `name` - description" or "- `name`: description"),
a JSON list of tool definitions (`json`), an OpenAPI spec (`openapi`: one tool per operation, as Notion's server
makes them), or Python sources whose `@....tool()` functions are the tools (`python`: the function's name with the
file's prefix, its docstring and its typed arguments). The output lists, per tool: the server, its name, its
description and its params (name, type, description), as written upstream (the description cut at 400
characters; Markdown marks, emoji and <examples>/<hints> blocks dropped). The queries of the set
(bench/search_eval_realdev.py) were written from that file alone.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

# modelcontextprotocol/servers just before "Archive unmaintained servers" (d53d6cc7)
_ARCHIVED = "1f705677a930ec618b7a16d87d00cee7db747ff2"
_SERVERS_HEAD = "76d64c822f5125032f89eb71dbdb94e42b434821"  # the commit the mcp set read

# (server, repository, commit, path or path prefix, format, name prefix)
SOURCES: tuple[tuple[str, str, str, str, str, str], ...] = (
    *(
        (name, "modelcontextprotocol/servers", _ARCHIVED, f"src/{name}/README.md", "numbered", "")
        for name in ("slack", "gitlab", "google-maps", "puppeteer", "brave-search", "sqlite", "postgres", "gdrive")
    ),
    ("aws-kb", "modelcontextprotocol/servers", _ARCHIVED, "src/aws-kb-retrieval-server/README.md", "numbered", ""),
    ("git", "modelcontextprotocol/servers", _SERVERS_HEAD, "src/git/README.md", "numbered", ""),
    ("time", "modelcontextprotocol/servers", _SERVERS_HEAD, "src/time/README.md#Available Tools", "dash", ""),
    (
        "sentry",
        "getsentry/sentry-mcp",
        "4a109327ef3cc3b20b36ac18edbce68d37010565",
        "packages/mcp-core/src/toolDefinitions.json",
        "json",
        "",
    ),
    (
        "notion",
        "makenotion/notion-mcp-server",
        "1d38420769c8a1fe2d583ff1e7d2d108d4eb0b30",
        "scripts/notion-openapi.json",
        "openapi",
        "API-",
    ),
    (
        "mongodb",
        "mongodb-js/mongodb-mcp-server",
        "36a405e33817577f0c5a34d6d9479c0285fac5e4",
        "README.md#Tool List",
        "dash",
        "",
    ),
    (
        "supabase",
        "supabase-community/supabase-mcp",
        "17fb90f8655ad1ce7ee320614d22eb68bb26e510",
        "README.md#Tools",
        "dash",
        "",
    ),
    (
        "elasticsearch",
        "elastic/mcp-server-elasticsearch",
        "a2b050d07c1e0af19974f63efa20f4553cb43b2b",
        "README.md#Available tools",
        "dash",
        "",
    ),
    ("redis", "redis/mcp-redis", "5945b0b5b098c9a1882075a161a6a58f23de81ed", "src/tools/", "python", ""),
    (
        "jira",
        "sooperset/mcp-atlassian",
        "436b37e4854aacad0aee3ce47baafb6fdb4162a7",
        "src/mcp_atlassian/servers/jira.py",
        "python",
        "jira_",
    ),
    (
        "confluence",
        "sooperset/mcp-atlassian",
        "436b37e4854aacad0aee3ce47baafb6fdb4162a7",
        "src/mcp_atlassian/servers/confluence.py",
        "python",
        "confluence_",
    ),
)

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


def git(mirrors: Path, repo: str, *args: str) -> str:
    path = mirrors / repo.replace("/", "+") / "repo"
    return subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True, text=True).stdout


def clean(text: str) -> str:
    text = re.sub(r"<(examples|hints)>.*?</\1>", "", text, flags=re.S)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.replace("**", "").replace("`", "")
    text = "".join(c for c in text if ord(c) <= 0xFFFF)  # emoji: toolrun's catalog loader refuses some in a big file
    return " ".join(text.split())[:400]


_PARAM = re.compile(r"^\s*-\s+(?:Input:\s*)?`([A-Za-z_]\w*)`\s*\(([^)]*)\)\s*:?\s*(.*)$")


def numbered(text: str) -> list[dict[str, Any]]:
    """ "1. `name`" (or "- **name**") then indented "- description", "- `p` (type, ...): d" lines."""
    tools: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        top = re.match(r"^(?:\d+\.|-)\s+(?:\*\*)?`?([a-z][a-z0-9_]*)`?(?:\*\*)?\s*$", line)
        if top:
            current = {"name": top.group(1), "description": "", "params": []}
            tools.append(current)
            continue
        if current is None or not line.strip():
            continue
        if not line.startswith(" "):
            current = None
            continue
        param = _PARAM.match(line)
        if param:
            kind = param.group(2).split(",")[0].strip()
            current["params"].append({"name": param.group(1), "type": kind, "description": clean(param.group(3))})
            continue
        item = re.match(r"^\s+-\s+(.*)$", line)
        if (
            item
            and not current["description"]
            and not re.match(r"(Inputs?|Returns|Required|Optional)\b", item.group(1))
        ):
            current["description"] = clean(item.group(1))
    return [t for t in tools if t["description"]]


def section(text: str, heading: str) -> str:
    """The part of a Markdown text under the heading `heading` (up to the next heading of its level or above)."""
    out: list[str] = []
    level = 0
    for line in text.splitlines():
        head = re.match(r"^(#+)\s+(.*)$", line)
        if level and head and len(head.group(1)) <= level:
            break
        if level:
            out.append(line)
        elif head and head.group(2).strip().endswith(heading):
            level = len(head.group(1))
    return "\n".join(out)


def dash(text: str) -> list[dict[str, Any]]:
    """ "- `name` - description" or "- `name`: description", then any indented "- `p` (type): d" lines."""
    tools: list[dict[str, Any]] = []
    for line in text.splitlines():
        row = re.match(r"^- `([a-z][a-z0-9_-]*)`(?:\s+-\s+|:\s+)(.+)$", line)
        if row:
            tools.append({"name": row.group(1), "description": clean(row.group(2)), "params": []})
            continue
        param = _PARAM.match(line)
        if param and line.startswith(" ") and tools:
            kind = param.group(2).split(",")[0].strip()
            tools[-1]["params"].append({"name": param.group(1), "type": kind, "description": clean(param.group(3))})
    return tools


def json_tools(text: str) -> list[dict[str, Any]]:
    tools = []
    for tool in json.loads(text):
        props = tool.get("inputSchema", {}).get("properties", {}) or {}
        params = [{"name": k, "type": _schema_type(v), "description": clean(_schema_desc(v))} for k, v in props.items()]
        tools.append({"name": tool["name"], "description": clean(tool.get("description", "")), "params": params})
    return tools


def _schema_type(schema: dict[str, Any]) -> str:
    if "type" in schema:
        return str(schema["type"])
    for option in schema.get("anyOf", []):
        if option.get("type") not in (None, "null"):
            return str(option["type"])
    return "string"


def _schema_desc(schema: dict[str, Any]) -> str:
    if schema.get("description"):
        return str(schema["description"])
    for option in schema.get("anyOf", []):
        if option.get("description"):
            return str(option["description"])
    return ""


def openapi(text: str, prefix: str) -> list[dict[str, Any]]:
    spec = json.loads(text)
    tools = []
    for ops in spec["paths"].values():
        for op in ops.values():
            if not isinstance(op, dict) or "operationId" not in op:
                continue
            params = [
                {
                    "name": p["name"],
                    "type": _schema_type(p.get("schema", {})),
                    "description": clean(p.get("description", "")),
                }
                for p in op.get("parameters", [])
                if "name" in p
            ]
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
            for name, prop in (body.get("properties") or {}).items():
                params.append({"name": name, "type": _schema_type(prop), "description": clean(_schema_desc(prop))})
            desc = op.get("summary", "")
            if op.get("description") and op["description"] != desc:
                desc = f"{desc}. {op['description']}" if desc else op["description"]
            tools.append({"name": prefix + op["operationId"], "description": clean(desc), "params": params})
    return tools


def python(text: str, prefix: str) -> list[dict[str, Any]]:
    """Functions decorated `@<x>.tool(...)`: the name (prefixed), the docstring up to Args/Returns, the typed
    arguments with their `Field(description=...)` or the docstring's `Args:` line."""
    tools = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if not any(_is_tool(d) for d in node.decorator_list):
            continue
        doc = ast.get_docstring(node) or ""
        head = re.split(r"\n\s*(?:Args|Returns|Raises|Example|Examples):", doc)[0]
        args_doc = dict(
            re.findall(r"^\s+(\w+)(?: \([^)]*\))?:\s*(.+)$", doc.split("Args:", 1)[1] if "Args:" in doc else "", re.M)
        )
        params = []
        for arg in node.args.args:
            if arg.arg in ("ctx", "self"):
                continue
            kind, desc = _annotation(arg.annotation)
            params.append({"name": arg.arg, "type": kind, "description": clean(desc or args_doc.get(arg.arg, ""))})
        tools.append({"name": prefix + node.name, "description": clean(head), "params": params})
    return [t for t in tools if t["description"]]


def _is_tool(decorator: ast.expr) -> bool:
    call = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(call, ast.Attribute) and call.attr == "tool"


def _annotation(node: ast.expr | None) -> tuple[str, str]:
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Annotated":
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        desc = ""
        for extra in elts[1:]:
            if isinstance(extra, ast.Call):
                for kw in extra.keywords:
                    if kw.arg == "description":
                        try:
                            desc = str(ast.literal_eval(kw.value))
                        except ValueError:
                            desc = ""
        return _type_name(elts[0]), desc
    return _type_name(node), ""


def _type_name(node: ast.expr | None) -> str:
    text = ast.unparse(node) if node is not None else "str"
    for word, kind in (("list", "array"), ("List", "array"), ("dict", "object"), ("Dict", "object"),
                       ("bool", "boolean"), ("int", "integer"), ("float", "number")):  # fmt: skip
        if re.search(rf"\b{word}\b", text):
            return kind
    return "string"


def main() -> None:
    mirrors = Path(sys.argv[1])
    out: dict[str, Any] = {"sources": [], "tools": []}
    for server, repo, commit, path, kind, prefix in SOURCES:
        if kind == "python":
            files = [
                p for p in git(mirrors, repo, "ls-tree", "-r", "--name-only", commit, path).split() if p.endswith(".py")
            ]
            found = [t for f in files for t in python(git(mirrors, repo, "show", f"{commit}:{f}"), prefix)]
        else:
            file, _, heading = path.partition("#")
            text = git(mirrors, repo, "show", f"{commit}:{file}")
            text = section(text, heading) if heading else text
            found = (
                {
                    "numbered": numbered,
                    "dash": dash,
                    "json": json_tools,
                }[kind](text)
                if kind != "openapi"
                else openapi(text, prefix)
            )
        seen: set[str] = set()
        for tool in found:
            if tool["name"] in seen or not _NAME.match(tool["name"]) or not tool["description"]:
                continue
            seen.add(tool["name"])
            out["tools"].append({"server": server, **tool})
        out["sources"].append(
            {"server": server, "repository": repo, "commit": commit, "path": path, "tools": len(seen)}
        )
        print(f"{server}: {len(seen)} tools from {repo}@{commit[:10]} {path}")
    target = Path(__file__).resolve().parent / "search_eval_realdev_tools.json"
    target.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(out['tools'])} tools -> {target}")


if __name__ == "__main__":
    main()
