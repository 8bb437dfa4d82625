"""Builds bench/search_eval_mcp_tools.json, the tools of the third held-out set (issue 38): real tool lists of public
MCP servers that nobody here wrote, read from their repositories at the commits in SOURCES.

    .venv/bin/python bench/build_mcp_tools.py MIRRORS_DIR   # MIRRORS_DIR/<owner>+<name>/repo: bare git clones

Each source names a repository, the commit read, the file and the way its tools are written there (the servers'
generated READMEs and reference pages, or github-mcp-server's JSON snapshots of its tools). The output lists, per
tool: the server, its name, its description and its params (name, type, description), as written upstream (the
description cut at 400 characters). The queries of the set (bench/search_eval_mcp.py) were written from that file
alone. Provenance: bench/search_eval_mcp_tools.json's `sources`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

# (server, repository, commit, path or path prefix, format)
SOURCES = (
    (
        "github",
        "github/github-mcp-server",
        "64a49f34d076b6f5917dae1424521d43c7bcae84",
        "pkg/github/__toolsnaps__/",
        "snap",
    ),
    ("playwright", "microsoft/playwright-mcp", "7e0457a7cbf88823bf0146d12c46ae12c6818247", "README.md", "bullets"),
    (
        "chrome-devtools",
        "ChromeDevTools/chrome-devtools-mcp",
        "ebf58f2f4aa8f1dfbbae38e440fde4e5fef7deef",
        "docs/tool-reference.md",
        "headings",
    ),
    (
        "kubernetes",
        "containers/kubernetes-mcp-server",
        "55749981693f71c9f9a573bfab229eccd4f124ea",
        "README.md",
        "bullets",
    ),
    ("grafana", "grafana/mcp-grafana", "c6e492b39f493f7e5856eb4ab419bc918b083716", "README.md", "table"),
    *(
        (
            name,
            "modelcontextprotocol/servers",
            "76d64c822f5125032f89eb71dbdb94e42b434821",
            f"src/{name}/README.md",
            "bullets",
        )
        for name in ("filesystem", "memory", "fetch")
    ),
)

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def show(mirrors: Path, repo: str, commit: str, path: str) -> str:
    git = mirrors / repo.replace("/", "+") / "repo"
    return subprocess.run(
        ["git", "-C", str(git), "show", f"{commit}:{path}"], check=True, capture_output=True, text=True
    ).stdout


def tree(mirrors: Path, repo: str, commit: str, prefix: str) -> list[str]:
    git = mirrors / repo.replace("/", "+") / "repo"
    out = subprocess.run(
        ["git", "-C", str(git), "ls-tree", "-r", "--name-only", commit, prefix],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [p for p in out.splitlines() if p.endswith(".snap")]


def clean(text: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.replace("**", "").replace("`", "").replace("_(optional)_", "")
    return " ".join(text.split())[:400]


def snap(text: str) -> dict[str, Any]:
    tool = json.loads(text)
    props = tool.get("inputSchema", {}).get("properties", {}) or {}
    params = [
        {"name": k, "type": str(v.get("type", "string")), "description": clean(v.get("description", ""))}
        for k, v in props.items()
    ]
    return {"name": tool["name"], "description": clean(tool.get("description", "")), "params": params}


_PARAM = re.compile(
    r"^\s+- (?:\*\*|`)?([A-Za-z_][\w]*)(?:\*\*|`)?\s*\(`?([\w\[\], |]+?)`?(?:, optional)?\)[^:\-]*[:\-]?\s*(.*)$"
)


def bullets(text: str) -> list[dict[str, Any]]:
    """`- **name** - description` or `- **name**` then indented lines: a description, params as ``- `p` (type): d``."""
    tools: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        top = re.match(r"^- \*\*([a-z][a-z0-9_]*)\*\*(?:\s*[-:]\s*(.*))?$", line)
        if top:
            current = {"name": top.group(1), "description": clean(top.group(2) or ""), "params": []}
            tools.append(current)
            continue
        if current is None:
            continue
        if not line.strip():
            continue
        if not line.startswith(" "):
            current = None
            continue
        param = _PARAM.match(line)
        if param and param.group(1) not in ("Title", "Description", "Parameters", "Inputs", "Input", "Returns"):
            current["params"].append(
                {"name": param.group(1), "type": param.group(2).strip(), "description": clean(param.group(3))}
            )
            continue
        item = re.match(r"^\s+- (?:Description: )?(.*)$", line)
        if (
            item
            and not current["description"]
            and not re.match(r"(Title|Parameters|Inputs?|Read-only|Returns)\b", item.group(1))
        ):
            current["description"] = clean(item.group(1))
    return [t for t in tools if t["description"]]


def headings(text: str) -> list[dict[str, Any]]:
    """### `name`, **Description:** ..., **Parameters:** - **p** (type): d."""
    tools: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        head = re.match(r"^### `([a-z][a-z0-9_]*)`", line)
        if head:
            current = {"name": head.group(1), "description": "", "params": []}
            tools.append(current)
        elif current is not None and line.startswith("**Description:**"):
            current["description"] = clean(line.removeprefix("**Description:**"))
        elif current is not None:
            param = re.match(r"^- \*\*(\w+)\*\* \((\w+)\)[^:]*:\s*(.*)$", line)
            if param:
                current["params"].append(
                    {"name": param.group(1), "type": param.group(2), "description": clean(param.group(3))}
                )
    return [t for t in tools if t["description"]]


def table(text: str) -> list[dict[str, Any]]:
    """| `name` | category | description | ... (no params are listed)."""
    tools = []
    for line in text.splitlines():
        row = re.match(r"^\|\s*`([a-z][a-z0-9_]*)`\s*\|\s*([^|]*)\|\s*([^|]*)\|", line)
        if row and not row.group(1).startswith("mcp_") and not row.group(1).endswith("_seconds"):  # metrics
            tools.append({"name": row.group(1), "description": clean(row.group(3)), "params": []})
    return tools


def main() -> None:
    mirrors = Path(sys.argv[1])
    out: dict[str, Any] = {"sources": [], "tools": []}
    seen: set[tuple[str, str]] = set()
    for server, repo, commit, path, kind in SOURCES:
        if kind == "snap":
            found = [snap(show(mirrors, repo, commit, p)) for p in tree(mirrors, repo, commit, path)]
        else:
            found = {"bullets": bullets, "headings": headings, "table": table}[kind](show(mirrors, repo, commit, path))
        kept = 0
        for tool in found:
            if (server, tool["name"]) in seen or not _NAME.match(tool["name"]):
                continue
            seen.add((server, tool["name"]))
            out["tools"].append({"server": server, **tool})
            kept += 1
        out["sources"].append({"server": server, "repository": repo, "commit": commit, "path": path, "tools": kept})
        print(f"{server}: {kept} tools from {repo}@{commit[:10]} {path}")
    target = Path(__file__).resolve().parent / "search_eval_mcp_tools.json"
    target.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(out['tools'])} tools -> {target}")


if __name__ == "__main__":
    main()
