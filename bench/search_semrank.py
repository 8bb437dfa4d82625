"""The semantic side of search, its candidates compared on dev (issue 26): what the query is embedded from, feedback
on the query vector, a second vector per tool, and the fusion's constants with them.

    .venv/bin/python bench/search_semrank.py --cache /tmp/vectors            # every candidate on dev, dev-extra, dev-2
    .venv/bin/python bench/search_semrank.py --cache /tmp/vectors --only kept 'third list'
    .venv/bin/python bench/search_semrank.py --cache /tmp/vectors --fine --only fine kept   # each constant a step aside

Each query's lexical ranking (toolrun's) and its vector are computed once (query vectors are kept in
`--cache` too, by text), and each candidate ranks from those, the way `toolrun.search.semantic.Semantic.rank` does:
RRF of the first 100 lexical results and the 50 nearest tools (near-duplicates taking turns), the semantic list
weighing SEMANTIC_WEIGHT when every query word is found in the tools, else SEMANTIC_WEIGHT_UNFOUND. The rule
`before (main)` is what toolrun did before this round; `kept` what it does now (KEPT). Dev only: choose here, on
dev and dev-2 together (the `dev+dev-2` table: both sets' queries as one); held-out is run apart by search_eval.py.
Figures: bench/README.md.
"""

from __future__ import annotations

import argparse
import pickle
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_eval as se

VECTORS: dict[str, Any] = {}  # text -> its vector (kept in --cache/queries.pkl)
CACHE: list[Path] = []


def embed(texts: list[str]) -> Any:
    import numpy as np

    missing = list(dict.fromkeys(t for t in texts if t not in VECTORS))
    if missing:
        for text, vector in zip(missing, se.semantic_model().embed(missing), strict=True):
            VECTORS[text] = vector
        if CACHE:
            (CACHE[0] / "queries.pkl").write_bytes(pickle.dumps(VECTORS))
    return np.array([VECTORS[t] for t in texts], dtype=np.float32)


def as_typed(query: str) -> str:
    return " ".join(query.split()).lower()[:500]


# -- query cleaning: values that say nothing of the tool -----------------------------------------------------------

_ASSIGN = re.compile(r"([^\W\d][\w.-]*)=(\"[^\"]*\"|'[^']*'|\S*)")
_QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'|`[^`]*`")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_IP = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?(?:/\d+)?\b")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2})?)?\b", re.I)
_NUMBER = re.compile(r"(?<![\w/.-])[-+]?\d[\d.,:]*[a-z]{0,2}(?![\w/.-])", re.I)  # 42, 1.5, 100m, 2h, 10:30
# an id: a word with a digit after a hyphen (api-7f, checkout-7f) or 8+ letters and digits mixed (a1b2c3d4); not a
# product name (s3, k8s, ec2) nor a host (web3)
_BARE = re.compile(r"(?<![\w/.-])[-+]?\d[\d.,:]*(?![\w/.-])")  # a number without a unit
_IDLIKE = re.compile(r"(?<![\w/.-])(?:[\w.]+-[\w.-]*\d[\w.-]*|(?=[a-z]*\d)(?=\d*[a-z])[a-z\d]{8,})(?![\w/.-])", re.I)
_PATH = re.compile(r"(?<!\w)(?:~|\.{1,2})?/[\w.@%+-]+(?:/[\w.@%+-]*)*")


def _tidy(text: str) -> str:
    return " ".join(text.split())


def clean(query: str, level: str) -> str:
    """The query with its values removed (or, `typed`, named by their kind); the query itself when nothing is left."""
    text = query
    if level == "none":
        return as_typed(query)
    text = _ASSIGN.sub(r"\1", text)
    if level != "assign":
        kinds = level.endswith("typed")
        mail = level.split("email=")[1] if "email=" in level else "email address"
        for pattern, name in ((_URL, "url"), (_EMAIL, mail), (_IP, "address"), (_QUOTED, "")):
            text = pattern.sub(f" {name} " if kinds else " ", text)
        if "numbers" in level or "ids" in level:
            text = _DATE.sub(" ", text)
            text = (_BARE if "bare" in level else _NUMBER).sub(" ", text)
        if "ids" in level:
            text = _IDLIKE.sub(" ", text)
        if "paths" in level:
            text = _PATH.sub(" ", text)
    out = as_typed(_tidy(text))
    return out if re.search(r"[^\W\d_]", out) else as_typed(query)


CLEANING = ("none", "assign", "values", "values+numbers", "values+numbers+ids", "values+numbers+ids+paths",
            "values+numbers+ids, typed", "values+numbers, typed", "values, typed", "values+bare numbers, typed",
            "values+bare numbers+ids, typed", "values+bare numbers, typed email=address",
            "values+bare numbers, typed email=user", "values+bare numbers, typed email=user at host",
            "values+bare numbers, typed email=account")  # fmt: skip


# -- the sets ------------------------------------------------------------------------------------------------------


@dataclass
class Query:
    kind: str
    text: str
    ok: set[int]
    lexical: list[int]
    found: bool
    vectors: dict[str, Any]  # cleaning level -> the query's vector
    sims: dict[str, Any] = field(default_factory=dict)  # cleaning level -> similarity to each tool
    terms: list[str] = field(default_factory=list)
    expanded: dict[tuple[int, float], list[int]] = field(default_factory=dict)  # (n, cos) -> lexical ranking


@dataclass
class Set:
    name: str
    queries: list[Query]
    matrix: Any  # the tools' vectors (semantic.document), in index order
    others: dict[str, Any]  # other tool texts' vectors
    index: Any = None
    words: list[str] = field(default_factory=list)  # the tools' vocabulary (the `expand` branch's cheaper variant)
    word_vectors: Any = None


def _name(tool: Any) -> str:
    groups = " ".join(g for g in tool.groups if g != "public")
    return f"{groups} {tool.name.replace('_', ' ')}".strip()


TOOL_TEXTS: dict[str, Callable[[Any], str]] = {
    "name+description": lambda t: f"{_name(t)}: {t.description}",
    "name": _name,
    "params": lambda t: " ".join(f"{p.name.replace('_', ' ')}: {p.description}" for p in t.params) or _name(t),
}


def prepare(text: str, asked: list[tuple[str, str, set[str]]], workdir: Path, name: str) -> Set:
    import numpy as np

    from toolrun.search.semantic import found_in
    from toolrun.search.textsearch import query_words

    registry, admin, _ = se.load_registry(text, workdir, semantic=True)
    index = registry.index(admin)
    rows = np.array([registry.vectors.rows[t.key] for t in index.tools])
    matrix = np.ascontiguousarray(np.asarray(registry.vectors.matrix)[rows])
    others = {n: embed([f(t) for t in index.tools]) for n, f in TOOL_TEXTS.items()}
    keys = [t.key for t in index.tools]
    queries = []
    for kind, q, ok in asked:
        terms = query_words(q)
        lexical, _ = index.rank(terms, 100) if terms else ([], 0)
        texts = {level: clean(q, level) for level in CLEANING}
        vecs = dict(zip(texts, embed(list(texts.values())), strict=True))
        query = Query(kind, q, {i for i, k in enumerate(keys) if k in ok}, lexical[:100], found_in(index, terms), vecs)
        query.sims = {level: matrix @ v for level, v in vecs.items()}
        queries.append(query)
    from toolrun.search.textsearch import STOP_WORDS

    vocab = [w for w in index.raw_sorted if len(w) >= 3 and w.isalpha() and w not in STOP_WORDS]
    for query in queries:
        query.terms = query_words(query.text)
    return Set(name, queries, matrix, others, index, vocab, embed(vocab))


# -- ranking -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    k: float = 5
    weight: float = 0.3
    unfound: float = 3.0
    top: int = 50
    mmr: float = 0.5
    cleaning: str = "none"
    prf_m: int = 0  # feedback: the query vector moved towards the mean of its m first tools
    prf_beta: float = 0.0
    prf_from: str = "nearest"  # or "fused": the first m of the fused ranking
    third: str = ""  # another tool text's nearest, as a third RRF list
    third_weight: float = 0.0  # its weight, as a share of the semantic list's
    pool: str = ""  # another tool text's similarity combined with the document's: "max:name+description", ...


# What toolrun.search.semantic does now: the query's values cleaned, the params' nearest as a third list at 0.3.
KEPT = Rule(cleaning="values+bare numbers, typed", third="params", third_weight=0.3)


def nearest(sims: Any, n: int) -> list[int]:
    import numpy as np

    n = min(n, len(sims))
    top = np.argpartition(-sims, n - 1)[:n]
    return [int(d) for d in top[np.argsort(-sims[top], kind="stable")]]


def diverse(matrix: Any, sims: Any, n: int, strength: float) -> list[int]:
    """The n nearest, re-ordered as toolrun's `diversify` does, at `strength`."""
    from toolrun.search.semantic import diversify

    near = nearest(sims, n)
    if not strength:
        return near
    return [near[i] for i in diversify(matrix[near], sims[near], strength)]


def fuse(rule: Rule, q: Query, lists: list[tuple[list[int], float]]) -> list[int]:
    scores: dict[int, float] = {}
    for r, d in enumerate(q.lexical):
        scores[d] = 1 / (rule.k + r + 1)
    for ranked, w in lists:
        for r, d in enumerate(ranked):
            scores[d] = scores.get(d, 0.0) + w / (rule.k + r + 1)
    return sorted(scores, key=lambda d: (-scores[d], d))


def similarities(rule: Rule, s: Set, q: Query) -> Any:
    import numpy as np

    sims = q.sims[rule.cleaning]
    if rule.pool:
        how, text = rule.pool.split(":")
        other = s.others[text] @ q.vectors[rule.cleaning]
        sims = np.maximum(sims, other) if how == "max" else (sims + other) / 2
    return sims


def ranking(rule: Rule, s: Set, q: Query) -> list[int]:
    import numpy as np

    w = rule.weight if q.found else rule.unfound
    sims = similarities(rule, s, q)
    lists = [(diverse(s.matrix, sims, rule.top, rule.mmr), w)]
    if rule.third:
        other = s.others[rule.third] @ q.vectors[rule.cleaning]
        lists.append((diverse(s.others[rule.third], other, rule.top, rule.mmr), w * rule.third_weight))
    fused = fuse(rule, q, lists)
    if not rule.prf_m:
        return fused
    first = fused[: rule.prf_m] if rule.prf_from == "fused" else lists[0][0][: rule.prf_m]
    moved = q.vectors[rule.cleaning] + rule.prf_beta * s.matrix[first].mean(axis=0)
    moved /= np.linalg.norm(moved)
    sims = s.matrix @ moved
    lists[0] = (diverse(s.matrix, sims, rule.top, rule.mmr), w)
    return fuse(rule, q, lists)


def expanded(s: Set, q: Query, n: int, cos: float, cleaning: str) -> list[int]:
    """The `expand` branch's cheaper variant, approximated: when a query word is in no tool, the n vocabulary words
    nearest the whole query's vector (cosine >= cos) are searched too (added to the query's words)."""
    if q.found or not q.terms:
        return q.lexical
    key = (n, cos)
    if key not in q.expanded:
        sims = s.word_vectors @ q.vectors[cleaning]
        near = [s.words[i] for i in nearest(sims, n) if sims[i] >= cos and s.words[i] not in q.terms]
        q.expanded[key] = s.index.rank(q.terms + near, 100)[0] if near else q.lexical
    return q.expanded[key]


def with_expansion(rule: Rule, n: int, cos: float) -> Callable[[Set, Query], list[int]]:
    def rank(s: Set, q: Query) -> list[int]:
        lexical = expanded(s, q, n, cos, rule.cleaning)
        other = Query(q.kind, q.text, q.ok, lexical, q.found, q.vectors, q.sims, q.terms)
        return ranking(rule, s, other)

    return rank


def evaluate(rule: Rule | Callable[[Set, Query], list[int]], s: Set) -> dict[str, tuple[float, ...]]:
    rows: dict[str, list[tuple[float, float, float, float]]] = {}
    for q in s.queries:
        ranked = (ranking(rule, s, q) if isinstance(rule, Rule) else rule(s, q))[:10]
        rank = next((i for i, d in enumerate(ranked) if d in q.ok), None)
        row = (0.0, 0.0, 0.0, 0.0) if rank is None else (float(rank == 0), float(rank < 3), 1.0, 1 / (rank + 1))
        rows.setdefault(q.kind, []).append(row)
        rows.setdefault("all", []).append(row)
    return {k: tuple(sum(r[i] for r in v) / len(v) for i in range(4)) for k, v in rows.items()}


def semantic_alone(cleaning: str) -> Callable[[Set, Query], list[int]]:
    return lambda s, q: nearest(q.sims[cleaning], 10)


def candidates() -> dict[str, Rule | Callable[[Set, Query], list[int]]]:
    out: dict[str, Rule | Callable[[Set, Query], list[int]]] = {"before (main)": Rule(), "kept": KEPT}
    for level in CLEANING[1:]:
        out[f"semantic alone, clean: {level}"] = semantic_alone(level)
        out[f"clean: {level}"] = Rule(cleaning=level)
    out["semantic alone"] = semantic_alone("none")
    for m in (1, 2, 3, 5):
        for beta in (0.2, 0.35, 0.5, 0.75, 1.0):
            for source in ("nearest", "fused"):
                out[f"feedback {source} m{m} b{beta}"] = Rule(prf_m=m, prf_beta=beta, prf_from=source)
    for n in (1, 2, 3, 5):
        for cos in (0.3, 0.4, 0.5):
            out[f"kept + expansion, {n} nearest words >= {cos}"] = with_expansion(KEPT, n, cos)
    for text in TOOL_TEXTS:
        for share in (0.25, 0.5, 1.0):
            out[f"third list [{text}] x{share}"] = Rule(third=text, third_weight=share)
        out[f"max [{text}]"] = Rule(pool=f"max:{text}")
        out[f"mean [{text}]"] = Rule(pool=f"mean:{text}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, help="keep the tools' and queries' vectors here between runs")
    parser.add_argument("--only", nargs="*", help="only the candidates whose name starts with one of these")
    parser.add_argument("--grid", action="store_true", help="also the fusion constants around the best candidates")
    parser.add_argument("--fine", action="store_true", help="also each of the kept constants a step either side")
    parser.add_argument(
        "--varied-params",
        action="store_true",
        help="a check, not a set to choose on: the dev catalog's filler tools take params described after their own "
        "object and verb (on dev they all share `target: Which <domain> to work on. limit: How many.`)",
    )
    args = parser.parse_args()
    if args.cache:
        args.cache.mkdir(parents=True, exist_ok=True)
        se.CACHE.append(args.cache)
        CACHE.append(args.cache)
        stored = args.cache / "queries.pkl"
        if stored.exists():
            VECTORS.update(pickle.loads(stored.read_bytes()))
    rules = candidates()
    if args.grid:
        rules.update(grid())
    if args.fine:
        rules.update(fine())
    if args.only:
        rules = {n: r for n, r in rules.items() if any(n.startswith(o) for o in args.only)}
    if args.varied_params:
        se.filler = varied_filler  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as tmp:
        text = se.catalog_text()
        (Path(tmp) / "dev").mkdir()
        dev = prepare(text, se.queries() + se.extra_queries(), Path(tmp) / "dev", "dev")
        extra = Set("dev-extra", dev.queries[280:], dev.matrix, dev.others, dev.index, dev.words, dev.word_vectors)
        dev.queries = dev.queries[:280]
        (Path(tmp) / "dev-2").mkdir()
        dev2 = prepare(se.dev2_catalog_text(), se.dev2_queries(), Path(tmp) / "dev-2", "dev-2")
        results = {s.name: {name: evaluate(rule, s) for name, rule in rules.items()} for s in (dev, extra, dev2)}
        results["dev+dev-2"] = {
            name: together(results["dev"][name], results["dev-2"][name], 280, 240) for name in rules
        }
        for s_name in ("dev", "dev-extra", "dev-2", "dev+dev-2"):
            tables = results[s_name]
            kinds = sorted(k for k in next(iter(tables.values())) if k != "all")
            size = {"dev": 280, "dev-extra": 56, "dev-2": 240, "dev+dev-2": 520}[s_name]
            print(f"{s_name}: {size} queries; R@3 per kind, then R@1 R@3 R@10 MRR of all")
            print(f"  {'rule':<48} " + " ".join(f"{k[:5]:>5}" for k in kinds) + "   R@1   R@3  R@10   MRR")
            for name, table in sorted(tables.items(), key=lambda r: (-r[1]["all"][1], -r[1]["all"][3], r[0])):
                cells = " ".join(f"{table[k][1]:>5.2f}" if k in table else "    -" for k in kinds)
                print(f"  {name:<48} {cells} " + " ".join(f"{v:>5.3f}" for v in table["all"]))


def together(a: dict[str, tuple[float, ...]], b: dict[str, tuple[float, ...]], na: int, nb: int) -> dict[str, Any]:
    """Two sets' figures as one: `all` over both sets' queries; per kind, each set's apart (`dev:task`, ...)."""
    out: dict[str, Any] = {"all": tuple((x * na + y * nb) / (na + nb) for x, y in zip(a["all"], b["all"], strict=True))}
    short = {"keyword": "key", "task": "task", "typo": "typo", "param": "parm", "paraphrase": "para", "mixed": "mix"}
    for prefix, table in (("1", a), ("2", b)):
        out.update({f"{prefix}{short[k]}": v for k, v in table.items() if k != "all"})
    return out


def varied_filler(copies: int = 1) -> list[tuple[str, str, str, list[tuple[str, str, str]]]]:
    """The dev catalog's filler tools, each with params described after its own object and verb."""
    out = []
    for group, name, desc, _ in FILLER[0](copies):
        verb, _, obj = name.partition("_")
        obj = obj.replace("_", " ")
        params = [
            ("target", "str", f"Which of the {obj} to {verb}."),
            ("limit", "int", f"How many {obj} at most."),
            ("format", "str", "Output format: text or json."),
        ]
        out.append((group, name, desc, params))
    return out


FILLER = [se.filler]


def grid() -> dict[str, Rule | Callable[[Set, Query], list[int]]]:
    out: dict[str, Rule | Callable[[Set, Query], list[int]]] = {}
    for text in ("params", "name"):
        for share in (0.1, 0.15, 0.2, 0.25, 0.35):
            for mmr in (0.0, 0.5):
                out[f"third list [{text}] x{share} mmr{mmr}"] = Rule(third=text, third_weight=share, mmr=mmr)
                if mmr:
                    c = "values+bare numbers, typed"
                    out[f"third list [{text}] x{share}, {c}"] = Rule(third=text, third_weight=share, cleaning=c)
            for k, w, u in ((3, 0.3, 3.0), (10, 0.3, 3.0), (5, 0.2, 3.0), (5, 0.5, 3.0), (5, 0.3, 2.0), (5, 0.3, 5.0)):
                out[f"third list [{text}] x{share} k{k} {w}/{u}"] = Rule(k, w, u, third=text, third_weight=share)
    c = KEPT.cleaning
    for k in (3, 5, 7, 10):
        for w in (0.2, 0.3, 0.5):
            for u in (2.0, 3.0, 5.0):
                out[f"kept, k{k} {w}/{u}"] = Rule(k, w, u, cleaning=c, third="params", third_weight=0.3)
    for top in (30, 50, 80):
        for mmr in (0.3, 0.5, 0.7):
            out[f"kept, {top} nearest, diversity {mmr}"] = Rule(
                top=top, mmr=mmr, cleaning=c, third="params", third_weight=0.3
            )
    return out


def fine() -> dict[str, Rule | Callable[[Set, Query], list[int]]]:
    """The kept rule with one constant (semantic.py's RRF_K, SEMANTIC_WEIGHT, SEMANTIC_WEIGHT_UNFOUND, PARAMS_WEIGHT,
    SEMANTIC_TOP, SEMANTIC_DIVERSITY) moved a step or two, and a few pairs."""
    steps: dict[str, tuple[float, ...]] = {
        "k": (3, 4, 6, 7),
        "weight": (0.2, 0.25, 0.35, 0.4, 0.5),
        "unfound": (2.0, 2.5, 3.5, 4.0),
        "third_weight": (0.2, 0.25, 0.35, 0.4, 0.5),
        "top": (40, 60, 80),
        "mmr": (0.4, 0.45, 0.55, 0.6),
    }
    out: dict[str, Rule | Callable[[Set, Query], list[int]]] = {}
    for field_name, values in steps.items():
        for v in values:
            value = int(v) if field_name == "top" else v
            out[f"fine: {field_name}={value}"] = replace(KEPT, **{field_name: value})
    for w, u in ((0.4, 4.0), (0.4, 3.5), (0.35, 3.5), (0.25, 2.5), (0.5, 4.0)):
        out[f"fine: weight={w} unfound={u}"] = replace(KEPT, weight=w, unfound=u)
    for k, w in ((4, 0.25), (6, 0.35), (6, 0.4), (7, 0.4)):
        out[f"fine: k={k} weight={w}"] = replace(KEPT, k=k, weight=w)
    return out


if __name__ == "__main__":
    main()
