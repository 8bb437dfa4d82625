"""A registry's semantic search state: one typed object, set by the semantic ranker (semantic.py), read by search.

Light on purpose: the registry imports it on every start, with or without `toolrun[semantic]`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .fusion import Fused
    from .relevance import Relevance
    from .textsearch import Index


@dataclass(frozen=True, slots=True)
class Vectors:
    """One catalog's tool vectors: a row per tool key (the matrices are mapped from the cache file)."""

    rows: dict[str, int]
    matrix: Any  # numpy array; None where the helper ranks (HelperSemantic): the worker holds no vectors
    params: Any = None  # each tool's params_document vector, the same rows
    path: str = ""  # the cache file


@dataclass(frozen=True, slots=True)
class CatalogRows:
    """A catalog's vectors id (the digest of the model and every tool's texts: its cache file's name) and each tool's
    row, for one model."""

    model_id: str
    digest: str
    rows: dict[str, int]


class Ranker(Protocol):
    """What search asks of a semantic ranker (semantic.Semantic)."""

    def rank(
        self, vectors: Vectors, index: Index, query: str, terms: Sequence[str], need: int, rel: Relevance
    ) -> Fused | None: ...


@dataclass(slots=True)
class SemanticState:
    """A registry's semantic search: the ranker attached to it, its tool vectors once they are built or mapped (search
    is lexical until then), and its vectors' id and rows (computed once, before a server forks its workers)."""

    ranker: Ranker | None = None
    vectors: Vectors | None = None
    catalog: CatalogRows | None = None

    def ready(self) -> tuple[Ranker, Vectors] | None:
        """The ranker and the vectors when both are there, else None (rank lexically)."""
        if self.ranker is None or self.vectors is None:
            return None
        return self.ranker, self.vectors
