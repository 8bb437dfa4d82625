"""Related words of lexical search (textsearch.RELATED*, table: bench/build_related.py): each setting scored on dev.

    .venv/bin/python bench/search_related.py                 # lexical, dev (280) and dev-extra (56)
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


def row(name: str, tables: list[dict[str, dict[str, float]]]) -> str:
    dev, extra = tables
    kinds = " ".join(f"{dev[k]['r3']:.2f}" for k in ev.KINDS)
    a = dev["all"]
    e = extra["all"]
    return (
        f"{name:<34} {a['r1']:.3f} {a['r3']:.3f} {a['r10']:.3f} {a['mrr']:.3f} | {kinds} | "
        f"{e['r1']:.2f} {e['r3']:.2f} {e['mrr']:.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--semantic", action="store_true")
    parser.add_argument("--cache", type=Path)
    parser.add_argument("--min", type=float, nargs="+", default=[0.4, 0.45, 0.5, 0.55, 0.6])
    parser.add_argument("--weight", type=float, nargs="+", default=[0.3, 0.5, 0.7])
    parser.add_argument("--table", type=Path, help="another related-words file (bench/build_related.py --out)")
    args = parser.parse_args()
    if args.cache:
        ev.CACHE.append(args.cache)
    if args.table:
        related.FILE = args.table
    with tempfile.TemporaryDirectory() as tmp:
        sets = []
        for name, asked in (("dev", ev.queries()), ("dev-extra", ev.extra_queries())):
            workdir = Path(tmp) / name
            workdir.mkdir()
            registry, admin, _ = ev.load_registry(ev.catalog_text(), workdir, args.semantic)
            sets.append((registry, admin, asked))

        def score(name: str) -> None:
            tables = []
            for registry, admin, asked in sets:
                clear(registry)
                tables.append(ev.score(registry, admin, asked))
            print(row(name, tables), flush=True)

        print(f"{'candidate':<34} R@1   R@3   R@10  MRR   | R@3 {' '.join(ev.KINDS)} | extra R@1 R@3 MRR")
        textsearch.RELATED = 0.0
        score("no related words")
        for cap, least, weight in itertools.product((True, False), args.min, args.weight):
            textsearch.RELATED = weight
            textsearch.RELATED_MIN = least
            textsearch.RELATED_IDF_CAP = cap
            score(f">={least:.2f} x{weight:.2f}{' idf-capped' if cap else ''}")


if __name__ == "__main__":
    main()
