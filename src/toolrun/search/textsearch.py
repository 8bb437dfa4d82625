"""Ranked lexical search over one set of tools: the index a caller's view of the catalog gets.

An `Index` is built over exactly the tools one caller may see (registry.py keeps one per view),
so every ranking input (document count, average length, each word's document frequency, the
vocabulary that prefixes and typos expand into) comes from visible tools only: a hidden tool
cannot change the order, the totals or the expansions of anyone's search.

Analysis: text is split into lower-cased words (letters and digits; `_`, `.`, `-` separate) and
each word is reduced to its stem (`restarts`, `restarting`, `restarted` -> `restart`). Fields
are weighted: key, name and title x3, keywords x2.5, groups x2, param names x1.5, description
x1, param descriptions x0.5. Scores are BM25 (k1 1.2, b 0.75).

A query word matches, best first: its stem (x1), a word it begins (x0.8: `disk` finds `disks`,
a half-typed last word works), a word one edit away when the word itself is in no tool (x0.9: a
typo; two edits for words of eight letters or more, and a swap of two letters for words of three:
`dsk`, `restrat`, `lgo`), else a longer word holding its letters in order (x0.6: an abbreviation,
`imgs` -> `images`), the synonyms of a small built-in table (x0.7), and its related words of general
English (related.py: similarity 0.5 or more, at half the similarity; a related word rarer than the query word
counts as if it were as common; the table is read on the first search). A query word that no tool has takes its
related words at 0.8 x the similarity from 0.45 (at most 0.69), WordNet's synonyms among them (only such a word
does: they know no sense), and is not corrected as a typo or an abbreviation when it is a word of general English
(in the table: `chat` is not `that`, `shops` is not `stops`). A word in no tool that two
words of the tools join (`portcheck`, `tablesizes`) is searched as those two words. Common function
words (`the`, `how`, `why`, ...) and words that only ask for a tool (`call`, `use`) are dropped when
other words remain; a `name=value` pair searches for the name. Tools matching any word are ranked by
the sum of their words' scores (BM25): no rule puts the tools matching every word first and alone.
Words of asking (`see`, `look`, `figure`, `need`, `let`, `know`, `tell`, `right`, and `run`: "is
nginx running") count half and bring in no tool alone while another word matches.

Near-duplicates take turns (maximal marginal relevance): the first 30 results are re-ordered so
that a tool whose stems overlap much with a tool placed above it waits for a different one. The
first result, the set of matches and the total never change; only the order within the head does.
"""

from __future__ import annotations

import heapq
import math
import re
import sys
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..models import ToolSpec
from .stem import stem

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
MAX_QUERY_TERMS = 16
K1, B = 1.2, 0.75
UNPACKED_POSTINGS = 50_000  # postings kept unpacked as dicts per index (about 64 bytes each, 12 packed)
PREFIX_WORDS = 40  # words one prefix may expand into (the most frequent first)
DIVERSITY = 0.8  # how strongly a result much like one above it is held back (0: not at all)
DIVERSE_HEAD = 30  # results re-ordered for diversity (the rest keep their score order)
TYPO = 0.9  # factor of a match one edit away
ABBREVIATION = 0.6  # factor of a match the query word abbreviates
# Related words (related.py): every query word also matches the tools' words related to it with a similarity of
# at least RELATED_MIN, each at RELATED x its similarity (at most 0.5: under relevance.KNOWN, so a related word
# alone never makes a query word known to the catalog). Chosen on dev (docs/decisions.md): cutoffs 0.40-0.50 did
# alike (R@3 0.81-0.82), 0.50 kept as it brings in fewer loose matches (median total 105 -> 77); a flat factor, or
# expanding only the words found weakly, did worse.
RELATED_MIN = 0.50
RELATED = 0.5
# A query word no tool has (`respond`, `chat`) has nothing but its related words: they count more for it, at
# RELATED_UNKNOWN x the similarity from RELATED_MIN_UNKNOWN, never at KNOWN or more (relevance.KNOWN: a related word
# never makes a query word known to the catalog). Chosen on dev, dev-2 and real-dev (docs/decisions.md).
RELATED_UNKNOWN = 0.8
RELATED_MIN_UNKNOWN = 0.45
RELATED_UNKNOWN_MOST = 0.69
WORDNET = 1.0  # the similarity of a WordNet synonym in the table (no two stems' cosine reaches it: at most 0.97)
RELATED_IDF_CAP = True  # a related word rarer than the query word counts as if it were as common (Index._related)
RELATED_LEAST = 0.05  # a related word whose factor comes out smaller counts for nothing (and costs nothing)

_STOP = (
    "a an and are as at be by can could do does for from how i in into is it its me my of on or our "
    "out please should so that the their them then there these this those to tool tools us want was "
    "we what when where which who why will with would you your find"
)
# More English function words (determiners, auxiliaries, adverbs of degree and time): they say how
# a person asks, not what the tool does.
_STOP_MORE = (
    "about after again all almost also am any anything been before being both but did each else "
    "every everything has have had here if just much many more most nor not now only other own "
    "same some something than too very whether while whose yet"
)
# Words that say a tool is wanted, not which one ("call the tool that...", "use something to...").
_FILLER = "call calls invoke use using"
STOP_WORDS = frozenset(_STOP.split(" ") + _STOP_MORE.split(" ") + _FILLER.split(" "))
# Words that say how a person asks or acts rather than which tool ("see if", "figure out", "let me know", "is
# it running"): they count at WEAK and bring in no tool alone while another word matches (`run` still finds a
# tool named run when nothing else matches). Compared by stem (`running`, `looking`). Chosen on the dev set's
# task queries.
WEAK_WORDS = frozenset(["run", "see", "look", "figure", "need", "let", "know", "tell", "right"])
WEAK = 0.5
_ASSIGNMENT = re.compile(r"([^\W\d][\w.-]*)=(\"[^\"]*\"|'[^']*'|\S*)", re.UNICODE)  # a quoted value, spaces and all

# Words that name the same action or thing in operations work, both ways. Authors add their own
# with a tool's `keywords:`; this table only covers the verbs and nouns almost every catalog uses.
_SYNONYM_GROUPS = (
    "delete remove erase purge drop",
    "list show enumerate",
    "stop kill terminate halt",
    "start launch boot",
    "restart reboot bounce reload",
    "check verify test validate inspect",
    "size usage space",
    "find search lookup locate",
    "fetch get retrieve download read",
    "upload push put send",
    "create make add new",
    "update modify change edit set",
    "log logs journal",
    "error errors failure failures",
    "slow latency performance",
    "memory ram mem",
    "cpu processor load",
    "process processes proc",
    "certificate cert tls ssl",
    "database db",
    "container docker",
    "directory folder dir",
    "file files",
    "user account",
    "password credential secret",
    "backup snapshot",
    "disk storage volume",
    "network net",
    "expire expiry expiration",
)


def _synonyms() -> dict[str, tuple[str, ...]]:
    table: dict[str, set[str]] = {}
    for line in _SYNONYM_GROUPS:
        stems = {stem(w) for w in line.split()}
        for s in stems:
            table.setdefault(s, set()).update(stems - {s})
    return {k: tuple(sorted(v)) for k, v in table.items()}


SYNONYMS = _synonyms()
WEAK_STEMS = frozenset(stem(w) for w in WEAK_WORDS)
# Related words never lead to a function word or a word of asking (`start` is near `first`, `check` near `see`).
_NOT_RELATED = frozenset(stem(w) for w in STOP_WORDS) | WEAK_STEMS


def related_words(stem: str) -> list[tuple[str, float]]:
    """The stems of general English related to a stem, best first, with their similarities (related.py; the
    table is read on the first call)."""
    from . import related

    return related.related(stem)


def english(stem: str) -> bool:
    """Whether a stem is a word of general English (in the related-words table): a query word no tool has that is
    one (`chat`, `shops`, `altitude`) is another word, not a misspelling, and is not corrected into a tool's word
    one edit away (`that`, `stops`, `latitude`); its related words find what it means."""
    from . import related

    found = related.table()
    return found is not None and stem in found.where


def words(text: str) -> list[str]:
    """Lower-cased words (letters and digits; `_`, `.` and `-` separate words)."""
    return _WORD.findall(text.lower())


def query_words(query: str) -> list[str]:
    """The words a query searches for: deduplicated, function words dropped unless nothing else remains.

    A `name=value` pair (as an agent holding a value writes it: `to_revision=3`) searches for the name only."""
    found = list(dict.fromkeys(words(_ASSIGNMENT.sub(r"\1", query))))
    content = [w for w in found if w not in STOP_WORDS]
    return (content or found)[:MAX_QUERY_TERMS]


_STEMS: dict[str, str] = {}


def cached_stem(word: str) -> str:
    found = _STEMS.get(word)
    if found is None:
        found = stem(word)
        if len(_STEMS) < 200_000:
            _STEMS[sys.intern(word)] = found
    return found


@dataclass(frozen=True, slots=True)
class Analyzed:
    """One tool's weighted stems and raw words: computed from the tool alone, shared by every view.

    Kept lean, since there is one per tool in every process that searches: the raw words are a tuple of
    interned strings (one copy of each word for the whole catalog), the weights share their float objects."""

    weights: dict[str, float]
    length: float
    raw: tuple[str, ...]


_WEIGHTS: dict[float, float] = {}  # one float object per distinct weight (sums of a few field weights)


def analyze(tool: ToolSpec) -> Analyzed:
    weights: dict[str, float] = {}
    raw: dict[str, None] = {}

    def add(text: str, weight: float) -> None:
        for word in _WORD.findall(text.lower()):
            raw[word] = None
            s = cached_stem(word)
            weights[s] = weights.get(s, 0.0) + weight

    add(tool.key, 3.0)
    add(tool.name, 3.0)
    add(str(tool.annotations.get("title") or ""), 3.0)
    add(" ".join(tool.keywords), 2.5)
    add(" ".join(tool.groups), 2.0)
    add(" ".join(p.name for p in tool.params), 1.5)
    add(tool.description, 1.0)
    add(" ".join(p.description for p in tool.params), 0.5)
    if len(_WEIGHTS) < 4096:
        weights = {s: _WEIGHTS.setdefault(w, w) for s, w in weights.items()}
    return Analyzed(weights, sum(weights.values()) or 1.0, tuple(map(sys.intern, raw)))


def _distance(a: str, b: str, bound: int) -> int:
    """Optimal string alignment distance (adjacent swaps count one), or bound + 1 when it exceeds bound."""
    if abs(len(a) - len(b)) > bound:
        return bound + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cost = 0 if ca == cb else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > bound:
            return bound + 1
        prev2, prev = prev, cur
    return prev[-1]


def _subsequence(short: str, long: str) -> bool:
    letters = iter(long)
    return all(ch in letters for ch in short)


def _deletes(word: str) -> set[str]:
    return {word[:i] + word[i + 1 :] for i in range(len(word))}


def idf(n: int, df: int) -> float:
    """BM25's inverse document frequency of a word that `df` of `n` tools have."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True, slots=True)
class ViewRows:
    """Where one view's tools sit in one catalog's vectors, computed once per view by the ranker and kept on the view's
    index (`textsearch.Index.semantic_rows`): `path`, the vectors file they are of (a view asked with other vectors
    computes them anew); `rows`, each tool's row, in the view's order (a process that ranks itself: semantic.Semantic);
    `bitmap`, the rows the view sees as the embedding helper reads them (base64; "": all of them; None: not computed;
    semantic.HelperSemantic)."""

    path: str
    rows: array[int] = field(default_factory=lambda: array("q"))
    bitmap: str | None = None


class Index:
    """BM25 over a fixed list of tools (sorted by key); built once, read by many searches."""

    def __init__(self, tools: Sequence[ToolSpec], analyzed: Sequence[Analyzed]) -> None:
        self.tools = list(tools)
        self.analyzed = list(analyzed)
        n = len(self.tools)
        avg = (sum(a.length for a in analyzed) / n) if n else 1.0
        # Each stem's postings: its documents (ascending) and, in step, each one's whole BM25 contribution
        # (idf x normalised frequency), packed in two arrays: 12 bytes a posting instead of about 64 as a dict
        # of float objects (an index over 10,000 tools: 5 MB instead of 18, in every worker that searches).
        postings: dict[str, tuple[array[int], array[float]]] = {}
        raw_to_stems: dict[str, str] = {}
        for doc, a in enumerate(analyzed):
            lnorm = K1 * (1 - B + B * a.length / avg)
            for s, tf in a.weights.items():
                entry = postings.get(s)
                if entry is None:
                    entry = postings[s] = (array("I"), array("d"))
                entry[0].append(doc)
                entry[1].append(tf * (K1 + 1) / (tf + lnorm))
            for word in a.raw:
                raw_to_stems[word] = _STEMS.get(word) or cached_stem(word)
        for docs, scores in postings.values():
            weight = idf(n, len(docs))
            for i in range(len(scores)):
                scores[i] *= weight
        self.postings = postings
        self.raw_to_stem = raw_to_stems
        self.raw_sorted = sorted(raw_to_stems)
        self._typo: dict[str, list[str]] | None = None
        self._sorted: dict[str, list[int]] = {}
        self._dicts: OrderedDict[str, dict[int, float]] = OrderedDict()  # unpacked postings, recently used
        self._dict_postings = 0
        self._cache: OrderedDict[tuple[str, ...], tuple[list[int], int]] = OrderedDict()
        self.semantic_rows: ViewRows | None = None  # where this view's tools sit in the vectors (semantic.py)

    # -- expansion of one query word into weighted stems ---------------------------------------------

    def _typo_index(self) -> dict[str, list[str]]:
        if self._typo is None:
            table: dict[str, list[str]] = {}
            for word in self.raw_sorted:
                if len(word) < 4 or word.isdigit():
                    continue
                table.setdefault(word, []).append(word)
                for d in _deletes(word):
                    table.setdefault(d, []).append(word)
            self._typo = table
        return self._typo

    def expand(self, word: str, last: bool = True) -> dict[str, float]:
        """The stems one query word stands for, each with the factor its matches are scored at.

        Only the last word of a query (`last`) expands into the words it begins, as one being typed;
        an earlier word does so only when it matches nothing whole."""
        found: dict[str, float] = {}
        own = cached_stem(word)
        if own in self.postings:
            found[own] = 1.0
        if len(word) >= 2 and (last or not found):
            start = bisect_left(self.raw_sorted, word)
            stems: set[str] = set()
            for raw in self.raw_sorted[start : start + 4 * PREFIX_WORDS]:
                if not raw.startswith(word):
                    break
                stems.add(self.raw_to_stem[raw])
            stems.discard(own)
            ranked = sorted(stems, key=lambda s: (-len(self.postings[s][0]), s))[:PREFIX_WORDS]
            for s in ranked:
                found.setdefault(s, 0.8)
        if own not in self.postings and len(word) >= 3 and not word.isdigit() and not english(own):
            self._typos(word, found)
            if not found:
                self._abbreviations(word, found)
        for base in [own, *[s for s, f in found.items() if f == 0.8][:3]]:
            for syn in SYNONYMS.get(base, ()):
                if syn in self.postings:
                    found.setdefault(syn, 0.7)
        if RELATED and own not in WEAK_STEMS:
            self._related(own, found)
        return found

    def _related(self, own: str, found: dict[str, float]) -> None:
        """The words of this index related to the query word's stem (related.py), at RELATED x their similarity.

        A related word rarer than the query word itself counts as if it were as common (its factor scaled by the
        ratio of their idf): a word most tools have (`target`) says little, and a rare word near it must not say
        more in its place."""
        known = own in self.postings
        own_idf = self._idf(own) if known and RELATED_IDF_CAP else 0.0
        least, scale = (RELATED_MIN, RELATED) if known else (RELATED_MIN_UNKNOWN, RELATED_UNKNOWN)
        for s, similarity in related_words(own):
            if similarity < least:
                break
            if known and similarity >= WORDNET:
                continue  # WordNet's synonyms know no sense (`fetch`: `win`): only a word no tool has takes them
            if s in self.postings and s not in _NOT_RELATED:
                factor = scale * similarity if known else min(RELATED_UNKNOWN_MOST, scale * similarity)
                if own_idf:
                    factor *= min(1.0, own_idf / self._idf(s))
                if factor >= RELATED_LEAST and factor > found.get(s, 0.0):
                    found[s] = factor

    def _idf(self, stem: str) -> float:
        return idf(len(self.tools), len(self.postings[stem][0]))

    def compound(self, word: str) -> tuple[str, str] | None:
        """Two words of the index that a word in no tool joins (`portcheck`: port, check), the longest first part
        first; None when the word is a tool's word or splits into no two such words of three letters or more
        (function words do not count: `timeout` is not time + out)."""
        if len(word) < 6 or word in self.raw_to_stem or cached_stem(word) in self.postings:
            return None
        for cut in range(len(word) - 3, 2, -1):
            head, tail = word[:cut], word[cut:]
            if head in self.raw_to_stem and tail in self.raw_to_stem and not {head, tail} & STOP_WORDS:
                return head, tail
        return None

    def split_compounds(self, terms: tuple[str, ...]) -> tuple[str, ...]:
        """The query words with each compound written together replaced by its two words."""
        out: list[str] = []
        for word in terms:
            parts = self.compound(word)
            out.extend(parts or (word,))
        return tuple(dict.fromkeys(out))

    def _typos(self, word: str, found: dict[str, float]) -> None:
        """Words one edit away (two for words of eight letters or more): a typo. A word of three letters reaches
        other three-letter words only by a swap of two letters (`lgo`: log; a substitution would reach too many:
        `cut` is not `cat`), and words of four by one more letter (`dsk`: disk)."""
        if len(word) == 3:
            for swapped in (word[1] + word[0] + word[2], word[0] + word[2] + word[1]):
                if swapped in self.raw_to_stem and swapped not in STOP_WORDS:  # `teh` is not `the`
                    found.setdefault(self.raw_to_stem[swapped], TYPO)
        bound = 2 if len(word) >= 8 else 1
        table = self._typo_index()
        candidates: set[str] = set(table.get(word, ()))
        for d in _deletes(word):
            candidates.update(table.get(d, ()))
        for raw in candidates:
            if _distance(word, raw, bound) <= bound:
                found.setdefault(self.raw_to_stem[raw], TYPO)

    def _abbreviations(self, word: str, found: dict[str, float]) -> None:
        """Longer words with the same first letter that hold the word's letters in order (`imgs`: images)."""
        start = bisect_left(self.raw_sorted, word[0])
        matched: set[str] = set()
        for raw in self.raw_sorted[start:]:
            if raw[0] != word[0]:
                break
            if len(raw) > len(word) and _subsequence(word, raw):
                matched.add(self.raw_to_stem[raw])
        for s in sorted(matched, key=lambda s: (-len(self.postings[s][0]), s))[:PREFIX_WORDS]:
            found.setdefault(s, ABBREVIATION)

    # -- ranking -------------------------------------------------------------------------------------

    def _term(self, word: str, last: bool) -> dict[int, float]:
        """Each document's best score for one query word over the stems it expands into."""
        expansion = sorted(self.expand(word, last).items(), key=lambda sf: (-sf[1], -len(self.postings[sf[0]][0])))
        if not expansion:
            return {}
        first, factor = expansion[0]
        posting = self._posting(first)
        best = dict(posting) if factor == 1.0 else {d: v * factor for d, v in posting.items()}
        for s, factor in expansion[1:]:
            get = best.get
            # comprehensions run several times faster than the same loop written out
            best.update({d: v * factor for d, v in self._posting(s).items() if v * factor > get(d, 0.0)})
        return best

    def _posting(self, stem: str) -> dict[int, float]:
        """One stem's postings as a dict (document -> score); the most recently used are kept unpacked, up to
        UNPACKED_POSTINGS postings in all, so a stem many queries share is unpacked once."""
        posting = self._dicts.get(stem)
        if posting is not None:
            self._dicts.move_to_end(stem)
            return posting
        docs, scores = self.postings[stem]
        posting = self._dicts[stem] = dict(zip(docs, scores, strict=True))
        self._dict_postings += len(posting)
        while self._dict_postings > UNPACKED_POSTINGS and len(self._dicts) > 1:
            self._dict_postings -= len(self._dicts.popitem(last=False)[1])
        return posting

    def _scores(self, terms: tuple[str, ...]) -> dict[int, float]:
        bests = [self._term(word, i == len(terms) - 1) for i, word in enumerate(terms)]
        if len(bests) == 1:
            return bests[0]
        weak = [cached_stem(w) in WEAK_STEMS for w in terms]
        strong = [b for b, w in zip(bests, weak, strict=True) if b and not w]
        factors = [WEAK if strong and w else 1.0 for w in weak]
        # Tools matching any word, scored by the sum of their words' scores (plain BM25): a tool matching every
        # word usually leads, but a much better match on fewer words is not hidden behind it. (Scaling a score by
        # the share of words matched, by a power of 0.5 to 2, did worse on the dev set.) Words found in more than
        # a quarter of the tools add to scores but do not bring in tools alone (unless every word is that
        # common); a word that matches nothing is not rare: it must not leave the other words without tools. Weak
        # words (WEAK_WORDS) bring in tools only when no other word matches any.
        pool = strong or bests
        rare = [b for b in pool if 0 < len(b) <= len(self.tools) // 4] or pool
        candidates: set[int] = set().union(*rare)
        if len(set(factors)) == 1:
            return {d: sum(best.get(d, 0.0) for best in bests) for d in candidates}
        weighted = list(zip(bests, factors, strict=True))
        return {d: sum(best.get(d, 0.0) * f for best, f in weighted) for d in candidates}

    def rank(self, query: Iterable[str], need: int) -> tuple[list[int], int]:
        """The first `need` (at least) document numbers ranked for the query words, and how many matched.

        Ties go to the lower document number, that is to the key that sorts first."""
        terms = self.split_compounds(tuple(query))
        cached = self._cache.get(terms)
        if cached is not None and (len(cached[0]) >= need or len(cached[0]) == cached[1]):
            self._cache.move_to_end(terms)
            return cached
        if len(terms) == 1:
            expansion = self.expand(terms[0], True)
            if len(expansion) == 1 and next(iter(expansion.values())) == 1.0:  # one word, one stem
                ranked = self._by_score(next(iter(expansion)))
                return ranked, len(ranked)
        final = self._scores(terms)
        ordered = sorted(final)  # by document number; both sorts below are stable
        if len(final) <= max(need * 4, 500):
            ordered.sort(key=final.__getitem__, reverse=True)
            ranked = ordered
        else:  # a common word: rank only the head that is asked for (more when a later page asks)
            ranked = heapq.nlargest(max(need, 100), ordered, key=final.__getitem__)
        ranked = self._diversify(ranked, final)
        result = (ranked, len(final))
        self._cache[terms] = result
        if len(self._cache) > 512:
            self._cache.popitem(last=False)
        return result

    def _diversify(self, ranked: list[int], score: dict[int, float]) -> list[int]:
        """Near-duplicates take turns: the head is re-ordered so a tool much like one above it waits.

        Greedy maximal marginal relevance over the first DIVERSE_HEAD results: each next place goes
        to the tool with the best score x (1 - DIVERSITY x its greatest stem-set (Jaccard) similarity
        to a tool already placed). The first result never changes."""
        head, rest = ranked[:DIVERSE_HEAD], ranked[DIVERSE_HEAD:]
        if len(head) < 3:
            return ranked
        stems = {d: frozenset(self.analyzed[d].weights) for d in head}  # sets: intersections are fastest
        first = head[0]
        out = [first]
        left = head[1:]
        closest = dict.fromkeys(left, 0.0)
        while left:
            placed = stems[out[-1]]
            for d in left:
                mine = stems[d]
                inter = len(mine & placed)
                if inter:
                    sim = inter / (len(mine) + len(placed) - inter)
                    if sim > closest[d]:
                        closest[d] = sim
            best = max(left, key=lambda d: (score[d] * (1 - DIVERSITY * closest[d]), -d))
            out.append(best)
            left.remove(best)
        return out + rest

    def _by_score(self, stem: str) -> list[int]:
        """The documents of one stem, best first, sorted once and kept."""
        ranked = self._sorted.get(stem)
        if ranked is None:
            postings = self._posting(stem)
            ranked = sorted(postings)
            ranked.sort(key=postings.__getitem__, reverse=True)
            ranked = self._diversify(ranked, postings)
            if len(self._sorted) > 4096:
                self._sorted.clear()
            self._sorted[stem] = ranked
        return ranked

    def top(self, query: Sequence[str], offset: int, limit: int) -> tuple[list[ToolSpec], int]:
        ranked, total = self.rank(query, offset + limit)
        return [self.tools[d] for d in ranked[offset : offset + limit]], total
