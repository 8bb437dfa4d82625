"""The fingerprint of the UI sources that ui-dist/ was built from.

`npm run build` (the plugin in vite.config.ts) writes it to ui-dist/.source-hash; `make ui` and the
drift test (tests/test_ui.py) recompute it here, without Node.js, to tell whether the committed
ui-dist/ is still the build of the committed ui/. Both sides hash the same way: every file under ui/
except node_modules/, __pycache__/ and dot-files, sorted by path; for each, the path, a NUL, the
byte length, a NUL and the bytes. Keep the two implementations in step.

    python3 ui/source_hash.py            print the hash of ui/
    python3 ui/source_hash.py --check    exit 0 if ui-dist/.source-hash matches, 1 (with a message) if not
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

UI = Path(__file__).resolve().parent
STAMP = UI.parent / "ui-dist" / ".source-hash"
SKIP = {"node_modules", "__pycache__"}


def source_files(root: Path = UI) -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    for path in root.rglob("*"):
        parts = path.relative_to(root).parts
        if any(part in SKIP or part.startswith(".") for part in parts) or not path.is_file():
            continue
        found.append(("/".join(parts), path))
    return sorted(found)


def source_hash(root: Path = UI) -> str:
    digest = hashlib.sha256()
    for name, path in source_files(root):
        data = path.read_bytes()
        digest.update(name.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    return digest.hexdigest()


def main(argv: list[str]) -> int:
    current = source_hash()
    if "--check" not in argv:
        print(current)
        return 0
    built = STAMP.read_text(encoding="utf-8").strip() if STAMP.is_file() else ""
    if built == current:
        return 0
    print("ui-dist/ is not the build of ui/ (its .source-hash differs): run `make ui`", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
