"""The Porter stemmer (M.F. Porter, 1980), steps 1 to 5: `restarting` and `restarts` -> `restart`.

Search reduces indexed words and query words to the same stem, so a query finds a tool whatever
the inflection it uses. Words of up to two letters, and words with digits, stay as they are.
"""

from __future__ import annotations

_VOWELS = frozenset("aeiou")


def _cons(word: str, i: int) -> bool:
    ch = word[i]
    if ch in _VOWELS:
        return False
    if ch == "y":
        return i == 0 or not _cons(word, i - 1)
    return True


def _measure(stem: str) -> int:
    """m in [C](VC)^m[V]: how many vowel-consonant sequences the stem has."""
    m, i, n = 0, 0, len(stem)
    while i < n and _cons(stem, i):
        i += 1
    while i < n:
        while i < n and not _cons(stem, i):
            i += 1
        if i >= n:
            break
        while i < n and _cons(stem, i):
            i += 1
        m += 1
    return m


def _has_vowel(stem: str) -> bool:
    return any(not _cons(stem, i) for i in range(len(stem)))


def _double_cons(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _cons(word, len(word) - 1)


def _cvc(word: str) -> bool:
    n = len(word)
    if n < 3 or not _cons(word, n - 1) or _cons(word, n - 2) or not _cons(word, n - 3):
        return False
    return word[-1] not in "wxy"


def _replace(word: str, suffixes: tuple[tuple[str, str], ...], min_m: int) -> str:
    for suffix, repl in suffixes:
        if word.endswith(suffix):
            stem = word[: len(word) - len(suffix)]
            return stem + repl if _measure(stem) > min_m else word
    return word


_STEP2 = (
    ("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"), ("izer", "ize"),
    ("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous"),
    ("ization", "ize"), ("ation", "ate"), ("ator", "ate"), ("alism", "al"), ("iveness", "ive"),
    ("fulness", "ful"), ("ousness", "ous"), ("aliti", "al"), ("iviti", "ive"), ("biliti", "ble"),
    ("logi", "log"),
)  # fmt: skip
_STEP3 = (
    ("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"), ("ful", ""), ("ness", ""),
)  # fmt: skip
_STEP4 = (
    "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion", "ou",
    "ism", "ate", "iti", "ous", "ive", "ize",
)  # fmt: skip


def _step1a(word: str) -> str:
    if word.endswith(("sses", "ies")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _step1b(word: str) -> str:
    if word.endswith("eed"):
        return word[:-1] if _measure(word[:-3]) > 0 else word
    for suffix in ("ed", "ing"):
        if word.endswith(suffix) and _has_vowel(word[: -len(suffix)]):
            return _after_1b(word[: -len(suffix)])
    return word


def _after_1b(word: str) -> str:
    """What step 1b does once `-ed` or `-ing` is gone: `hopp` -> `hop`, `fil` -> `file`, `conflat` -> `conflate`."""
    if word.endswith(("at", "bl", "iz")):
        return word + "e"
    if _double_cons(word) and word[-1] not in "lsz":
        return word[:-1]
    if _measure(word) == 1 and _cvc(word):
        return word + "e"
    return word


def _step1c(word: str) -> str:
    return word[:-1] + "i" if word.endswith("y") and _has_vowel(word[:-1]) else word


def _step4(word: str) -> str:
    for suffix in _STEP4:
        if word.endswith(suffix):
            base = word[: -len(suffix)]
            if _measure(base) > 1 and (suffix != "ion" or base.endswith(("s", "t"))):
                return base
            return word
    return word


def _step5(word: str) -> str:
    if word.endswith("e"):
        base = word[:-1]
        m = _measure(base)
        if m > 1 or (m == 1 and not _cvc(base)):
            word = base
    if _measure(word) > 1 and _double_cons(word) and word.endswith("l"):
        word = word[:-1]
    return word


def stem(word: str) -> str:
    if len(word) <= 2 or not word.isalpha():
        return word
    word = _step1c(_step1b(_step1a(word)))
    word = _replace(word, _STEP2, 0)
    word = _replace(word, _STEP3, 0)
    return _step5(_step4(word))
