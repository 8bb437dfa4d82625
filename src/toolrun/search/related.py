"""Related words of general English, for lexical search: `money` -> `cash`, `fund`, `financ`; `photo` -> `pictur`.

The table (related.json.gz beside this module, 0.88 MB; about 5 MB once read) holds, for each of 13,929 stems of
general English words (the whole words of the BERT-uncased vocabulary), its 20 nearest stems by the cosine
similarity of the words embedded alone with all-MiniLM-L6-v2, each at least 0.40 (search uses 0.45-0.50 and more:
textsearch.RELATED_MIN), and its WordNet 3.0 synonyms (the words sharing a synset with one of the word's first three
senses, among the same stems) at 1.0, which no cosine of two stems reaches (at most 32 stems in all). It was built
once by bench/build_related.py (how to rebuild it is there); nothing runs a model here. The vocabulary and the model
are Apache-2.0; WordNet 3.0 Copyright 2006 by Princeton University, under its own permissive licence (docs/mcp.md).

The table is read on the first search that asks for it, once per process (about 20 ms), and never by `toolrun
call`. A missing or unreadable file leaves search without related words.
"""

from __future__ import annotations

import base64
import gzip
import json
import sys
import threading
from array import array
from pathlib import Path

FILE = Path(__file__).with_name("related.json.gz")
_NONE = 0xFFFF


class Related:
    """Each stem's related stems and their similarities (0-1), best first."""

    def __init__(self, data: dict[str, object]) -> None:
        self.stems: list[str] = list(data["stems"])  # type: ignore[call-overload]
        self.where = {s: i for i, s in enumerate(self.stems)}
        self.k = int(data["neighbours_per_stem"])  # type: ignore[call-overload]
        scale = float(data["scale"])  # type: ignore[arg-type]
        self.neighbours = array("H", base64.b64decode(str(data["neighbours"])))
        if sys.byteorder == "big":
            self.neighbours.byteswap()  # the file holds little-endian numbers
        self.similarities = [q / scale for q in range(256)]
        self.quantised = base64.b64decode(str(data["similarities"]))
        if len(self.neighbours) != len(self.stems) * self.k or len(self.quantised) != len(self.neighbours):
            raise ValueError("the related-words table is truncated")

    def get(self, stem: str) -> list[tuple[str, float]]:
        """The stems related to `stem` with their similarities, best first (empty for a stem not in the table)."""
        i = self.where.get(stem)
        if i is None:
            return []
        out = []
        for n in range(i * self.k, (i + 1) * self.k):
            j = self.neighbours[n]
            if j == _NONE:
                break
            out.append((self.stems[j], self.similarities[self.quantised[n]]))
        return out


_TABLE: list[Related | None] = []
_LOCK = threading.Lock()


def table() -> Related | None:
    """The table, read on first use (None when the file is missing or unreadable)."""
    if not _TABLE:
        with _LOCK:
            if not _TABLE:
                try:
                    _TABLE.append(Related(json.loads(gzip.decompress(FILE.read_bytes()))))
                except (OSError, ValueError, KeyError, TypeError):
                    _TABLE.append(None)
    return _TABLE[0]


def related(stem: str) -> list[tuple[str, float]]:
    """The stems related to `stem`, best first, with their similarities (0-1)."""
    found = table()
    return found.get(stem) if found is not None else []
