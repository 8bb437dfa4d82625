"""Tools by key, who may see them, and ranked search over what a caller may see.

Visibility is decided by two things only: a tool's `public` flag and its groups. So callers fall
into few distinct *views* of the catalog: anonymous (public tools), each combination of catalog
groups a caller holds, and admin (every tool). Each view gets its own search index
(textsearch.Index), built on the first search from that view and kept with the catalog (a new
catalog is a new Registry): document counts, word statistics and the vocabulary that prefixes
and typos expand into all come from the tools that view shows, never from hidden ones.
"""

from __future__ import annotations

import difflib
import json
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import NotFound
from .models import Identity, ToolSpec
from .search.relevance import DEFAULT_MIN_SCORE, Relevance, semantic_score
from .search.state import SemanticState
from .search.textsearch import Analyzed, Index, analyze, query_words

if TYPE_CHECKING:
    from .search.fusion import Fused


MAX_VIEWS = 32  # search indexes kept at once (least recently used first out)

ViewKey = tuple[str, ...]
ADMIN_VIEW: ViewKey = ("\x00admin",)


@dataclass(frozen=True, slots=True)
class Page:
    items: list[ToolSpec]
    total: int
    offset: int
    limit: int
    scores: list[float] | None = None  # each item's relevance, 0 to 1 (search/relevance.py); None: a blank query
    explain: list[dict[str, Any]] | None = None  # why each item ranked where it did (asked for with `explain`)

    @property
    def has_more(self) -> bool:
        return self.offset + len(self.items) < self.total

    @property
    def next_offset(self) -> int | None:
        return self.offset + len(self.items) if self.has_more else None


def floored(ranked: Iterable[int], score: Callable[[int], float], floor: float, need: int) -> list[tuple[int, float]]:
    """The first `need` documents of a ranking that score `floor` or more, with their scores."""
    kept: list[tuple[int, float]] = []
    for doc in ranked:
        if (got := score(doc)) >= floor:
            kept.append((doc, got))
            if len(kept) >= need:
                break
    return kept


def exact_name_first(rel: Relevance, ranked: list[int]) -> list[int]:
    """The lexical ranking with the tool whose key or name holds every query word as itself (among the first few:
    `Relevance.strong`) first: `restart nginx` finds nginx.restart before nginx.reload (a rarer synonym)."""
    strong = rel.strong(ranked)
    if strong is None or strong == ranked[0] or rel.in_name(strong) < 1.0 or not all(t.known for t in rel.terms):
        return ranked
    return [strong, *(d for d in ranked if d != strong)]


class Registry:
    def __init__(self, tools: Iterable[ToolSpec]) -> None:
        self.tools: dict[str, ToolSpec] = {t.key: t for t in sorted(tools, key=lambda t: t.key)}
        # Who sees what, by position in key order: a view's tools are found without touching every tool. (In a
        # forked worker, touching an object writes its reference count, and so copies the memory page it sits
        # on: a first `GET /tools` that tested each of 10,000 tools copied 12 MB of the shared catalog.)
        self._order = tuple(self.tools.values())
        members: dict[str, array[int]] = {}
        public = array("I")
        for position, tool in enumerate(self._order):
            if tool.public:
                public.append(position)
            for group in tool.groups:
                members.setdefault(group, array("I")).append(position)
        self._public = public
        self._members = members
        self._groups = frozenset(members)
        self._analyzed: dict[str, Analyzed] = {}
        self._entries: dict[str, tuple[str | None, bytes]] = {}
        self._visible: dict[ViewKey, list[ToolSpec]] = {}
        self._indexes: OrderedDict[ViewKey, Index] = OrderedDict()
        self._lock = threading.Lock()
        self.semantic = SemanticState()  # set by semantic.Semantic.prepare: ranks with embeddings too once ready

    def __len__(self) -> int:
        return len(self.tools)

    def view_key(self, identity: Identity) -> ViewKey:
        """Callers with equal keys see exactly the same tools."""
        if identity.is_admin:
            return ADMIN_VIEW
        return tuple(sorted(identity.groups & self._groups))

    def visible(self, identity: Identity) -> list[ToolSpec]:
        """Tools the caller may see, sorted by key."""
        view = self.view_key(identity)
        tools = self._visible.get(view)
        if tools is None:
            if view == ADMIN_VIEW:
                tools = list(self._order)
            else:
                positions = set(self._public).union(*(self._members[group] for group in view))
                tools = [self._order[position] for position in sorted(positions)]
            if len(self._visible) >= 4 * MAX_VIEWS:
                self._visible.clear()
            self._visible[view] = tools
        return list(tools)

    def get(self, identity: Identity, key: str) -> ToolSpec:
        """The tool, or NotFound: an unknown key and a hidden one are indistinguishable."""
        tool = self.tools.get(key)
        if tool is not None and identity.can_access(tool):
            return tool
        visible = [t.key for t in self.visible(identity)]
        raise NotFound(key, difflib.get_close_matches(key, visible, n=3, cutoff=0.6))

    def entry_json(self, tool: ToolSpec, sandbox_problem: str | None = None) -> bytes:
        """The tool's entry as compact JSON (what `GET /tools/{key}` answers and `GET /tools` lists), encoded once
        per answer of the host about its sandbox (`sandbox_problem`, see `ToolSpec.entry`): what the host says
        changes without a reload, so it is part of what the kept body is kept for.

        A listing of the whole catalog joins these: it never holds every entry as Python objects at once (for
        10,000 tools those took 40 MB, which the process kept after the answer)."""
        kept = self._entries.get(tool.key)
        if kept is not None and kept[0] == sandbox_problem:
            return kept[1]
        entry = tool.entry(sandbox_problem)
        body = json.dumps(entry, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
        if self.tools.get(tool.key) is tool:  # a tool of another catalog (a reload in between) is not kept
            self._entries[tool.key] = (sandbox_problem, body)
        return body

    def index(self, identity: Identity) -> Index:
        """The search index over exactly the tools this caller may see."""
        view = self.view_key(identity)
        with self._lock:
            index = self._indexes.get(view)
            if index is not None:
                self._indexes.move_to_end(view)
                return index
            tools = self.visible(identity)
            analyzed = []
            for tool in tools:
                a = self._analyzed.get(tool.key)
                if a is None:
                    a = self._analyzed[tool.key] = analyze(tool)
                analyzed.append(a)
            index = self._indexes[view] = Index(tools, analyzed)
            while len(self._indexes) > MAX_VIEWS:
                self._indexes.popitem(last=False)
            return index

    def search(
        self,
        identity: Identity,
        query: str,
        offset: int = 0,
        limit: int = 10,
        min_score: float = DEFAULT_MIN_SCORE,
        explain: bool = False,
    ) -> Page:
        """A page of the caller's tools ranked for `query` (all of them, by key, when it is blank): only the tools
        scoring `min_score` or more (search/relevance.py), and `total` counts those."""
        offset, limit = max(0, offset), max(1, limit)
        terms = query_words(query)
        if not terms:
            tools = self.visible(identity)
            return Page(tools[offset : offset + limit], len(tools), offset, limit)
        index = self.index(identity)
        rel = Relevance.of(index, index.split_compounds(tuple(terms)))
        fused = None
        if (ready := self.semantic.ready()) is not None:
            ranker, vectors = ready
            fused = ranker.rank(vectors, index, query, terms, offset + limit, rel)
        sims = fused.sims if fused is not None else {}

        def score(doc: int) -> float:
            lexical = rel.lexical(doc)
            return max(lexical, semantic_score(sims[doc])) if doc in sims else lexical

        need = offset + limit
        if fused is not None:
            kept = floored(fused.ranked, score, min_score, need)
        else:
            ask = need
            while True:
                ranked, matched = index.rank(terms, ask)
                kept = floored(exact_name_first(rel, ranked), score, min_score, need)
                if len(kept) >= need or len(ranked) >= matched:
                    break
                ask *= 4
        total = rel.count(min_score, [d for d, c in sims.items() if semantic_score(c) >= min_score])
        total = max(total, len(kept))
        page = kept[offset:need]
        items = [index.tools[d] for d, _ in page]
        why = [self._why(rel, fused, d, sc) for d, sc in page] if explain else None
        return Page(items, total, offset, limit, [round(sc, 3) for _, sc in page], why)

    @staticmethod
    def _why(rel: Relevance, fused: Fused | None, doc: int, score: float) -> dict[str, Any]:
        """Why a tool ranked where it did: the words it matched (and how), its semantic similarity, its scores."""
        out: dict[str, Any] = {"matched": rel.matched(doc), "lexical": round(rel.lexical(doc), 3)}
        if fused is not None:
            similarity = fused.sims.get(doc)
            out["similarity"] = similarity
            out["semantic"] = round(semantic_score(similarity), 3) if similarity is not None else None
            out["semantic_weight"] = round(fused.weight, 3) if fused.weight != float("inf") else None
            out["fusion"] = fused.how
            out["rank"] = {"fused": fused.ranked.index(doc) + 1}
        out["score"] = round(score, 3)
        return out
