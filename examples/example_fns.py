"""Python tools for the example catalog (`fn: example_fns:word_count`, `fn: example_fns:slugify`)."""

import re


def word_count(text: str, unique: bool = False) -> dict:
    """Count the words of a text; with unique=true count distinct words only."""
    words = text.split()
    return {"words": len(set(words)) if unique else len(words), "chars": len(text)}


def slugify(title: str, max_length: int = 60) -> str:
    """Lower-case words of letters and digits joined by `-`, at most `max_length` characters."""
    words = re.findall(r"[^\W_]+", title.lower())
    return "-".join(words)[:max_length].rstrip("-")
