"""Tool vectors: the texts a tool and a query are embedded from, the catalog's vectors file, and the nearest tools.

Each tool is embedded twice, once per catalog version (`document`: its groups, name, description, keywords and
params; `params_document`: its params alone), and the vectors are cached on disk, in `<cache dir>/semantic/<digest>.npy`
(the documents' rows, then the params documents'), where the digest covers the model and every tool's texts: a reload
that changes nothing reuses the file, and the workers of a server map the same file (one copy in memory, shared).
One worker embeds a new catalog (a file lock), in small batches: the others wait for its file (`VectorCache`). Where
the embedding helper ranks, a worker writes the file from the helper's raw float32 bytes and maps nothing
(`RawVectorCache`). `nearest` ranks a caller's tools by cosine similarity (numpy, imported only when it runs).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import struct
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .state import CatalogRows, SemanticState, Vectors

if TYPE_CHECKING:
    from ..models import ToolSpec

log = logging.getLogger("toolrun.search")

SEMANTIC_TOP = 50  # nearest tools fused (and counted as matches)
SEMANTIC_DIVERSITY = 0.5  # how strongly a near tool much like a nearer one is held back (0: not at all)
BUILD_BATCH = 32  # texts per request while embedding a catalog: queries get their turn in between
HELPER_WAIT = 120.0  # seconds a catalog build waits for the helper to answer

Embed = Callable[[list[str]], Any]


def document(tool: ToolSpec) -> str:
    """The text a tool is embedded from: groups, name, description, keywords, and each param with its description.

    (Chosen on the dev set over the name and description alone, the description alone, param names without their
    descriptions, and the greater or the mean similarity of separate embeddings: docs/decisions.md.)"""
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
    MRR 0.82 -> 0.85; docs/decisions.md.)"""
    params = [f"{p.name.replace('_', ' ')}: {p.description}" if p.description else p.name for p in tool.params]
    if params:
        return " ".join(params)
    groups = " ".join(g for g in tool.groups if g != "public")
    return f"{groups} {tool.name.replace('_', ' ')}".lstrip()


def documents(tools: Sequence[ToolSpec]) -> list[str]:
    """What a catalog's tools are embedded from: each tool's `document`, then each tool's `params_document`."""
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
    chosen = diversify(matrix[top if len(rows) == len(sims) else rows[top]], own[top], SEMANTIC_DIVERSITY)
    return [int(top[i]) for i in chosen], [round(float(own[top[i]]), 4) for i in chosen]


def diversify(vectors: Any, sims: Any, strength: float = SEMANTIC_DIVERSITY) -> list[int]:
    """Positions of the nearest tools (`vectors`, their similarities `sims`, nearest first) re-ordered so that near-
    duplicates take turns (maximal marginal relevance): each next place goes to the tool with the best similarity less
    `strength` (SEMANTIC_DIVERSITY) x its greatest similarity to a tool placed above it. The nearest stays first.

    (Chosen on the dev set: R@3 0.84 -> 0.90 with the 50 nearest, flat between 0.3 and 0.7; docs/decisions.md.)"""
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


NPY_HEADER = 128  # bytes before the vectors in a file HelperSemantic writes (a .npy file, version 1.0)


def npy_header(count: int, dim: int) -> bytes:
    """The header of a .npy file holding a C-order float32 matrix of `count` rows of `dim`, NPY_HEADER bytes."""
    order = "<" if sys.byteorder == "little" else ">"
    text = f"{{'descr': '{order}f4', 'fortran_order': False, 'shape': ({count}, {dim}), }}"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", NPY_HEADER - 10) + text.ljust(NPY_HEADER - 11).encode() + b"\n"


class VectorCache:
    """A catalog's tool vectors, embedded with `embed` (a model of id `model_id`) and kept in `cache_dir` (None: in
    memory only), mapped by this process."""

    def __init__(self, embed: Embed, model_id: str, cache_dir: Path | None) -> None:
        self.embed = embed
        self.model_id = model_id
        self.cache_dir = cache_dir

    def catalog(self, state: SemanticState, tools: dict[str, ToolSpec]) -> tuple[str, dict[str, int]]:
        """The catalog's vectors id and each tool's row, computed once per registry (kept in its `state`). A server
        computes them before it forks its workers (`mount_semantic`): a worker that read every tool's texts itself
        would copy the pages of the catalog it shares (about 17 MB a worker at 10,000 tools)."""
        found = state.catalog
        if found is not None and found.model_id == self.model_id:
            return found.digest, found.rows
        keys = list(tools)
        docs = documents(list(tools.values()))
        digest = hashlib.sha256("\0".join([self.model_id, *keys, *docs]).encode()).hexdigest()[:32]
        rows = {key: row for row, key in enumerate(keys)}
        state.catalog = CatalogRows(self.model_id, digest, rows)
        return digest, rows

    def load(self, state: SemanticState, tools: dict[str, ToolSpec]) -> Vectors:
        """The catalog's vectors: from the cache file when there is one, else embedded now (and written there)."""
        digest, rows = self.catalog(state, tools)
        if self.cache_dir is None:
            return self._split(rows, self._embed_all(documents(list(tools.values()))))
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        path = self.cache_dir / f"{digest}.npy"
        if not path.exists():
            with open(self.cache_dir / f"{digest}.lock", "a+b") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # one worker embeds; the others wait for its file
                if not path.exists():
                    started = time.perf_counter()
                    part = path.with_suffix(f".{os.getpid()}.part")
                    docs = documents(list(tools.values()))
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

        parts = [self.embed_patiently(list(docs[i : i + BUILD_BATCH])) for i in range(0, len(docs), BUILD_BATCH)]
        return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32) if parts else np.zeros((0, 1))

    def embed_patiently(self, texts: list[str]) -> Any:
        """The helper may still be starting (loading its model): retry connection failures for a while."""
        deadline = time.monotonic() + HELPER_WAIT
        while True:
            try:
                return self.embed(texts)
            except (ConnectionError, FileNotFoundError) as exc:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no embedding helper answered in {HELPER_WAIT:.0f}s") from exc
                time.sleep(0.2)


class RawVectorCache(VectorCache):
    """The cache where the embedding helper ranks: `embed` answers float32 bytes, written after a .npy header, and this
    process maps nothing (each worker of a server would hold its own numpy, about 10 MB): `Vectors` with the path."""

    def _write(self, part: Path, docs: Sequence[str]) -> None:
        dim = 0
        with open(part, "wb") as out:
            out.write(bytes(NPY_HEADER))
            for start in range(0, len(docs), BUILD_BATCH):
                batch = list(docs[start : start + BUILD_BATCH])
                raw = self.embed_patiently(batch)
                dim = len(raw) // (4 * len(batch))
                out.write(raw)
            out.seek(0)
            out.write(npy_header(len(docs), dim))

    def _open(self, rows: dict[str, int], path: Path) -> Vectors:
        return Vectors(rows, None, None, str(path))
