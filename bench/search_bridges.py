"""Two more bridges for queries that share no word with their tool, tried for issue 26 and not kept.

    .venv/bin/python bench/search_bridges.py --cache /tmp/vectors              # dev and dev-2
    .venv/bin/python bench/search_bridges.py --cache /tmp/vectors --heldout    # held-out too (report only)

1. **Static word vectors** (lexical, no model at run time): each word of the BERT-uncased vocabulary (the words of
   bench/build_related.py) embedded alone with the packaged all-MiniLM-L6-v2, the mean removed and the first
   `--components` principal components projected out (model2vec's recipe, without its training); a text's vector
   is the idf-weighted mean of its words' vectors (a word outside the vocabulary by its stem's mean vector; function
   words dropped). Scored alone (`static`) and fused with toolrun's lexical ranking (`lexical + static`: RRF, k 60,
   equal weights). It would ship as a table in the core, like the related words.
2. **A group prior** (semantic side): a tool's cosine plus beta x the mean cosine of the `m` nearest tools of its
   group (the key's first part: `cassandra.repair` -> `cassandra`), so a query that names a domain in other words
   ("the wide-column database") lifts that group's tools. Computed over the caller's tools only. Scored inside
   toolrun's fusion rule as bench/search_fusion.py reproduces it (two lists: lexical and documents, no params list).

Both are scored against the same rules without them, on each set's queries (R@3 per kind, then R@1 R@3 R@10 MRR).
Choose on dev and dev-2; held-out only reports. Figures: bench/README.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_eval as se
import search_fusion as sf

KINDS = ("keyword", "task", "typo", "param", "paraphrase", "mixed")


class StaticVectors:
    """Word vectors of the vocabulary (model2vec-style: each word embedded alone, centred, top components removed)."""

    def __init__(self, cache: Path | None, components: int) -> None:
        import build_related
        import numpy as np

        from toolrun.search.stem import stem

        saved = cache / "static_words.npz" if cache else None
        if saved is not None and saved.exists():
            data = np.load(saved)
            words, vectors = [str(w) for w in data["words"]], data["vectors"]
        else:
            words = build_related.vocabulary()
            vectors = np.asarray(se.semantic_model().embed(words), dtype=np.float32)
            if saved is not None:
                np.savez(saved, words=np.array(words), vectors=vectors)
        centred = vectors - vectors.mean(axis=0)
        if components:
            _, _, vt = np.linalg.svd(centred[::3], full_matrices=False)
            top = vt[:components]
            centred = centred - (centred @ top.T) @ top
        centred /= np.linalg.norm(centred, axis=1, keepdims=True)
        self.row = {w: i for i, w in enumerate(words)}
        self.matrix = centred
        by_stem: dict[str, list[int]] = {}
        for i, w in enumerate(words):
            by_stem.setdefault(stem(w), []).append(i)
        self.stems = {s: centred[rows].mean(axis=0) for s, rows in by_stem.items()}

    def of(self, text: str, idf: dict[str, float], unseen: float) -> Any:
        import numpy as np

        from toolrun.search.stem import stem
        from toolrun.search.textsearch import STOP_WORDS, words

        total = np.zeros(self.matrix.shape[1], dtype=np.float32)
        for word in words(text):
            if word in STOP_WORDS:
                continue
            s = stem(word)
            vector = self.matrix[self.row[word]] if word in self.row else self.stems.get(s)
            if vector is not None:
                total += idf.get(s, unseen) * vector
        norm = float(np.linalg.norm(total))
        return total / norm if norm else total


def static_rankings(registry: Any, admin: Any, asked: list[Any], static: StaticVectors) -> list[tuple[list, list]]:
    """Per query: (toolrun's lexical ranking, the static-vector ranking), as keys, first 50 each."""
    import math

    import numpy as np

    from toolrun.search.semantic import document
    from toolrun.search.stem import stem
    from toolrun.search.textsearch import query_words, words

    tools = list(registry.tools.values())
    texts = [document(t) for t in tools]
    df: dict[str, int] = {}
    for text in texts:
        for s in {stem(w) for w in words(text)}:
            df[s] = df.get(s, 0) + 1
    idf = {s: math.log(1 + len(texts) / n) for s, n in df.items()}
    unseen = math.log(1 + len(texts))
    matrix = np.stack([static.of(t, idf, unseen) for t in texts])
    out = []
    for _, query, _ in asked:
        sims = matrix @ static.of(" ".join(query_words(query)), idf, unseen)
        nearest = [tools[i].key for i in np.argsort(-sims, kind="stable")[:50]]
        lexical = [t.key for t in registry.search(admin, query, 0, 50).items]
        out.append((lexical, nearest))
    return out


def rrf(*lists: list[str], k: float = 60) -> list[str]:
    scores: dict[str, float] = {}
    for ranked in lists:
        for r, key in enumerate(ranked):
            scores[key] = scores.get(key, 0.0) + 1 / (k + r + 1)
    return sorted(scores, key=lambda key: (-scores[key], key))


def table(rows: dict[str, list[tuple[str, int | None]]]) -> None:
    """rows: rule -> [(kind, 0-based rank of the right tool or None)]."""
    for rule, got in rows.items():
        kinds = [k for k in KINDS if any(kind == k for kind, _ in got)]
        cells = []
        for k in kinds:
            ranks = [r for kind, r in got if kind == k]
            cells.append(f"{k[:5]} {sum(r is not None and r < 3 for r in ranks) / len(ranks):.2f}")
        n = len(got)
        r1 = sum(r == 0 for _, r in got) / n
        r3 = sum(r is not None and r < 3 for _, r in got) / n
        r10 = sum(r is not None and r < 10 for _, r in got) / n
        mrr = sum(1 / (r + 1) for _, r in got if r is not None) / n
        print(f"  {rule:<34} {'  '.join(cells)}   all {r1:.3f} {r3:.3f} {r10:.3f} {mrr:.3f}")


def rank_of(ranked: list[str], ok: set[str]) -> int | None:
    return next((i for i, key in enumerate(ranked[:10]) if key in ok), None)


def static_part(name: str, text: str, asked: list[Any], workdir: Path, static: StaticVectors) -> None:
    registry, admin, _ = se.load_registry(text, workdir)
    rows: dict[str, list[tuple[str, int | None]]] = {"lexical (toolrun)": [], "static": [], "lexical + static": []}
    for (kind, _, ok), (lexical, nearest) in zip(asked, static_rankings(registry, admin, asked, static), strict=True):
        rows["lexical (toolrun)"].append((kind, rank_of(lexical, ok)))
        rows["static"].append((kind, rank_of(nearest, ok)))
        rows["lexical + static"].append((kind, rank_of(rrf(lexical, nearest), ok)))
    print(f"{name}: static word vectors ({len(asked)} queries; R@3 per kind; R@1 R@3 R@10 MRR)")
    table(rows)


def group_prior(beta: float, m: int, groups: list[Any]) -> sf.Rule:
    import numpy as np

    base = sf.rrf(5, 0.3, 3.0, top=50, mmr=0.5)

    def rule(q: sf.Query) -> list[int]:
        prior = np.zeros(len(q.sims))
        for rows in groups:
            prior[rows] = np.sort(q.sims[rows])[::-1][:m].mean()
        return base(sf.with_sims(q, q.sims + beta * prior))

    return rule


def group_part(name: str, text: str, asked: list[Any], workdir: Path) -> None:
    import numpy as np

    sf.TEXTS.clear()  # toolrun's own tool text only
    queries, keys = sf.prepare(text, asked, workdir)
    by_group: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        by_group.setdefault(key.split(".")[0], []).append(i)
    groups = [np.array(rows) for rows in by_group.values()]
    rules: dict[str, sf.Rule] = {"toolrun's rule (two lists)": sf.rrf(5, 0.3, 3.0, top=50, mmr=0.5)}
    for beta in (0.25, 0.5, 1.0, 2.0):
        for m in (1, 3, 10):
            rules[f"group prior beta {beta}, m {m}"] = group_prior(beta, m, groups)
    rows: dict[str, list[tuple[str, int | None]]] = {}
    for rule_name, rule in rules.items():
        rows[rule_name] = [(q.kind, rank_of([keys[d] for d in rule(q)], q.ok)) for q in queries]
    print(f"{name}: group prior ({len(asked)} queries; R@3 per kind; R@1 R@3 R@10 MRR)")
    table(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, help="keep the tools' and the words' vectors here between runs")
    parser.add_argument("--heldout", action="store_true", help="also score held-out (to report, never to choose)")
    parser.add_argument("--components", type=int, default=1, help="principal components removed from word vectors")
    parser.add_argument("--only", choices=("static", "group"), help="only one of the two")
    args = parser.parse_args()
    if args.cache:
        args.cache.mkdir(parents=True, exist_ok=True)
        se.CACHE.append(args.cache)
    sets = {
        "dev": (se.catalog_text(), se.queries()),
        "dev-2": (se.dev2_catalog_text(), se.dev2_queries()),
    }
    if args.heldout:
        sets["held-out"] = (se.heldout_catalog_text(), se.heldout_queries())
    static = StaticVectors(args.cache, args.components) if args.only != "group" else None
    with tempfile.TemporaryDirectory() as tmp:
        for name, (text, asked) in sets.items():
            if static is not None:
                (Path(tmp) / f"{name}-static").mkdir()
                static_part(name, text, asked, Path(tmp) / f"{name}-static", static)
            if args.only != "static":
                (Path(tmp) / f"{name}-group").mkdir()
                group_part(name, text, asked, Path(tmp) / f"{name}-group")


if __name__ == "__main__":
    main()
