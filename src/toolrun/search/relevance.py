"""How well a tool matches a query, as a score from 0 to 1 (issue 38): what `GET /search`, the MCP `search` tool and
`toolrun search` show beside each hit, and what the floor (`min_score`) is compared with.

- By words (`lexical`): the share of the query's words the tool matches, each word weighted by how rare it is among
  the caller's tools (its idf) and counted at the factor of its match: 1 as itself, 0.9 a typo, 0.8 a word it begins,
  0.7 a synonym, at most 0.5 a related word, 0.6 an abbreviation. A word that matches no tool at all (or only through
  related words) counts at half the weight of an average word: it lowers every score a little, never the order.
  1.0: the tool holds every query word as itself.
- By meaning (`semantic`, with `toolrun[semantic]`): the cosine similarity of the query and the tool's text, mapped
  from SIM_ZERO..SIM_ONE onto 0..1 (MiniLM: about 0.2 for unrelated text, 0.5 for the median right tool of the
  dev sets, 0.6 and more for a close paraphrase); known for the SEMANTIC_TOP tools nearest the query, 0 for the
  others.
- A hit's score is the greater of the two: either part may vouch for it. The order of the hits is the fused ranking
  (fusion.py); the score says how good each hit is on its own, so it may rise down a page.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .textsearch import WEAK, WEAK_STEMS, Index, cached_stem, english, idf, words

STRONG_AMONG = 5  # lexical results looked at for a strong word match (`strong`)
KNOWN = 0.7  # a query word found at this factor or more (itself, a typo, a prefix, a synonym) is known to the catalog
# Cosine similarities scored 0 and 1; chosen on dev and dev-2, where a right tool's median is 0.50.
SIM_ZERO, SIM_ONE = 0.20, 0.60
# How a query word matched a tool's word, by the factor of the match (textsearch.Index.expand).
HOW = ((1.0, "itself"), (0.8, "typo or prefix"), (KNOWN, "synonym"), (0.6, "abbreviation"), (0.0, "related word"))
DEFAULT_MIN_SCORE = 0.2  # the floor of a search whose caller names none (dev, dev-2: 9 right hits in 10 reach it)


def semantic_score(similarity: float) -> float:
    return min(1.0, max(0.0, (similarity - SIM_ZERO) / (SIM_ONE - SIM_ZERO)))


@dataclass
class Term:
    word: str
    stems: list[tuple[str, float]]  # what it matches in the index, best factor first
    weight: float = 0.0
    known: bool = False


@dataclass
class Relevance:
    """The lexical relevance of the caller's tools to one query (`lexical`), and why (`matched`)."""

    index: Index
    terms: list[Term]
    total_weight: float
    _name_stems: dict[int, frozenset[str]] = field(default_factory=dict)
    _factors: tuple[dict[int, float], set[int]] | None = None

    @classmethod
    def of(cls, index: Index, query: Sequence[str]) -> Relevance:
        terms = []
        for i, word in enumerate(query):
            expansion = index.expand(word, i == len(query) - 1)
            stems = sorted(expansion.items(), key=lambda sf: (-sf[1], sf[0]))
            term = Term(word, stems)
            term.known = bool(stems) and stems[0][1] >= KNOWN
            if term.known:
                term.weight = idf(len(index.tools), len(index.postings[stems[0][0]][0]))
                if cached_stem(word) in WEAK_STEMS:
                    term.weight *= WEAK
            terms.append(term)
        known = [t.weight for t in terms if t.known]
        unknown = 0.5 * (sum(known) / len(known)) if known else 1.0
        for term in terms:
            if not term.known:
                term.weight = unknown
        return cls(index, terms, sum(t.weight for t in terms) or 1.0)

    @property
    def known(self) -> list[Term]:
        return [t for t in self.terms if t.known]

    def match(self, term: Term, doc: int) -> tuple[str, float] | None:
        """The stem through which `term` matches the document, and its factor (None: it does not)."""
        for stem, factor in term.stems:
            if doc in self.index._posting(stem):
                return stem, factor
        return None

    def lexical(self, doc: int) -> float:
        """The tool's score by words, 0 to 1."""
        return min(1.0, self._sums()[0].get(doc, 0.0) / self.total_weight)

    def _sums(self) -> tuple[dict[int, float], set[int]]:
        """Each matching tool's sum of its words' weight x factor, and the tools the lexical ranking brings in
        (textsearch.Index._scores: those of the words other than weak ones, and of those, the words in at most a
        quarter of the tools); computed once per query, in one pass over the words' postings."""
        if self._factors is not None:
            return self._factors
        sums: dict[int, float] = {}
        each: list[tuple[bool, dict[int, float]]] = []
        for term in self.terms:
            seen: dict[int, float] = {}
            for stem, factor in term.stems:
                for doc in self.index.postings[stem][0]:
                    if doc not in seen:
                        seen[doc] = factor
            for doc, factor in seen.items():
                sums[doc] = sums.get(doc, 0.0) + term.weight * factor
            each.append((cached_stem(term.word) in WEAK_STEMS, seen))
        pool = [seen for weak, seen in each if seen and not weak] or [seen for _, seen in each]
        rare = [seen for seen in pool if len(seen) <= len(self.index.tools) // 4] or pool
        self._factors = (sums, {d for seen in rare for d in seen})
        return self._factors

    def matched(self, doc: int) -> list[dict[str, Any]]:
        """Each query word the document matches: the tool's word (a stem), how (HOW) and the factor it counts at."""
        out = []
        for term in self.terms:
            found = self.match(term, doc)
            if found is not None:
                stem, factor = found
                how = next(name for least, name in HOW if factor >= least)
                if factor < KNOWN and english(cached_stem(term.word)):
                    how = "related word"  # an English word is never read as an abbreviation (textsearch.english)
                out.append({"word": term.word, "matched": stem, "how": how, "factor": round(factor, 3)})
        return out

    def in_name(self, doc: int) -> float:
        """How well the tool's key and name hold every known query word: the mean factor of their matches there
        (1.0: each as itself), 0 when one is missing or none is there as itself. More than 0: a strong word match."""
        known = self.known
        if not known:
            return 0.0
        names = self._name_stems.get(doc)
        if names is None:
            tool = self.index.tools[doc]
            names = self._name_stems[doc] = frozenset(cached_stem(w) for w in words(f"{tool.key} {tool.name}"))
        factors = []
        for term in known:
            hit = next((f for s, f in term.stems if f >= KNOWN and s in names), None)
            if hit is None:
                return 0.0
            factors.append(hit)
        return sum(factors) / len(factors) if 1.0 in factors else 0.0

    def strong(self, lexical: Sequence[int]) -> int | None:
        """The strong word match among the first STRONG_AMONG lexical results: the one whose key and name hold the
        query's known words best (`in_name`; the earlier on a tie), or None."""
        best, found = 0.0, None
        for doc in lexical[:STRONG_AMONG]:
            quality = self.in_name(doc)
            if quality > best:
                best, found = quality, doc
        return found

    def count(self, floor: float, also: Iterable[int] = ()) -> int:
        """How many tools score `floor` or more by words, or are among `also` (tools that score it by meaning)."""
        sums, candidates = self._sums()
        limit = floor * self.total_weight - 1e-9
        good = {d for d in candidates if sums[d] >= limit}
        good.update(also)
        return len(good)
