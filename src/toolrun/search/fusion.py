"""Fusion: the word ranking and the semantic one made one, each trusted as far as the query's own signals say.

Reciprocal rank fusion (RRF_K, SEMANTIC_WEIGHT, PARAMS_WEIGHT, chosen on the dev sets: docs/decisions.md): the first
LEXICAL_HEAD lexical results, the tools whose document is nearest the query and those whose params are (vectors.py),
each scored weight/(k + rank) per list, the semantic lists' weight decided per query from the query's own signals,
with two guards for the word ranking (`fuse`, issue 38). Pure: no model, no numpy, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .relevance import Relevance

RRF_K = 5
SEMANTIC_WEIGHT = 0.3  # when the best lexical match holds every query word
SEMANTIC_WEIGHT_UNFOUND = 3.0  # when it holds none of them, or a query word is in no tool (`fuse`)
MARGIN = 0.05  # the nearest tool stands out when its similarity is this much above the next one's
MARGIN_BOOST = 2.0  # the semantic list's weight is multiplied by this when its nearest tool stands out
# The semantic list is sure of its head when its nearest tool's similarity is SPREAD or more above that of the
# SPREAD_AT-th: its weight is then multiplied by SPREAD_BOOST (search-8, chosen on dev, dev-2 and real-dev: the
# words of `redis set remove member` held by a near-twin no longer hide the tool MiniLM puts second).
SPREAD, SPREAD_AT, SPREAD_BOOST = 0.10, 5, 1.5
PARAMS_WEIGHT = 0.3  # the weight of the list of tools whose params are nearest, as a share of the semantic list's
LEXICAL_HEAD = 100  # lexical results fused; later ones follow in lexical order
# A strong word match is kept second despite a query word unknown to the catalog only when it holds this share of the
# query by words (`Relevance.lexical`): the known words must be most of what was asked. Dev R@3 0.904 -> 0.914
# (0.6: 0.911; 0.7-1.0 alike), dev-extra and dev-2 unchanged (docs/decisions.md).
STRONG_SHARE_UNKNOWN = 0.7


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
      and x MARGIN_BOOST when the nearest tool stands out (its similarity MARGIN or more above the next one's), and
      x SPREAD_BOOST when the semantic list is sure of its head (the nearest tool's similarity SPREAD or more above
      the SPREAD_AT-th's);
    - a strong word match (every known query word in the key or name of one of the first lexical tools:
      `Relevance.strong`) is kept first, or second when some query word is unknown to the catalog and the match
      holds at least STRONG_SHARE_UNKNOWN of the query by words: such a word can never swamp it, while one known word
      among many unknown ones (`see if a service is listening`) does not override the semantic order;
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
    sure = len(ordered) >= SPREAD_AT and ordered[0] - ordered[SPREAD_AT - 1] >= SPREAD
    if sure:
        weight *= SPREAD_BOOST
    scores: dict[int, float] = {}
    for rank, doc in enumerate(lexical[:LEXICAL_HEAD]):
        scores[doc] = 1 / (RRF_K + rank + 1)
    for listed, w in ((near, weight), (by_params, weight * PARAMS_WEIGHT)):
        for rank, doc in enumerate(listed):
            scores[doc] = scores.get(doc, 0.0) + w / (RRF_K + rank + 1)
    head = sorted(scores, key=lambda d: (-scores[d], d))
    how = "fused, semantic list sure" if sure else "fused"
    strong = rel.strong(lexical)
    if strong is not None and unknown and rel.lexical(strong) < STRONG_SHARE_UNKNOWN:
        strong = None
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
