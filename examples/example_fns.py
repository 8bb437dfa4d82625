"""Python tools for the example catalog (fn: example_fns:word_count)."""


def word_count(text: str, unique: bool = False) -> dict:
    """Count the words of a text; with unique=true count distinct words only."""
    words = text.split()
    return {"words": len(set(words)) if unique else len(words), "chars": len(text)}
