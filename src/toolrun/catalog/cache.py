"""The warm-load cache: one pickle per catalog file, keyed by content, options and record layout.

An entry holds a file's tools, warnings and sandbox profiles, with the digests of the environment
values and other files they were built from (checked on every read). Which files may be stored is
`LoadContext.cacheable` (catalog/loadcontext.py). A file not found here is built by `load_file`, looked up in
this module's namespace at each call: a test that replaces `toolrun.catalog.cache.load_file` sees exactly
which files were parsed.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import hashlib
import os
import pickle
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import Problem
from ..models import Example, Expect, Output, Param, ResourceLimits, Sandbox, ToolSpec
from .loader import load_file
from .options import LoadOptions
from .source import read_catalog

# Every record class a cache entry pickles. A slots dataclass unpickles its values by position, so
# an entry written by code whose classes had other fields would load with its values shifted into
# the wrong fields: the key covers each class's field names and types (and the version), and such
# an entry is never found. A record class added to ToolSpec or Problem belongs here (a test checks).
CACHED_RECORDS: tuple[type[Any], ...] = (ToolSpec, Param, ResourceLimits, Example, Expect, Problem, Sandbox, Output)


def records_key(records: Sequence[type[Any]], version: str) -> str:
    """A digest of the version and every field (name and annotation, in order) of `records`."""
    parts = [f"toolrun {version}"]
    for cls in records:
        layout = ",".join(f"{f.name}:{f.type}" for f in dataclasses.fields(cls))
        parts.append(f"{cls.__module__}.{cls.__qualname__}({layout})")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


@functools.cache
def cache_key() -> str:
    """The cache key part that changes with the code: the package version and the record layouts."""
    return records_key(CACHED_RECORDS, __version__)


def load_file_cached(
    path: Path, environ: Mapping[str, str], options: LoadOptions
) -> tuple[list[ToolSpec], list[Problem], bool, list[Any]]:
    """The file's tools, problems, whether they were built from the YAML (not from the cache), and the sandbox
    profiles it declares: from the cache when it holds the file (never in check mode), else built and stored."""
    # A load allocates hundreds of thousands of containers and frees none of them: the cyclic
    # GC would walk them again and again for nothing (it doubles the cost of unpickling).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load_file_uncollected(path, environ, options)
    finally:
        if was_enabled:
            gc.enable()


def _load_file_uncollected(
    path: Path, environ: Mapping[str, str], options: LoadOptions
) -> tuple[list[ToolSpec], list[Problem], bool, list[Any]]:
    cache_file = None
    if options.cache_dir is not None and not options.check:
        try:
            raw = read_catalog(path)
        except OSError:
            raw = None
        if raw is not None:
            head = f"{cache_key()}\0{path}\0{path.resolve()}\0{options.default_timeout}\0{options.max_output}\0"
            head += ",".join(options.curl_protocols) + "\0"
            digest = hashlib.sha256(head.encode("utf-8", "surrogatepass") + raw).hexdigest()
            cache_file = options.cache_dir / f"{digest}.pickle"
            del raw
            cached = _read_cache(cache_file, environ)
            if cached is not None:
                return cached[0], cached[1], False, cached[2]
    result = load_file(path, environ, options)
    tools, problems, declared = result.tools, result.problems, result.declared
    if options.check:  # validate-catalog: nothing is served from these, and nothing is cached
        return tools, problems, True, declared
    store = cache_file is not None and result.cacheable
    entry = {
        "env": {k: _env_digest(v) for k, v in result.used_env.items()},
        "files": result.extra_files,
        "tools": tools,
        "warnings": problems,
        "sandboxes": declared,
    }
    del result
    try:
        blob = pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # pragma: no cover - every record is plain data (the cache pickles them too)
        return tools, problems, True, declared
    if store:
        assert cache_file is not None
        _write_cache(cache_file, blob)
    # Compaction: the tools were allocated in between the YAML tree, the pydantic models and the other
    # garbage of the load, so every memory page they sit on stays resident once that garbage is freed
    # (for 10,000 tools: about 50 MB of live objects spread over 180 MB). Free everything first, then
    # take the tools back from their pickle: they land packed on few pages, and the emptied ones go back
    # to the system. A server's forked workers share (and count in their RSS) every page the parent keeps.
    del entry, tools, problems
    entry = pickle.loads(blob)
    return entry["tools"], entry["warnings"], True, entry["sandboxes"]


def _env_digest(value: str | None) -> str:
    return "-" if value is None else hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def _read_cache(cache_file: Path, environ: Mapping[str, str]) -> tuple[list[ToolSpec], list[Problem], list[Any]] | None:
    try:
        with cache_file.open("rb") as fh:
            entry = pickle.load(fh)
    except Exception:
        return None
    try:
        for name, digest in entry["env"].items():
            if _env_digest(environ.get(name)) != digest:
                return None
        for file_name, digest in entry["files"].items():
            if hashlib.sha256(Path(file_name).read_bytes()).hexdigest() != digest:
                return None
        tools: list[ToolSpec] = entry["tools"]
        warnings: list[Problem] = entry["warnings"]
        return tools, warnings, entry["sandboxes"]
    except Exception:
        return None


def _write_cache(cache_file: Path, blob: bytes) -> None:
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = cache_file.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, cache_file)
    except OSError:
        pass  # a cache that cannot be written is only a slower next start
