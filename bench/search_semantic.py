"""Semantic search in a real `toolrun serve`: memory, `/search` latency, and serving while the catalog is embedded.

    .venv/bin/python bench/search_semantic.py                 # the dev catalog (1,472 tools), 2 workers
    .venv/bin/python bench/search_semantic.py --copies 7 --workers 4

Starts the server twice on the search evaluation's dev catalog (bench/search_eval.py), each with its own fresh
TOOLRUN_HOME: lexical (`SVC_SEARCH_SEMANTIC=false`), then semantic. For each: the RSS of every process of the
server (the supervisor, the workers and, with semantic search, the one model process; RSS, and PSS, which splits
shared pages between their sharers) after every dev query was
asked once; `/search` p50 and p95 over the dev queries (each asked once, new to the query cache), and the CPU time
the server's processes (supervisor, workers, model process) used for them, per query: unlike the wall time, a
loaded machine does not inflate it (`bench/search_eval.py --scale` gives its p50 in one process). For the semantic
server also: the same while the catalog is being embedded in the background (search is lexical then), and how
long the embedding took. Needs toolrun[semantic].
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from search_eval import catalog_text, queries


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def tree(root: int) -> list[int]:
    """The process and all its descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def pss_mb(pid: int) -> float:
    """Proportional set size: shared pages (forked copy-on-write, mapped files) split between their sharers."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return 0.0


def by_mapping(pid: int) -> dict[str, float]:
    """A process's PSS in MB by what is mapped: a package's libraries, the vectors, anonymous memory, the heap."""
    out: dict[str, float] = {}
    name = "[anon]"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split(None, 5)
        if head and "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
            name = head[5].strip() if len(head) > 5 else "[anon]"
            if "site-packages/" in name:
                name = name.split("site-packages/")[1].split("/")[0]
            elif name.endswith(".npy"):
                name = "the vectors (.npy)"
            elif name.startswith(("/usr/lib", "/lib")):
                name = "system libraries"
        elif line.startswith("Pss:"):
            out[name] = out.get(name, 0.0) + int(line.split()[1]) / 1024
    return out


def cpu_seconds(pids: list[int]) -> float:
    """The CPU time (user and system) the processes have used so far."""
    total = 0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / os.sysconf("SC_CLK_TCK")


def ask_all(url: str, texts: list[str]) -> list[float]:
    times = []
    with httpx.Client(timeout=30) as client:
        for text in texts:
            started = time.perf_counter()
            client.get(url + "/search", params={"q": text}).raise_for_status()
            times.append((time.perf_counter() - started) * 1000)
    return times


def summary(times: list[float]) -> str:
    times = sorted(times)
    return f"p50 {statistics.median(times):.1f} ms, p95 {times[int(len(times) * 0.95)]:.1f} ms"


def run(catalog: Path, workers: int, semantic: bool, tmp: Path, breakdown: bool = False) -> None:
    home = tmp / ("semantic" if semantic else "lexical")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SVC_")}
    env.update(TOOLRUN_HOME=str(home), SVC_WORKERS=str(workers), SVC_SEARCH_SEMANTIC=str(semantic).lower())
    log = open(tmp / f"{home.name}.log", "w+")  # noqa: SIM115 (kept open while the server runs)
    argv = [sys.executable, "-m", "toolrun", "serve", "-c", str(catalog), "--port", str(port)]
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    texts = [text for _, text, _ in queries()]
    try:
        started = time.perf_counter()
        while True:
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        name = "semantic" if semantic else "lexical"
        if semantic:
            during = ask_all(url, texts[:100])
            cache = home / "cache" / "semantic"
            while not list(cache.glob("*.npy")):
                time.sleep(0.5)
            print(f"{name}: /search while the catalog is embedded: {summary(during)}")
            print(f"{name}: catalog embedded {time.perf_counter() - started:.0f} s after the start")
            time.sleep(3)  # every worker maps the file
            ask_all(url, ["warm up"])
        pids = tree(proc.pid)
        cpu = cpu_seconds(pids)
        times = ask_all(url, texts)  # (no query was embedded before: search was lexical until the vectors were there)
        cpu = (cpu_seconds(pids) - cpu) * 1000 / len(texts)
        pids = tree(proc.pid)
        rss, pss = sum(rss_mb(p) for p in pids), sum(pss_mb(p) for p in pids)
        print(f"{name}: /search {summary(times)}; {len(pids)} processes: RSS {rss:.0f} MB, PSS {pss:.0f} MB")
        print(f"{name}: CPU per query, every process of the server together (load-proof): {cpu:.1f} ms (mean)")
        for pid in pids:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:60]
            print(f"    {pid}: RSS {rss_mb(pid):4.0f} MB, PSS {pss_mb(pid):4.0f} MB  {cmd}")
            if breakdown and pss_mb(pid) > 20:
                parts = sorted(by_mapping(pid).items(), key=lambda kv: -kv[1])[:6]
                print("        " + ", ".join(f"{k[:40]} {v:.1f}" for k, v in parts))
    finally:
        proc.terminate()
        proc.wait(30)
        log.seek(0)
        for line in log:
            if "semantic" in line or "Traceback" in line or "died" in line:
                print("    log:", line.rstrip()[:160])
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--copies", type=int, default=1, help="copies of the dev catalog (7: about 10,000 tools)")
    parser.add_argument("--breakdown", action="store_true", help="each process's PSS by what is mapped (MB)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        catalog = Path(tmp) / "tools.yaml"
        # public: the searches are anonymous, and see every tool
        text = catalog_text(args.copies).replace("\n    group: ", "\n    public: true\n    group: ")
        catalog.write_text(text, encoding="utf-8")
        for semantic in (False, True):
            run(catalog, args.workers, semantic, Path(tmp), args.breakdown)


if __name__ == "__main__":
    main()
