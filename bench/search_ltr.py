"""A learned linear fusion of the lexical and semantic rankings (learning to rank), against toolrun's hand-set RRF
(issue 26), cross-validated on dev and dev-2.

    .venv/bin/python bench/search_ltr.py --cache /tmp/ltr_vec                  # the grid, cross-validated
    .venv/bin/python bench/search_ltr.py --cache /tmp/ltr_vec --only 'all, listwise, l2 0.01'

Each query's lexical ranking (toolrun's first 100, with BM25 scores and the share of the query words each tool
matches), its cosine to every tool by document and by params vector, and the diversified nearest lists
(`semantic.nearest`) are computed once and kept (`--data`). A query's candidates are the lexical first 100, the 50
nearest by document and the 50 nearest by params (what `Semantic.rank` fuses); each candidate gets a small feature
vector cheap at query time (FEATURES), and a linear scorer over them is trained, numpy only, L2-regularised:
listwise (softmax over a query's candidates, the relevant ones' share maximised) or pairwise (logistic loss on each
relevant/non-relevant pair, RankNet), regularised towards 0 or towards toolrun's own rule written as weights
(RRF_PRIOR: the same scores, checked), or trained on the head of toolrun's ranking only (hard negatives); or by
coordinate ascent on R@3 + MRR itself, from toolrun's rule. Each candidate (feature set x loss x regularisation) is
scored by cross-validation: train on dev -> score dev-2, train on dev-2 -> score dev, and 5 folds over their union;
beside it, toolrun's rule (`toolrun RRF`) on the same queries (it learns nothing: its figures are each set's own).
Held-out is not read here. Figures: bench/README.md.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_eval as se


@dataclass
class Query:
    kind: str
    text: str
    ok: set[int]  # the acceptable tools' document numbers
    lexical: list[int]  # toolrun's lexical ranking, its first 100
    bm25: dict[int, float]  # BM25 score of each matching tool
    cover: dict[int, float]  # share of the query words each matching tool matches
    found: bool  # every query word is found in the tools (semantic.found_in)
    words: int  # query words
    sims: Any  # cosine to every tool's document vector
    psims: Any  # cosine to every tool's params vector
    near: list[int]  # the 50 nearest by document, diversified (semantic.nearest)
    pnear: list[int]  # the 50 nearest by params, diversified


def prepare(text: str, asked: list[tuple[str, str, set[str]]], workdir: Path) -> list[Query]:
    import numpy as np

    from toolrun.search.semantic import found_in, nearest, query_text
    from toolrun.search.textsearch import query_words

    registry, admin, _ = se.load_registry(text, workdir, semantic=True)
    index = registry.index(admin)
    rows = np.array([registry.vectors.rows[t.key] for t in index.tools])
    matrix = np.ascontiguousarray(np.asarray(registry.vectors.matrix)[rows])
    params = np.ascontiguousarray(np.asarray(registry.vectors.params)[rows])
    every = np.arange(len(rows))
    keys = [t.key for t in index.tools]
    vectors = se.semantic_model().embed([query_text(q) for _, q, _ in asked])
    out = []
    for (kind, q, ok), vector in zip(asked, vectors, strict=True):
        terms = query_words(q)
        lexical, _ = index.rank(terms, 100) if terms else ([], 0)
        split = index.split_compounds(tuple(terms))
        bm25 = index._scores(split) if split else {}
        matched = [index._term(w, i == len(split) - 1) for i, w in enumerate(split)]
        cover = {d: sum(d in m for m in matched) / max(1, len(split)) for d in bm25}
        out.append(
            Query(
                kind,
                q,
                {i for i, k in enumerate(keys) if k in ok},
                lexical[:100],
                bm25,
                cover,
                found_in(index, terms),
                len(split),
                (matrix @ vector).astype(np.float32),
                (params @ vector).astype(np.float32),
                nearest(matrix, every, vector),
                nearest(params, every, vector),
            )
        )
    return out


def load_sets(data: Path) -> dict[str, list[Query]]:
    stored = data / "sets.pkl"
    if stored.exists():
        return pickle.loads(stored.read_bytes())  # type: ignore[no-any-return]
    sets = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, text, asked in (
            ("dev", se.catalog_text(), se.queries()),
            ("dev-2", se.dev2_catalog_text(), se.dev2_queries()),
        ):
            (Path(tmp) / name).mkdir()
            sets[name] = prepare(text, asked, Path(tmp) / name)
    data.mkdir(parents=True, exist_ok=True)
    stored.write_bytes(pickle.dumps(sets))
    return sets


# -- toolrun's rule ------------------------------------------------------------------------------------------------


def toolrun_rrf(q: Query) -> list[int]:
    """What `Semantic.rank` does: RRF of the lexical head and the two nearest lists."""
    from toolrun.search import semantic as s

    weight = s.SEMANTIC_WEIGHT if q.found else s.SEMANTIC_WEIGHT_UNFOUND
    scores: dict[int, float] = {}
    for rank, doc in enumerate(q.lexical):
        scores[doc] = 1 / (s.RRF_K + rank + 1)
    for near, w in ((q.near, weight), (q.pnear, weight * s.PARAMS_WEIGHT)):
        for rank, doc in enumerate(near):
            scores[doc] = scores.get(doc, 0.0) + w / (s.RRF_K + rank + 1)
    return sorted(scores, key=lambda d: (-scores[d], d))


# -- features ------------------------------------------------------------------------------------------------------

BASE = (
    "lex5",  # 1/(5 + lexical rank), 0 outside the lexical head
    "lex60",  # 1/(60 + lexical rank)
    "bm25",  # BM25 score / the query's best
    "cover",  # share of the query words the tool matches
    "cos",  # cosine by document
    "cosgap",  # cosine by document - the query's best
    "pcos",  # cosine by params
    "pcosgap",  # cosine by params - the query's best
    "sem5",  # 1/(5 + rank in the diversified nearest by document), 0 outside the 50
    "psem5",  # the same by params
    "sem60",  # 1/(60 + rank by document)
)
FEATURES = [*BASE, *(f"unfound*{f}" for f in BASE), "short*cover", "short*cos"]


def features(q: Query) -> tuple[list[int], Any]:
    """A query's candidates and their features (FEATURES' columns)."""
    import numpy as np

    cands = list(dict.fromkeys([*q.lexical, *q.near, *q.pnear]))
    lex = {d: r for r, d in enumerate(q.lexical)}
    sem = {d: r for r, d in enumerate(q.near)}
    psem = {d: r for r, d in enumerate(q.pnear)}
    best = max(q.bm25.values(), default=0.0) or 1.0
    top, ptop = float(q.sims.max()), float(q.psims.max())
    base = np.zeros((len(cands), len(BASE)))
    for i, d in enumerate(cands):
        r = lex.get(d)
        sr, pr = sem.get(d), psem.get(d)
        cos, pcos = float(q.sims[d]), float(q.psims[d])
        base[i] = (
            0.0 if r is None else 1 / (5 + r + 1),
            0.0 if r is None else 1 / (60 + r + 1),
            q.bm25.get(d, 0.0) / best,
            q.cover.get(d, 0.0),
            cos,
            cos - top,
            pcos,
            pcos - ptop,
            0.0 if sr is None else 1 / (5 + sr + 1),
            0.0 if pr is None else 1 / (5 + pr + 1),
            0.0 if sr is None else 1 / (60 + sr + 1),
        )
    unfound = 0.0 if q.found else 1.0
    short = 1.0 if q.words <= 2 else 0.0
    cols = BASE.index("cover"), BASE.index("cos")
    x = np.hstack([base, unfound * base, short * base[:, cols]])
    return cands, x


# -- training ------------------------------------------------------------------------------------------------------


@dataclass
class Batch:
    x: Any  # every candidate's features, the queries' one after another
    y: Any  # 1.0 for a relevant candidate
    start: Any  # where each query's candidates start
    cands: list[list[int]]
    rrf: Any  # each candidate's place in toolrun's ranking
    prior: Any  # toolrun's rule as weights of these columns (RRF_PRIOR)


def batch(queries: list[Query], cols: list[int]) -> Batch:
    import numpy as np

    xs, ys, starts, cands, places = [], [], [], [], []
    at = 0
    for q in queries:
        c, x = FEATS[id(q)]
        xs.append(x[:, cols])
        ys.append(np.array([d in q.ok for d in c], dtype=float))
        place = {d: i for i, d in enumerate(toolrun_rrf(q))}
        places.append(np.array([place[d] for d in c]))
        starts.append(at)
        cands.append(c)
        at += len(c)
    prior = np.array([RRF_PRIOR.get(FEATURES[i], 0.0) for i in cols])
    return Batch(np.vstack(xs), np.concatenate(ys), np.array(starts), cands, np.concatenate(places), prior)


def rrf_prior() -> dict[str, float]:
    """toolrun's RRF as a linear scorer over FEATURES (exact: the same scores, so the same ranking)."""
    from toolrun.search import semantic as s

    assert s.RRF_K == 5
    w, u, p = s.SEMANTIC_WEIGHT, s.SEMANTIC_WEIGHT_UNFOUND, s.PARAMS_WEIGHT
    return {"lex5": 1.0, "sem5": w, "psem5": w * p, "unfound*sem5": u - w, "unfound*psem5": (u - w) * p}


RRF_PRIOR = rrf_prior()


@dataclass(frozen=True)
class Fit:
    l2: float
    loss: str  # listwise, pairwise, or coordinate (ascent on R@3 + MRR, from toolrun's rule)
    prior: bool = False  # regularise towards toolrun's rule (RRF_PRIOR) instead of towards 0, and start there
    head: int = 0  # train on the candidates in toolrun's first `head` only (and the relevant ones): hard negatives


FEATS: dict[int, tuple[list[int], Any]] = {}


def train(b: Batch, fit: Fit, steps: int = 400) -> tuple[Any, Any, Any]:
    """Weights (over standardised features: mean, scale, w) by full-batch Adam."""
    import numpy as np

    l2, loss = fit.l2, fit.loss
    mean, scale = b.x.mean(axis=0), b.x.std(axis=0) + 1e-9
    x = (b.x - mean) / scale
    has = np.add.reduceat(b.y, b.start) > 0  # queries with a relevant candidate (the others teach nothing)
    qid = np.repeat(np.arange(len(b.start)), np.diff(np.append(b.start, len(b.y))))
    keep = has[qid]
    if fit.head:
        keep &= (b.rrf < fit.head) | (b.y > 0)
    x, y, qid = x[keep], b.y[keep], np.searchsorted(np.flatnonzero(has), qid[keep])
    starts = np.flatnonzero(np.diff(np.append(-1, qid)))
    nq = len(starts)
    if loss == "pairwise":
        pos, neg, pw = pairs(y, qid)
    w0 = b.prior * scale if fit.prior or loss == "coordinate" else np.zeros(x.shape[1])
    if loss == "coordinate":
        return mean, scale, coordinate(x, y, qid, starts, w0, l2)
    w = w0.copy()
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t in range(1, steps + 1):
        s = x @ w
        if loss == "listwise":
            mx = np.maximum.reduceat(s, starts)[qid]
            e = np.exp(s - mx)
            p_all = e / np.add.reduceat(e, starts)[qid]
            er = e * y
            p_rel = er / np.add.reduceat(er, starts)[qid]
            grad = x.T @ (p_all - p_rel) / nq
        else:
            z = s[pos] - s[neg]
            g = -1 / (1 + np.exp(z))  # d/dz log(1 + e^-z)
            gs = np.zeros_like(s)
            np.add.at(gs, pos, g * pw)
            np.add.at(gs, neg, -g * pw)
            grad = x.T @ gs / nq
        grad += l2 * (w - w0)
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        w -= 0.05 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return mean, scale, w


def measure(s: Any, y: Any, qid: Any, starts: Any) -> float:
    """R@3 + MRR (over the first 10) of scores `s` (ties counted in the relevant tool's favour)."""
    import numpy as np

    best = np.maximum.reduceat(np.where(y > 0, s, -np.inf), starts)
    above = np.add.reduceat((y == 0) & (s > best[qid]), starts)
    return float(np.mean(above < 3) + np.mean(np.where(above < 10, 1 / (above + 1), 0.0)))


STEPS = (-1.0, -0.5, -0.2, -0.1, -0.05, -0.02, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


def coordinate(x: Any, y: Any, qid: Any, starts: Any, w0: Any, l2: float, rounds: int = 4) -> Any:
    """Coordinate ascent on R@3 + MRR itself (RankLib's), from toolrun's rule: each weight in turn moved by the
    step (a share of the lexical rank's weight, which stays) that does best, less l2 x the squared distance from
    toolrun's weights (over the lexical weight's square)."""
    import numpy as np

    anchor = int(np.argmax(w0))
    unit = abs(float(w0[anchor]))
    w = w0.copy()
    s = x @ w

    def value(s: Any, w: Any) -> float:
        return measure(s, y, qid, starts) - l2 * float(np.sum((w - w0) ** 2)) / unit**2

    now = value(s, w)
    for _ in range(rounds):
        moved = False
        for j in range(len(w)):
            if j == anchor:
                continue
            for d in STEPS:
                trial = w.copy()
                trial[j] += d * unit
                got = value(s + d * unit * x[:, j], trial)
                if got > now + 1e-9:
                    now, w, s, moved = got, trial, s + d * unit * x[:, j], True
        if not moved:
            break
    return w


def pairs(y: Any, qid: Any) -> tuple[Any, Any, Any]:
    """Each (relevant, non-relevant) pair of a query's candidates, and its weight (a query's pairs weigh 1)."""
    import numpy as np

    pos, neg = [], []
    for q in np.unique(qid):
        idx = np.flatnonzero(qid == q)
        rel, non = idx[y[idx] > 0], idx[y[idx] == 0]
        pos.append(np.repeat(rel, len(non)))
        neg.append(np.tile(non, len(rel)))
    p, n = np.concatenate(pos), np.concatenate(neg)
    counts = np.bincount(qid[p])
    return p, n, 1.0 / counts[qid[p]]


def ranked(b: Batch, model: tuple[Any, Any, Any]) -> list[list[int]]:
    mean, scale, w = model
    s = ((b.x - mean) / scale) @ w
    out = []
    ends = [*b.start[1:], len(s)]
    for i, (a, e) in enumerate(zip(b.start, ends, strict=True)):
        c = b.cands[i]
        order = sorted(range(e - a), key=lambda j: (-s[a + j], c[j]))
        out.append([c[j] for j in order])
    return out


# -- evaluation ----------------------------------------------------------------------------------------------------

Table = dict[str, tuple[float, float, float, float]]


def evaluate(queries: list[Query], rankings: list[list[int]]) -> Table:
    rows: dict[str, list[tuple[float, float, float, float]]] = {}
    for q, r in zip(queries, rankings, strict=True):
        rank = next((i for i, d in enumerate(r[:10]) if d in q.ok), None)
        row = (0.0, 0.0, 0.0, 0.0) if rank is None else (float(rank == 0), float(rank < 3), 1.0, 1 / (rank + 1))
        rows.setdefault(q.kind, []).append(row)
        rows.setdefault("all", []).append(row)
    return {k: tuple(sum(r[i] for r in v) / len(v) for i in range(4)) for k, v in rows.items()}  # type: ignore[misc]


def cross_validated(
    sets: dict[str, list[Query]], cols: list[int], fit: Fit
) -> dict[str, tuple[list[Query], list[list[int]]]]:
    """Rankings of queries by a scorer that never saw them: dev by dev-2's, dev-2 by dev's, and the union by 5
    folds (each query scored by the folds it is not in)."""
    import numpy as np

    dev, dev2 = sets["dev"], sets["dev-2"]
    out = {
        "dev (trained on dev-2)": (dev, ranked(batch(dev, cols), train(batch(dev2, cols), fit))),
        "dev-2 (trained on dev)": (dev2, ranked(batch(dev2, cols), train(batch(dev, cols), fit))),
    }
    union = dev + dev2
    fold = np.random.default_rng(26).permutation(len(union)) % 5
    got: list[list[int]] = [[] for _ in union]
    for f in range(5):
        test = [q for q, k in zip(union, fold, strict=True) if k == f]
        model = train(batch([q for q, k in zip(union, fold, strict=True) if k != f], cols), fit)
        for i, r in zip(np.flatnonzero(fold == f), ranked(batch(test, cols), model), strict=True):
            got[i] = r
    out["dev, 5 folds of dev+dev-2"] = (dev, got[: len(dev)])
    out["dev-2, 5 folds of dev+dev-2"] = (dev2, got[len(dev) :])
    return out


FEATURE_SETS: dict[str, list[str]] = {
    "rrf inputs": ["lex5", "sem5", "psem5", "unfound*sem5", "unfound*psem5"],
    "ranks": ["lex5", "lex60", "sem5", "psem5", "sem60", *(f"unfound*{f}" for f in ("lex5", "sem5", "psem5"))],
    "ranks+cos": [
        "lex5",
        "lex60",
        "sem5",
        "psem5",
        "cos",
        "cosgap",
        "pcos",
        *(f"unfound*{f}" for f in ("lex5", "sem5", "psem5", "cos", "cosgap")),
    ],
    "ranks+bm25+cover": [
        "lex5",
        "lex60",
        "bm25",
        "cover",
        "sem5",
        "psem5",
        *(f"unfound*{f}" for f in ("lex5", "bm25", "cover", "sem5", "psem5")),
    ],
    "no ranks": ["bm25", "cover", "cos", "cosgap", "pcos", "pcosgap", *(f"unfound*{f}" for f in ("bm25", "cover"))],
    "all": FEATURES,
}


def candidates(groups: list[str]) -> dict[str, tuple[str, Fit]]:
    """plain: weights regularised towards 0; prior: towards toolrun's rule (a strong l2 keeps it); head: trained
    on the candidates in toolrun's first 20 only (plus the relevant ones), the places R@3 is decided; coordinate:
    ascent on R@3 + MRR from toolrun's rule."""
    out: dict[str, tuple[str, Fit]] = {}
    if "coordinate" in groups:
        for fs in ("rrf inputs", "ranks", "ranks+bm25+cover", "ranks+cos", "all"):
            for l2 in (0.0, 0.01, 0.1):
                out[f"{fs}, coordinate ascent, l2 {l2}"] = (fs, Fit(l2, "coordinate"))
    for loss in ("listwise", "pairwise"):
        if "plain" in groups:
            for fs in FEATURE_SETS:
                for l2 in (0.001, 0.01, 0.1):
                    out[f"{fs}, {loss}, l2 {l2}"] = (fs, Fit(l2, loss))
        for fs in ("rrf inputs", "ranks", "ranks+bm25+cover", "ranks+cos", "all"):
            if "prior" in groups:
                for l2 in (0.03, 0.1, 0.3, 1.0):
                    out[f"{fs}, {loss}, l2 {l2} to toolrun"] = (fs, Fit(l2, loss, prior=True))
            if "head" in groups:
                for l2 in (0.01, 0.1):
                    out[f"{fs}, {loss}, l2 {l2}, head 20"] = (fs, Fit(l2, loss, head=20))
                out[f"{fs}, {loss}, l2 0.3 to toolrun, head 20"] = (fs, Fit(0.3, loss, prior=True, head=20))
    return out


def print_table(title: str, results: list[tuple[str, Table]]) -> None:
    kinds = sorted({k for _, t in results for k in t if k != "all"})
    print(f"{title}: R@3 per kind, then R@1 R@3 R@10 MRR of all")
    print(f"  {'rule':<52} " + " ".join(f"{k[:5]:>5}" for k in kinds) + "   R@1   R@3  R@10   MRR")
    for name, t in results:
        cells = " ".join(f"{t[k][1]:>5.2f}" if k in t else "    -" for k in kinds)
        print(f"  {name:<52} {cells} " + " ".join(f"{v:>5.3f}" for v in t["all"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, help="keep the tools' vectors here between runs")
    parser.add_argument("--data", type=Path, default=Path("/tmp/ltr_data"), help="keep the queries' data here")
    parser.add_argument("--only", nargs="*", help="only these candidates (by name)")
    parser.add_argument("--weights", action="store_true", help="print the weights trained on dev+dev-2")
    parser.add_argument(
        "--groups",
        nargs="*",
        default=["plain", "prior", "head", "coordinate"],
        help="which candidates: plain, prior, head, coordinate",
    )
    args = parser.parse_args()
    if args.cache:
        se.CACHE.append(args.cache)
    sets = load_sets(args.data)
    for qs in sets.values():
        for q in qs:
            FEATS[id(q)] = features(q)
    grid = candidates(args.groups)
    if args.only:
        grid = {n: grid[n] for n in args.only}
    baseline = {"dev": evaluate(sets["dev"], [toolrun_rrf(q) for q in sets["dev"]])}
    baseline["dev-2"] = evaluate(sets["dev-2"], [toolrun_rrf(q) for q in sets["dev-2"]])
    results: dict[str, list[tuple[str, Table]]] = {}
    for split in ("dev", "dev-2"):  # check: toolrun's rule as weights, through the linear scorer, ranks the same
        cols = [FEATURES.index(f) for f in FEATURE_SETS["rrf inputs"]]
        b = batch(sets[split], cols)
        same = evaluate(sets[split], ranked(b, (0.0, 1.0, b.prior)))
        assert same == baseline[split], (split, same, baseline[split])
    for name, (fs, fit) in grid.items():
        cols = [FEATURES.index(f) for f in FEATURE_SETS[fs]]
        for split, (qs, rankings) in cross_validated(sets, cols, fit).items():
            results.setdefault(split, [("toolrun RRF", baseline[split.split(" ")[0].rstrip(",")])]).append(
                (name, evaluate(qs, rankings))
            )
        if args.weights:
            _, scale, w = train(batch(sets["dev"] + sets["dev-2"], cols), fit)
            print(name, {f: round(float(v), 4) for f, v in zip(FEATURE_SETS[fs], w / scale, strict=True)})
    for split, rows in results.items():
        rows[1:] = sorted(rows[1:], key=lambda r: (-r[1]["all"][1], -r[1]["all"][3]))
        print_table(split, rows)


if __name__ == "__main__":
    main()
