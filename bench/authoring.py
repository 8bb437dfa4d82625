"""Catalog-author commands: shell completion of tool keys and params, and `toolrun test` (issue 15).

    .venv/bin/python bench/authoring.py            # about half a minute on 2 cores
    .venv/bin/python bench/authoring.py --quick    # fewer runs: a smoke run

A script, not a test: it prints figures next to their baselines and targets and exits 0 (the
verdict column says whether a target was met). Timing is `hyperfine -N` (3 warm-up runs; the
completion index and catalog cache are warm, as for a user at a shell); cpu = user + system per run.

  (a) completion: the answer bash gets for `toolrun call ops.<TAB>` (keys), `toolrun call
      ops.disk_usage p<TAB>` (params) and `unit=<TAB>` (enum values), on a 200-tool catalog, against
      `python -c pass` (the floor) and Typer's own completion of a subcommand (what every TAB
      would cost without the fast path). Target: under 150 ms.
  (b) `toolrun test` of 50 examples (echo commands, 4 at a time) against 50 sequential
      `toolrun call`s of the same tool: the per-example cost of one process running them all.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TOOLRUN = str(Path(sys.executable).parent / "toolrun")
TARGET_MS = 150.0


def catalog(n: int, examples: int = 0) -> str:
    lines = ["version: 1", "group: ops", "tools:"]
    lines += [
        "  - name: disk_usage",
        "    description: Report the **disk** usage of a path.",
        "    exec: du -sh -- {{ path | quote }}",
        "    params:",
        "      - {name: path, type: str, description: Where to look}",
        "      - {name: unit, type: str, enum: [kilo, mega, giga], default: kilo}",
    ]
    for i in range(n - 1):
        lines += [
            f"  - name: tool_{i:04d}",
            f"    description: Generated tool number {i}.",
            "    exec: echo {{ msg | quote }}",
            "    params:",
            "      - {name: msg, type: str}",
        ]
        if i == 0 and examples:
            lines.append("    examples:")
            for j in range(examples):
                lines += [f"      - args: {{msg: m{j}}}", f'        expect: {{stdout: "m{j}\\n"}}']
    return "\n".join(lines) + "\n"


def hyperfine(commands: dict[str, list[str]], env: dict[str, str], cwd: Path, runs: int) -> dict[str, dict[str, float]]:
    """name -> {mean, median, cpu} in ms, from `hyperfine -N --export-json`."""
    out = cwd / "hyperfine.json"
    argv = ["hyperfine", "-N", "--style", "none", "--warmup", "3", "--runs", str(runs), "--export-json", str(out)]
    for name, command in commands.items():
        argv += ["-n", name, " ".join(command)]
    subprocess.run(argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    figures = {}
    for result in json.loads(out.read_text())["results"]:
        figures[result["command"]] = {
            "mean": result["mean"] * 1000,
            "median": result["median"] * 1000,
            "cpu": (result["user"] + result["system"]) * 1000,
        }
    return figures


def complete_env(words: str, cword: int) -> list[str]:
    return ["env", "_TOOLRUN_COMPLETE=complete_bash", f"COMP_WORDS='{words}'", f"COMP_CWORD={cword}", TOOLRUN]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if not shutil.which("hyperfine"):
        sys.exit("hyperfine is not installed (apt-get install hyperfine)")
    runs = 10 if args.quick else 30
    with tempfile.TemporaryDirectory(prefix="toolrun-bench-") as tmp:
        work = Path(tmp)
        (work / "tools.yaml").write_text(catalog(200, examples=50), encoding="utf-8")
        env = {"PATH": "/usr/bin:/bin", "TOOLRUN_HOME": str(work / "home"), "HOME": str(work)}
        commands = {  # hyperfine's warm-up runs build the completion index and the catalog cache
            "keys": complete_env("toolrun call ops.", 2),
            "params": complete_env("toolrun call ops.disk_usage p", 3),
            "enum values": complete_env("toolrun call ops.disk_usage unit =", 4),
            "typer (subcommand)": complete_env("toolrun ca", 1),
            "python -c pass": [sys.executable, "-c", "pass"],
        }
        figures = hyperfine(commands, env, work, runs)
        floor = figures["python -c pass"]["median"]
        print("(a) completion, bash protocol, 200-tool catalog (ms; median of", runs, "runs)")
        print(f"  {'answer':22} {'median':>8} {'cpu':>8} {'x floor':>8}  verdict (< {TARGET_MS:g} ms)")
        for name, f in figures.items():
            verdict = (
                ""
                if name in ("python -c pass", "typer (subcommand)")
                else ("ok" if f["median"] < TARGET_MS else "MISSED")
            )
            print(f"  {name:22} {f['median']:8.1f} {f['cpu']:8.1f} {f['median'] / floor:8.2f}  {verdict}")

        test = [TOOLRUN, "test", "-k", "tool_0000"]
        calls = ["sh", "-c", f"'for i in $(seq 50); do {TOOLRUN} call ops.tool_0000 msg=m >/dev/null; done'"]
        pair = {"toolrun test (50 examples)": test, "50 x toolrun call": calls}
        suite = hyperfine(pair, env, work, max(3, runs // 6))
        one = suite["toolrun test (50 examples)"]["median"]
        many = suite["50 x toolrun call"]["median"]
        print("\n(b) toolrun test, 50 examples of an echo tool (ms; median)")
        print(f"  toolrun test            {one:8.1f}  ({one / 50:.1f} per example)")
        print(f"  50 x toolrun call       {many:8.1f}  ({many / 50:.1f} per call)   ratio {many / one:.1f}x")


if __name__ == "__main__":
    main()
