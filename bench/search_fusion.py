"""Fusion rules for semantic search, compared on the dev set (issue 26): how the lexical and the embedding rankings
are combined into one.

    .venv/bin/python bench/search_fusion.py --cache /tmp/vectors            # every candidate on dev
    .venv/bin/python bench/search_fusion.py --cache /tmp/vectors --heldout  # the same on held-out (to report only)

Each query's lexical ranking (toolrun's, with its BM25 scores) and its cosine similarity to every tool are computed
once; each candidate rule then ranks from those alone, so a rule is a few lines and the grid runs in seconds. The
rule `toolrun (...)` is what `toolrun.search.semantic` does (it agrees with `search_eval.py --semantic`);
`[text]` marks a rule with the tools embedded from another text than `semantic.document`'s. Figures:
bench/README.md. Dev is the whole of `search_eval.py`'s dev set (280 queries: the first 200 and the second round).
Choose on dev; held-out only reports.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_eval as se


@dataclass
class Query:
    kind: str
    text: str
    ok: set[str]
    lexical: list[int]  # document numbers, best first (toolrun's lexical ranking, its first 100)
    scores: dict[int, float]  # BM25 score of every matching document
    sims: Any  # cosine similarity of every document (the tools embedded from `semantic.document`)
    found: bool  # every query word is found in the tools (itself, a prefix or a typo)
    alt: dict[str, Any]  # the same with the tools embedded from other texts (DOCUMENTS)
    cover: dict[int, float] = field(default_factory=dict)  # share of the query words each lexical result matches
    ok_docs: set[int] = field(default_factory=set)  # the document numbers of the acceptable keys


def _name(tool: Any) -> str:
    return tool.name.replace("_", " ")


def _params(tool: Any) -> str:
    return " ".join(f"{p.name.replace('_', ' ')}: {p.description}" for p in tool.params)


def _before(tool: Any) -> str:
    """What toolrun embedded before issue 26's choice: `name (groups): description Keywords: ... Params: names.`"""
    text = f"{_name(tool)} ({', '.join(tool.groups)}): {tool.description}"
    if tool.keywords:
        text += " Keywords: " + ", ".join(tool.keywords) + "."
    params = ", ".join(p.name.replace("_", " ") for p in tool.params)
    return text + (f" Params: {params}." if params else "")


# Texts a tool may be embedded from, besides toolrun's own (`semantic.document`: groups, name, description, keywords,
# each param with its description).
DOCUMENTS: dict[str, Callable[[Any], str]] = {
    "before": _before,
    "description": lambda t: t.description,
    "name+description": lambda t: f"{_name(t)}: {t.description}",
    "name": lambda t: f"{_name(t)} ({', '.join(t.groups)})",
    "name+description+params": lambda t: f"{_name(t)}: {t.description} {_params(t)}",
    "name(groups)+description+params": lambda t: f"{_name(t)} ({', '.join(t.groups)}): {t.description} {_params(t)}",
}


Rule = Callable[[Query], list[int]]
MATRIX: list[Any] = []  # the tool vectors of the set being scored (for the diversity of the nearest)
TEXTS = [True]  # embed the tools from every text of DOCUMENTS too (--rules-only: not)


def prepare(text: str, asked: list[tuple[str, str, set[str]]], workdir: Path) -> tuple[list[Query], list[str]]:
    import numpy as np

    from toolrun.search.semantic import found_in
    from toolrun.search.textsearch import query_words

    registry, admin, _ = se.load_registry(text, workdir, semantic=True)
    index = registry.index(admin)
    rows = np.array([registry.vectors.rows[t.key] for t in index.tools])
    matrix = np.asarray(registry.vectors.matrix)[rows]
    MATRIX[:] = [matrix]
    model = se.semantic_model()
    vectors = model.embed([" ".join(q.split()).lower()[:500] for _, q, _ in asked])
    cleaned = model.embed([" ".join(query_words(q)) for _, q, _ in asked])  # query cleanup: function words dropped
    texts = DOCUMENTS if TEXTS else {}
    others = {name: model.embed([document(t) for t in index.tools]) for name, document in texts.items()}
    out = []
    for (kind, q, ok), vector, clean in zip(asked, vectors, cleaned, strict=True):
        terms = query_words(q)
        lexical, _ = index.rank(terms, 100)
        scores = index._scores(tuple(terms))
        alt = {name: m @ vector for name, m in others.items()}
        alt["query words"] = matrix @ clean
        if TEXTS:
            alt["query words, name+description+params"] = others["name+description+params"] @ clean
        query = Query(kind, q, ok, lexical[:100], scores, matrix @ vector, found_in(index, terms), alt)
        query.cover = coverage(index, terms, lexical[:100])
        out.append(query)
    return out, [t.key for t in index.tools]


def coverage(index: Any, terms: list[str], docs: list[int]) -> dict[int, float]:
    matched = [index._term(w, i == len(terms) - 1) for i, w in enumerate(terms)]
    return {d: sum(d in m for m in matched) / max(1, len(terms)) for d in docs}


def evaluate(queries: list[Query], keys: list[str], rule: Rule) -> dict[str, tuple[float, float, float, float]]:
    rows: dict[str, list[tuple[float, float, float, float]]] = {}
    for q in queries:
        ranked = [keys[d] for d in rule(q)[:10]]
        rank = next((i for i, k in enumerate(ranked) if k in q.ok), None)
        row = (0.0, 0.0, 0.0, 0.0) if rank is None else (float(rank == 0), float(rank < 3), 1.0, 1 / (rank + 1))
        rows.setdefault(q.kind, []).append(row)
        rows.setdefault("all", []).append(row)
    return {k: tuple(sum(r[i] for r in v) / len(v) for i in range(4)) for k, v in rows.items()}  # type: ignore[misc]


# -- the candidates ------------------------------------------------------------------------------------------------


def nearest(q: Query, n: int) -> list[int]:
    import numpy as np

    top = np.argpartition(-q.sims, n - 1)[:n]
    return [int(d) for d in top[np.argsort(-q.sims[top], kind="stable")]]


def with_sims(q: Query, sims: Any) -> Query:
    return Query(q.kind, q.text, q.ok, q.lexical, q.scores, sims, q.found, q.alt, q.cover, q.ok_docs)


def top_cover(q: Query) -> float:
    return q.cover.get(q.lexical[0], 0.0) if q.lexical else 0.0


def rrf_cover(k: float, weight: float, unsure: float, at: float = 1.0, top: int = 30, found: bool = False) -> Rule:
    """RRF whose semantic weight is `weight` when the first lexical result matches at least `at` of the query words
    (and, with found, every word is found), else `unsure`."""

    def rule(q: Query) -> list[int]:
        confident = top_cover(q) >= at and (q.found or not found)
        return rrf(k, weight, weight, top)(q) if confident else rrf(k, unsure, unsure, top)(q)

    return rule


def variant(name: str, rule: Rule) -> Rule:
    """The rule with the tools embedded from another text; `a|b`: the greater similarity of the two (max-pool), `a+b`:
    their mean."""

    def sims(q: Query, part: str) -> Any:
        return q.sims if part == "toolrun" else q.alt[part]

    def apply(q: Query) -> list[int]:
        import numpy as np

        if "|" in name:
            s = np.maximum.reduce([sims(q, p) for p in name.split("|")])
        elif "+" in name and name not in q.alt:
            s = np.mean([sims(q, p) for p in name.split("+")], axis=0)
        else:
            s = sims(q, name)
        return rule(with_sims(q, s))

    return apply


def oracle(q: Query) -> list[int]:
    """The better of lexical and semantic alone for this query (a ceiling, not a rule)."""
    lex, sem = q.lexical[:10], nearest(q, 10)
    pos = [next((i for i, d in enumerate(r) if d in q.ok_docs), 99) for r in (lex, sem)]
    return lex if pos[0] <= pos[1] else sem


def diverse(q: Query, n: int, strength: float) -> list[int]:
    """The n nearest, re-ordered by maximal marginal relevance (toolrun's `diversify`): a tool much like one above it
    waits."""
    from toolrun.search.semantic import diversify

    near = nearest(q, n)
    return [near[i] for i in diversify(MATRIX[0][near], q.sims[near], strength)]


def rrf(k: float, weight: float, unfound: float, top: int = 30, head: int = 100, mmr: float = 0.0) -> Rule:
    def rule(q: Query) -> list[int]:
        w = weight if q.found else unfound
        scores: dict[int, float] = {}
        for r, d in enumerate(q.lexical[:head]):
            scores[d] = 1 / (k + r + 1)
        for r, d in enumerate(diverse(q, top, mmr) if mmr else nearest(q, top)):
            scores[d] = scores.get(d, 0.0) + w / (k + r + 1)
        return sorted(scores, key=lambda d: (-scores[d], d))

    return rule


def semantic_only(q: Query) -> list[int]:
    return nearest(q, 10)


def lexical_only(q: Query) -> list[int]:
    return q.lexical


def score_fusion(alpha: float, unfound: float, top: int = 30, norm: str = "max") -> Rule:
    """lexical score / the best lexical score (or per-query min-max) + alpha x cosine (rescaled over the candidates)."""

    def rule(q: Query) -> list[int]:
        cands = set(q.lexical[:100]) | set(nearest(q, top))
        best = max(q.scores.values(), default=0.0) or 1.0
        sims = {d: float(q.sims[d]) for d in cands}
        lo, hi = min(sims.values()), max(sims.values())
        a = alpha if q.found else unfound
        final = {}
        for d in cands:
            lex = q.scores.get(d, 0.0) / best
            sem = (sims[d] - lo) / ((hi - lo) or 1.0) if norm == "minmax" else sims[d]
            final[d] = lex + a * sem
        return sorted(final, key=lambda d: (-final[d], d))

    return rule


def gate(confident: Rule, unsure: Rule, test: Callable[[Query], bool]) -> Rule:
    return lambda q: confident(q) if test(q) else unsure(q)


def candidates() -> dict[str, Rule]:
    out: dict[str, Rule] = {
        "lexical": lexical_only,
        "semantic": semantic_only,
        "toolrun (RRF k5, 0.3/3.0, 50 nearest diversified 0.5)": rrf(5, 0.3, 3.0, top=50, mmr=0.5),
        "RRF k5, 0.3/3.0": rrf(5, 0.3, 3.0),
    }
    if TEXTS:
        out["toolrun's rule, embedded as before"] = variant("before", rrf(5, 0.3, 3.0))
        out["before (RRF k10, 0.3/2.0, embedded as before)"] = variant("before", rrf(10, 0.3, 2.0))
    for k in (5, 10, 20, 60):
        for w in (0.5, 1.0, 1.5):
            out[f"RRF k{k} w{w}"] = rrf(k, w, w)
        for w, u in ((0.3, 3.0), (0.5, 2.0), (0.5, 5.0), (0.7, 3.0), (1.0, 3.0), (1.0, 10.0)):
            out[f"RRF k{k} {w}/{u}"] = rrf(k, w, u)
    for a in (0.5, 1.0, 2.0, 3.0, 5.0):
        for u in (a, 2 * a, 5 * a):
            out[f"score max+cos a{a}/{u}"] = score_fusion(a, u)
            out[f"score max+minmax a{a}/{u}"] = score_fusion(a, u, norm="minmax")
    for w in (0.3, 0.5, 1.0):
        out[f"gate unfound->semantic, RRF k10 w{w}"] = gate(rrf(10, w, w), semantic_only, lambda q: q.found)
    out["oracle: better of lexical, semantic"] = oracle
    for mmr in (0.1, 0.2, 0.3, 0.5, 0.7, 1.0):
        out[f"RRF k5 0.3/3.0, nearest diversified {mmr}"] = rrf(5, 0.3, 3.0, mmr=mmr)
        out[f"RRF k5 0.3/3.0, 50 nearest diversified {mmr}"] = rrf(5, 0.3, 3.0, top=50, mmr=mmr)
        out[f"RRF k10 0.3/2.0, nearest diversified {mmr}"] = rrf(10, 0.3, 2.0, mmr=mmr)
        out[f"RRF k5 0.5/2.0, nearest diversified {mmr}"] = rrf(5, 0.5, 2.0, mmr=mmr)
    for k in (3, 5, 10):
        for w, u in ((0.2, 2.0), (0.2, 3.0), (0.3, 2.0), (0.3, 5.0), (0.5, 3.0), (0.5, 5.0), (0.7, 3.0), (1.0, 1.0)):
            out[f"RRF k{k} {w}/{u}, 50 nearest diversified 0.5"] = rrf(k, w, u, top=50, mmr=0.5)
        out[f"semantic diversified {mmr}"] = lambda q, m=mmr: diverse(q, 10, m)
    for k in (5, 10, 20):
        for w, u in ((0.3, 2.0), (0.3, 3.0), (0.5, 2.0), (0.5, 3.0), (0.3, 5.0), (0.2, 2.0)):
            for at in (0.5, 0.67, 1.0):
                out[f"RRF cover>={at} k{k} {w}/{u}"] = rrf_cover(k, w, u, at)
                out[f"RRF cover>={at}+found k{k} {w}/{u}"] = rrf_cover(k, w, u, at, found=True)
    if not TEXTS:
        return out
    texts = [
        *DOCUMENTS,
        "query words",
        "query words, name+description+params",
        "before|name",
        "toolrun|name",
        "toolrun|description",
        "name|description",
        "toolrun+name+description",
    ]
    for text in texts:
        out[f"semantic [{text}]"] = variant(text, semantic_only)
        for k, w, u in ((10, 0.3, 2.0), (5, 0.3, 3.0), (5, 0.5, 2.0), (10, 0.5, 3.0), (10, 1.0, 1.0)):
            out[f"RRF k{k} {w}/{u} [{text}]"] = variant(text, rrf(k, w, u))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, help="keep the tools' vectors here between runs")
    parser.add_argument("--heldout", action="store_true", help="also score held-out (to report, never to choose)")
    parser.add_argument("--only", nargs="*", help="only these candidates (by name)")
    parser.add_argument("--rules-only", action="store_true", help="no other tool texts (faster)")
    args = parser.parse_args()
    if args.cache:
        se.CACHE.append(args.cache)
    if args.rules_only:
        TEXTS.clear()
    sets = {"dev": (se.catalog_text(), se.queries())}
    if args.heldout:
        sets["held-out"] = (se.heldout_catalog_text(), se.heldout_queries())
    rules = candidates()
    if args.only:
        rules = {name: rules[name] for name in args.only}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (text, asked) in sets.items():
            (Path(tmp) / name).mkdir()
            queries, keys = prepare(text, asked, Path(tmp) / name)
            for q in queries:
                q.ok_docs = {i for i, key in enumerate(keys) if key in q.ok}
            kinds = sorted({q.kind for q in queries})
            print(f"{name}: {len(queries)} queries; R@3 per kind, then R@1 R@3 R@10 MRR of all")
            print(f"  {'rule':<44} " + " ".join(f"{k[:5]:>5}" for k in kinds) + "   R@1   R@3  R@10   MRR")
            results = [(rname, evaluate(queries, keys, rule)) for rname, rule in rules.items()]
            for rname, table in sorted(results, key=lambda r: (-r[1]["all"][1], -r[1]["all"][3])):
                cells = " ".join(f"{table[k][1]:>5.2f}" for k in kinds)
                print(f"  {rname:<44} {cells} " + " ".join(f"{v:>5.2f}" for v in table["all"]))


if __name__ == "__main__":
    main()
