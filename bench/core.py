"""Core benchmarks: toolrun against the bare thing it wraps (a script, not a test; see bench/README.md).

    .venv/bin/python bench/core.py            # everything, about a minute on 2 cores
    .venv/bin/python bench/core.py --quick    # fewer calls, runs and tools: a smoke run
    .venv/bin/python bench/core.py --importtime   # also: the slowest imports of `--help` and `call`

Three figures, each next to its baseline and target (issue 2):
  (a) in-process exec call overhead: ToolService.call of an echo tool vs a bare
      asyncio.create_subprocess_exec('/bin/sh', '-c', 'echo hi') + communicate()
  (b) wall time of `toolrun call bench.echo msg=hi` and `toolrun --help` vs `python -c pass`
      (hyperfine when installed, else a timing loop)
  (c) load time and memory of a generated 10,000-tool catalog, cold and warm, vs a bare
      yaml.load(..., Loader=yaml.CSafeLoader) of the same file

Every measurement that could disturb another (child watchers, caches, imports) runs in a fresh
subprocess of this script (`--child ...`). Everything toolrun writes goes under a temporary
TOOLRUN_HOME. Exit status is 0 whether or not targets are met; the verdict column says.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
TOOLRUN = str(Path(sys.executable).parent / "toolrun")

ECHO_CATALOG = """\
version: 1
group: bench
tools:
  - name: echo
    description: Print a message back.
    exec: echo {{ msg | quote }}
    params:
      - name: msg
        type: str
"""

# -- (c) the generated catalog ------------------------------------------------------------------


def _inline_catalog(n: int) -> str:
    """A realistic n-tool catalog: quoted templates, {% if %} blocks, 2-3 params, long descriptions."""
    verbs = ("list", "show", "check", "restart", "rotate", "fetch", "prune", "sync", "scan", "report")
    nouns = ("disk", "logs", "service", "queue", "cert", "backup", "user", "dns", "cache", "node")
    lines = ["version: 1", "group: gen", "defaults:", "  timeout: 30", "tools:"]
    for i in range(n):
        verb, noun = verbs[i % len(verbs)], nouns[(i // len(verbs)) % len(nouns)]
        group = f"team{i % 25}"
        lines += [
            f"  - name: {verb}_{noun}_{i}",
            f"    groups: [{group}, {noun}]",
            f"    public: {'true' if i % 7 == 0 else 'false'}",
            "    description: |",
            f"      {verb.capitalize()} the {noun} of a host (tool number {i}).",
            "",
            f"      Runs on the target host and prints a **{noun}** report; `verbose` adds detail,",
            "      and `limit` caps the number of lines printed.",
        ]
        if i % 3 == 0:
            lines += [
                f"    exec: {verb}-{noun} --host {{{{ host | quote }}}}"
                " {% if verbose %}--verbose{% endif %} {% if limit %}| head -n {{ limit }}{% endif %}",
                "    params:",
                "      - {name: host, type: str, description: Target host name., example: web-1}",
                "      - {name: verbose, type: bool, default: false, description: More detail.}",
                "      - {name: limit, type: int, required: false, min: 1, description: Lines to keep.}",
            ]
        elif i % 3 == 1:
            lines += [
                "    exec: |",
                f'      for t in {{{{ targets | quote }}}}; do {verb}-{noun} "$t"; done',
                "      {% if dry_run %}echo '(dry run)'{% endif %}",
                "    params:",
                "      - {name: targets, type: list, description: Targets to visit., example: [a, b]}",
                "      - {name: dry_run, type: bool, default: true, description: Only print what would change.}",
            ]
        else:
            lines += [
                f"    curl: -X POST --max-time 5 https://api.example.invalid/{noun}/{{{{ name | quote }}}}",
                "    stdin: true",
                "    params:",
                "      - {name: name, type: str, pattern: '^[a-z0-9-]+$', description: Object name., example: x-1}",
                "      - {name: labels, type: dict, required: false, description: Labels to set.}",
                "      - {name: ttl, type: float, default: 1.5, description: Seconds to live.}",
            ]
    return "\n".join(lines) + "\n"


def generate_catalog_text(n: int) -> tuple[str, str]:
    """The catalog YAML and where it came from: tests/support/catalogs.py when present, else the inline one."""
    gen_file = ROOT / "tests" / "support" / "catalogs.py"
    if gen_file.is_file():
        import importlib.util

        spec = importlib.util.spec_from_file_location("toolrun_catalog_gen", gen_file)
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            fn = getattr(module, "generate_catalog", None)
            if fn is not None:
                made = fn(n)
                if isinstance(made, Path):
                    return made.read_text(encoding="utf-8"), "tests/support/catalogs.py"
                if isinstance(made, str):
                    return made, "tests/support/catalogs.py"
                import yaml

                return yaml.safe_dump(made, sort_keys=False, allow_unicode=True), "tests/support/catalogs.py"
    return _inline_catalog(n), "bench/core.py (inline)"


# -- child processes ------------------------------------------------------------------------------


def _rss() -> tuple[float, float]:
    """(current, peak) resident memory in MiB, from /proc/self/status."""
    values = {}
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                values[line.split(":")[0]] = int(line.split()[1]) / 1024
    return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")  # resets VmHWM to the current RSS
    except OSError:
        pass


def child_load(mode: str, catalog: str, cache_dir: str) -> dict[str, Any]:
    import gc

    import yaml

    if mode == "bare":
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

        def run() -> int:
            with open(catalog, "rb") as fh:
                data = yaml.load(fh.read(), Loader=loader)
            return len(data.get("tools", []))

    else:
        from toolrun.catalog import LoadOptions, load

        options = LoadOptions(cache_dir=Path(cache_dir))

        def run() -> int:
            return len(load([catalog], os.environ, options).tools)

    gc.collect()
    before, _ = _rss()
    _reset_peak()
    started = time.perf_counter()
    count = run()
    seconds = time.perf_counter() - started
    after, peak = _rss()
    return {"seconds": seconds, "tools": count, "retained_mib": after - before, "peak_mib": peak - before}


def child_exec(mode: str, calls: int, warmup: int, catalog: str) -> dict[str, Any]:
    async def bare_once() -> None:
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            "echo hi",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, _ = await proc.communicate()
        assert out == b"hi\n", out

    async def main() -> list[float]:
        if mode == "toolrun":
            from toolrun.models import Identity
            from toolrun.service import ToolService
            from toolrun.settings import Settings

            settings = Settings.load(environ=os.environ)
            service = ToolService.from_paths([catalog], settings, environ=os.environ)
            who = Identity.operator()

            async def once() -> None:
                result = await service.call(who, "bench.echo", {"msg": "hi"})
                assert result.value == "hi\n", result.value

        elif mode == "bare-pidfd":
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                watcher = asyncio.PidfdChildWatcher()
                watcher.attach_loop(asyncio.get_running_loop())
                asyncio.set_child_watcher(watcher)
            once = bare_once
        else:
            once = bare_once
        for _ in range(warmup):
            await once()
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            await once()
            times.append(time.perf_counter() - started)
        return times

    return {"times": asyncio.run(main())}


def run_child(args: Sequence[str], env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [PYTHON, __file__, "--child", *args], capture_output=True, text=True, env=env, check=False, timeout=600
    )
    if done.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- wall time ------------------------------------------------------------------------------------


def wall_times(
    commands: dict[str, list[str]], runs: int, env: dict[str, str], work: Path
) -> dict[str, tuple[list[float], float]]:
    """Per command: seconds of each run, and the mean CPU seconds (user + system) of one run.

    hyperfine -N when installed, else an interleaved subprocess loop.
    """
    hyperfine = shutil.which("hyperfine")
    if hyperfine:
        out = work / "hyperfine.json"
        argv = [hyperfine, "-N", "--style", "none", "--warmup", "3", "--runs", str(runs), "--export-json", str(out)]
        for name, cmd in commands.items():
            argv += ["--command-name", name, " ".join(cmd)]
        subprocess.run(argv, env=env, check=True, capture_output=True, stdin=subprocess.DEVNULL)
        data = json.loads(out.read_text(encoding="utf-8"))
        return {r["command"]: (r["times"], r["user"] + r["system"]) for r in data["results"]}
    import resource

    times: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, float] = dict.fromkeys(commands, 0.0)
    for _ in range(3):
        for cmd in commands.values():
            subprocess.run(cmd, env=env, check=True, capture_output=True, stdin=subprocess.DEVNULL)
    for _ in range(runs):  # interleaved, so drift hits every command alike
        for name, cmd in commands.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            subprocess.run(cmd, env=env, check=True, capture_output=True, stdin=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - started)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name] += (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {name: (times[name], cpu[name] / runs) for name in commands}


def import_profile(argv: list[str], env: dict[str, str], top: int = 12) -> list[tuple[float, float, str]]:
    """(cumulative ms, self ms, module) of the slowest top-level imports of one toolrun invocation."""
    code = (
        f"import sys; sys.argv = {argv!r}; from toolrun.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass"
    )
    done = subprocess.run(
        [PYTHON, "-X", "importtime", "-c", code], capture_output=True, text=True, env=env, check=False
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        self_us, cumulative_us, name = line[len("import time:") :].split("|", 2)
        depth = (len(name) - len(name.lstrip(" ")) - 1) // 2
        if depth <= 1:
            rows.append((int(cumulative_us) / 1000, int(self_us) / 1000, name.strip()))
    rows.sort(reverse=True)
    return rows[:top]


# -- report ---------------------------------------------------------------------------------------


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


class Table:
    def __init__(self, *header: str) -> None:
        self.header = header or ("figure", "toolrun", "baseline", "ratio", "target", "verdict")
        self.rows: list[tuple[str, ...]] = []

    def add(self, *cells: str) -> None:
        self.rows.append(cells)

    def print(self, title: str) -> None:
        header = self.header
        widths = [max(len(r[i]) for r in [header, *self.rows]) for i in range(len(header))]
        print(f"\n{title}")
        for row in [header, tuple("-" * w for w in widths), *self.rows]:
            print("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls, runs and tools")
    parser.add_argument("--calls", type=int, help="in-process calls per round and side (default 200)")
    parser.add_argument("--runs", type=int, help="wall-time runs per command (default 30, at least 20)")
    parser.add_argument("--tools", type=int, help="tools in the generated catalog (default 10000)")
    parser.add_argument("--importtime", action="store_true", help="print the slowest imports of --help and call")
    parser.add_argument("--json", metavar="FILE", help="also write every figure to FILE as JSON")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)

    if opts.child:
        kind, *rest = opts.child
        if kind == "load":
            print(json.dumps(child_load(*rest)))
        else:
            print(json.dumps(child_exec(rest[0], int(rest[1]), int(rest[2]), rest[3])))
        return 0

    calls = opts.calls or (50 if opts.quick else 200)
    runs = max(opts.runs or (20 if opts.quick else 30), 20)
    n_tools = opts.tools or (2000 if opts.quick else 10_000)
    rounds = 3
    figures: dict[str, Any] = {}

    work = Path(tempfile.mkdtemp(prefix="toolrun-bench-"))
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SVC_")}
        env["TOOLRUN_HOME"] = str(work / "home")
        echo_catalog = work / "echo.yaml"
        echo_catalog.write_text(ECHO_CATALOG, encoding="utf-8")
        print(
            f"toolrun bench: python {sys.version.split()[0]}, {os.cpu_count()} cores, "
            f"load average {_load()}, TOOLRUN_HOME={work}/home"
        )

        # (a) in-process exec overhead: alternate fresh processes so drift hits both sides alike.
        per: dict[str, list[float]] = {"bare": [], "bare-pidfd": [], "toolrun": []}
        for _ in range(rounds):
            for mode in per:
                per[mode] += run_child(["exec", mode, str(calls), "20", str(echo_catalog)], env)["times"]
        med = {m: statistics.median(t) for m, t in per.items()}
        mean = {m: statistics.fmean(t) for m, t in per.items()}
        ratio = med["toolrun"] / med["bare"]
        figures["exec"] = {"calls": len(per["bare"]), "median": med, "mean": mean, "ratio": ratio}
        t = Table()
        t.add("call median", ms(med["toolrun"]), ms(med["bare"]), f"{ratio:.2f}x", "<= 1.15x", verdict(ratio <= 1.15))
        t.add("call mean", ms(mean["toolrun"]), ms(mean["bare"]), f"{mean['toolrun'] / mean['bare']:.2f}x", "", "")
        t.add(
            "vs bare + pidfd watcher",
            ms(med["toolrun"]),
            ms(med["bare-pidfd"]),
            f"{med['toolrun'] / med['bare-pidfd']:.2f}x",
            "(info)",
            "",
        )
        t.add("calls/s (1 at a time)", f"{1 / mean['toolrun']:.0f}", f"{1 / mean['bare']:.0f}", "", "", "")
        t.print(f"(a) in-process exec call, echo hi: {len(per['bare'])} sequential calls per side, {rounds} rounds")

        # (b) wall time of whole commands.
        commands = {
            "python -c pass": [PYTHON, "-c", "pass"],
            "toolrun --help": [TOOLRUN, "--help"],
            "toolrun call": [TOOLRUN, "call", "bench.echo", "msg=hi", "-c", str(echo_catalog)],
        }
        measured = wall_times(commands, runs, env, work)
        wall = {name: statistics.median(ts) for name, (ts, _) in measured.items()}
        cpu = {name: c for name, (_, c) in measured.items()}
        figures["wall"] = {
            "runs": runs,
            "median": wall,
            "cpu_mean": cpu,
            "tool": "hyperfine" if shutil.which("hyperfine") else "loop",
        }
        base = wall["python -c pass"]
        t = Table("figure", "median", "cpu/run", "ratio to python", "target", "verdict")
        t.add("python -c pass", ms(base), ms(cpu["python -c pass"]), "1.0x", "", "")
        for name, target in (("toolrun --help", 0.160), ("toolrun call", 0.200)):
            label = "toolrun call bench.echo msg=hi" if name == "toolrun call" else name
            t.add(
                label,
                ms(wall[name]),
                ms(cpu[name]),
                f"{wall[name] / base:.1f}x",
                f"< {target * 1000:.0f} ms",
                verdict(wall[name] < target),
            )
        t.print(
            f"(b) wall time of whole commands, median of {runs} runs ({figures['wall']['tool']}); cpu = user + system"
        )

        # (c) the generated catalog: bare parse, cold load (empty cache), warm load (cache filled).
        text, source = generate_catalog_text(n_tools)
        big = work / "big.yaml"
        big.write_text(text, encoding="utf-8")
        loads: dict[str, list[dict[str, Any]]] = {"bare": [], "cold": [], "warm": []}
        for i in range(rounds):
            cache = work / f"cache{i}"
            for mode in ("bare", "cold", "warm"):  # warm follows the cold run that filled `cache`
                loads[mode].append(run_child(["load", mode, str(big), str(cache)], env))
        counts = {m: loads[m][0]["tools"] for m in loads}
        lt = {m: statistics.median(r["seconds"] for r in rs) for m, rs in loads.items()}
        mem = {m: statistics.median(r["retained_mib"] for r in rs) for m, rs in loads.items()}
        peak = {m: statistics.median(r["peak_mib"] for r in rs) for m, rs in loads.items()}
        figures["load"] = {
            "tools": counts,
            "bytes": len(text.encode()),
            "source": source,
            "seconds": lt,
            "retained_mib": mem,
            "peak_mib": peak,
        }
        t = Table()
        t.add("bare yaml.load (CSafeLoader)", f"{lt['bare']:.2f} s", "", "", "", "")
        t.add(
            "cold load (empty cache)",
            f"{lt['cold']:.2f} s",
            f"{lt['bare']:.2f} s",
            f"{lt['cold'] / lt['bare']:.2f}x",
            "<= 1.5x",
            verdict(lt["cold"] <= 1.5 * lt["bare"]),
        )
        t.add(
            "warm load (cache hit)",
            f"{lt['warm']:.3f} s",
            f"{lt['bare']:.2f} s",
            f"{lt['warm'] / lt['bare']:.2f}x",
            "< 0.5 s",
            verdict(lt["warm"] < 0.5),
        )
        for mode in ("bare", "cold", "warm"):
            t.add(f"memory {mode}: retained / peak", f"{mem[mode]:.0f} / {peak[mode]:.0f} MiB", "", "", "", "")
        t.print(
            f"(c) load of {counts['cold']} tools ({len(text.encode()) / 1e6:.1f} MB of YAML from {source}), "
            f"median of {rounds} fresh processes"
        )
        if counts["cold"] != counts["bare"]:
            print(f"  note: toolrun loaded {counts['cold']} tools, the YAML holds {counts['bare']}")

        if opts.importtime:
            for label, args in (
                ("toolrun --help", ["toolrun", "--help"]),
                ("toolrun call", ["toolrun", "call", "bench.echo", "msg=hi", "-c", str(echo_catalog)]),
            ):
                print(f"\nslowest imports of `{label}` (python -X importtime; cumulative / self ms)")
                for cumulative, self_ms, name in import_profile(args, env):
                    print(f"  {cumulative:8.1f} {self_ms:7.1f}  {name}")

        busy = os.getloadavg()[0] > 0.5 * (os.cpu_count() or 1)
        print(f"\nload average at the end: {_load()}" + ("  (a busy machine: wall times are inflated)" if busy else ""))
        if opts.json:
            Path(opts.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
