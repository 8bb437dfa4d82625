"""Catalogs for the tests and the bench/ scripts: where things are, writing a catalog, generating one.

    from support.catalogs import generate_catalog, write_catalog
    text = generate_catalog(10_000)   # about 5 MB of YAML, every tool valid, no warnings

`generate_catalog(n)` is deterministic: the same `n` always gives the same text. Tools cycle through
realistic shapes (exec with `| quote`, `{% if %}` blocks, list and dict params, stdin mode, curl) so a
load exercises every path a real catalog does, except fn tools (they import code).

`SLEEPERS` is the small catalog of the tests and benchmarks that hold tool processes running (`ops.sleep`,
with `unique_sleep` giving each call a command line no other test shares) beside quick ones: `ops.hi`,
`ops.echo`, and `ops.worker` (the pid of the server worker that ran it).

bench/core.py loads this file by its path: it imports nothing but the standard library.
"""

from __future__ import annotations

import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FIXTURES = ROOT / "tests" / "fixtures"


def write_catalog(directory: Path, text: str, name: str = "tools.yaml") -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


SLEEPERS = """\
group: ops
tools:
  - name: sleep
    public: true
    exec: sleep {{ seconds }}
    params:
      - {name: seconds, type: float}
  - name: hi
    public: true
    exec: printf hi
  - name: worker
    public: true
    exec: echo $PPID
  - name: echo
    public: true
    exec: printf '%s' {{ msg | quote }}
    params:
      - {name: msg, type: str}
"""


def unique_sleep(base: float) -> tuple[float, str]:
    """(seconds, marker): `base` plus a few microseconds from the clock, so the tool's command line
    (`sleep <seconds>`, the marker) is this call's alone for `pids_matching`."""
    seconds = base + time.time_ns() % 1_000_000 / 1e7
    return seconds, f"sleep {seconds!r}"


GROUPS = ("ops", "net", "db", "files", "text", "build", "cloud", "web")
VERBS = ("list", "show", "check", "count", "fetch", "render", "sync", "scan", "trace", "probe")
NOUNS = ("disks", "hosts", "users", "files", "logs", "queues", "jobs", "tables", "routes", "certs")

_LOREM = "Read-only; safe to run repeatedly."


def _tool(i: int) -> str:
    group = GROUPS[i % len(GROUPS)]
    name = f"{VERBS[i % len(VERBS)]}_{NOUNS[(i // len(VERBS)) % len(NOUNS)]}_{i}"
    shape = i % 5
    head = (
        f"  - name: {name}\n"
        f"    group: {group}\n"
        f"    groups: [{GROUPS[(i + 3) % len(GROUPS)]}, team-{i % 37}]\n"
        f"    description: |\n"
        f"      {VERBS[i % len(VERBS)].capitalize()} the {NOUNS[(i // len(VERBS)) % len(NOUNS)]} of a target "
        f"(generated tool number {i}).\n"
        f"\n"
        f"      {_LOREM}\n"
    )
    if shape == 0:
        body = (
            "    exec: ls -la {% if all %}-R{% endif %} -- {{ path | quote }}\n"
            "    timeout: 20\n"
            "    params:\n"
            "      - name: path\n"
            "        type: str\n"
            "        description: Directory to inspect.\n"
            "        example: /var/log\n"
            "      - name: all\n"
            "        type: bool\n"
            "        default: false\n"
            "        description: Recurse into subdirectories.\n"
        )
    elif shape == 1:
        body = (
            "    exec: |\n"
            "      for h in {{ hosts | quote }}; do\n"
            '        ping -c {{ count }} -W 1 -- "$h" >/dev/null && echo "$h up" || echo "$h down"\n'
            "      done\n"
            "    params:\n"
            "      - name: hosts\n"
            "        type: list\n"
            "        description: Host names or addresses.\n"
            "        example: [localhost, 127.0.0.1]\n"
            "      - name: count\n"
            "        type: int\n"
            "        default: 1\n"
            "        min: 1\n"
            "        max: 10\n"
            "        description: Pings per host.\n"
        )
    elif shape == 2:
        body = (
            "    stdin: true\n"
            "    exec: python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin), sort_keys=True))'\n"
            "    env:\n"
            "      LC_ALL: C.UTF-8\n"
            "    params:\n"
            "      - name: settings\n"
            "        type: dict\n"
            "        description: Key/value settings to render.\n"
            '        example: {"level": "info", "workers": 4}\n'
            "      - name: ratio\n"
            "        type: float\n"
            "        required: false\n"
            "        description: Optional scaling ratio.\n"
        )
    elif shape == 3:
        body = (
            "    curl: --max-time 10 --retry 2 -- {{ url | quote }}\n"
            "    allow_warnings: [curl-url-host]\n"
            "    limits:\n"
            "      cpu: 5\n"
            "      memory: 256M\n"
            "    params:\n"
            "      - name: url\n"
            "        type: str\n"
            '        pattern: "https?://.+"\n'
            "        description: The URL to fetch.\n"
            "        example: http://127.0.0.1:8080/healthz\n"
        )
    else:
        body = (
            "    exec: grep -c {% if ignore_case %}-i{% endif %} -e {{ pattern | quote }} -- {{ file | quote }}\n"
            "    params:\n"
            "      - name: pattern\n"
            "        type: str\n"
            "        description: Regular expression to count.\n"
            "        example: ERROR\n"
            "      - name: file\n"
            "        type: str\n"
            "        description: File to search.\n"
            "        example: /var/log/syslog\n"
            "      - name: ignore_case\n"
            "        type: bool\n"
            "        default: false\n"
            "        enum: [true, false]\n"
            "        description: Match without regard to case.\n"
        )
    return head + body


def generate_catalog(n: int) -> str:
    """YAML text of a valid catalog with `n` tools (about 520 bytes each)."""
    parts = ["# Generated by tests/support/catalogs.py\nversion: 1\ngroup: gen\ndefaults:\n  timeout: 30\ntools:\n"]
    parts.extend(_tool(i) for i in range(n))
    return "".join(parts)
