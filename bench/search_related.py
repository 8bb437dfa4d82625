"""Related words of lexical search (textsearch.RELATED*, table: bench/build_related.py): each setting scored on dev.

    .venv/bin/python bench/search_related.py                 # lexical, dev (280), dev-extra (56) and dev-2 (240)
    .venv/bin/python bench/search_related.py --semantic --cache /tmp/vec   # fused with MiniLM too

Each candidate (least similarity RELATED_MIN, weight RELATED; a related word's factor is the weight x its
similarity) is set on textsearch's constants and scored on one registry per set, the caches cleared
between candidates. Dev only: the held-out set is not read (search_eval.py reports it, for the chosen setting).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_eval as ev

from toolrun.search import related, textsearch


def clear(registry: object) -> None:
    for index in getattr(registry, "_indexes", {}).values():
        index._cache.clear()
        index._sorted.clear()


def both(dev: dict[str, float], dev2: dict[str, float], metric: str) -> float:
    """dev and dev-2 together: the metric over both sets' queries."""
    return (dev[metric] * dev["n"] + dev2[metric] * dev2["n"]) / (dev["n"] + dev2["n"])


def row(name: str, tables: list[dict[str, dict[str, float]]]) -> str:
    dev, extra, dev2 = tables
    kinds = " ".join(f"{dev[k]['r3']:.2f}" for k in ev.KINDS)
    kinds2 = " ".join(f"{dev2[k]['r3']:.2f}" for k in ev.KINDS[:5])
    a, e, d = dev["all"], extra["all"], dev2["all"]
    return (
        f"{name:<34} {both(a, d, 'r3'):.3f} {both(a, d, 'mrr'):.3f} | {a['r1']:.3f} {a['r3']:.3f} {a['r10']:.3f} "
        f"{a['mrr']:.3f} | {kinds} | {e['r1']:.2f} {e['r3']:.2f} {e['mrr']:.3f} | {d['r1']:.3f} {d['r3']:.3f} "
        f"{d['r10']:.3f} {d['mrr']:.3f} | {kinds2}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--semantic", action="store_true")
    parser.add_argument("--cache", type=Path)
    parser.add_argument("--min", type=float, nargs="+", default=[0.4, 0.45, 0.5, 0.55, 0.6])
    parser.add_argument("--weight", type=float, nargs="+", default=[0.3, 0.5, 0.7])
    parser.add_argument("--capped-only", action="store_true", help="only with RELATED_IDF_CAP on (as kept)")
    parser.add_argument("--table", type=Path, help="another related-words file (bench/build_related.py --out)")
    args = parser.parse_args()
    if args.cache:
        ev.CACHE.append(args.cache)
    if args.table:
        related.FILE = args.table
    with tempfile.TemporaryDirectory() as tmp:
        sets = []
        for name, text, asked in (
            ("dev", ev.catalog_text(), ev.queries()),
            ("dev-extra", ev.catalog_text(), ev.extra_queries()),
            ("dev-2", ev.dev2_catalog_text(), ev.dev2_queries()),
        ):
            workdir = Path(tmp) / name
            workdir.mkdir()
            registry, admin, _ = ev.load_registry(text, workdir, args.semantic)
            sets.append((registry, admin, asked))

        def score(name: str) -> None:
            tables = []
            for registry, admin, asked in sets:
                clear(registry)
                tables.append(ev.score(registry, admin, asked))
            print(row(name, tables), flush=True)

        print(
            f"{'candidate':<34} dev+dev-2 R@3 MRR | dev R@1 R@3 R@10 MRR | R@3 {' '.join(ev.KINDS)} | "
            f"extra R@1 R@3 MRR | dev-2 R@1 R@3 R@10 MRR | R@3 {' '.join(ev.KINDS[:5])}"
        )
        kept = (textsearch.RELATED, textsearch.RELATED_MIN, textsearch.RELATED_IDF_CAP)
        score(f"kept >={kept[1]:.2f} x{kept[0]:.2f}")
        textsearch.RELATED = 0.0
        score("no related words")
        for cap, least, weight in itertools.product(
            (True,) if args.capped_only else (True, False), args.min, args.weight
        ):
            textsearch.RELATED = weight
            textsearch.RELATED_MIN = least
            textsearch.RELATED_IDF_CAP = cap
            score(f">={least:.2f} x{weight:.2f}{' idf-capped' if cap else ''}")


if __name__ == "__main__":
    main()
