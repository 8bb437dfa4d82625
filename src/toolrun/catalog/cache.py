"""The warm-load cache: one JSON file per catalog file, keyed by content, options and record layout.

An entry holds a file's tools, warnings and sandbox profiles, with the digests of the environment
values and other files they were built from (checked on every read). The format is data only
(`encode`/`decode`): a table of JSON values where a record names one of CACHED_RECORDS and lists
its fields, so reading an entry can build those records, tuples, lists, dicts and scalars, and
nothing else: an entry a tool or a person wrote (a pickle, garbage, a digest that does not match)
is a miss, logged, and the file is built from its YAML. Entries are 0600 files in a 0700 folder,
and an entry that is not a regular file owned by this user, or that others may write, is a miss.
Which files may be stored is `LoadContext.cacheable` (catalog/loadcontext.py). A file not found here
is built by `load_file`, looked up in this module's namespace at each call: a test that replaces
`toolrun.catalog.cache.load_file` sees exactly which files were parsed.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import hashlib
import json
import logging
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import Problem
from ..models import Example, Expect, Output, Param, ResourceLimits, Sandbox, ToolSpec
from .loadcontext import Declared
from .loader import load_file
from .options import LoadOptions
from .source import read_catalog

log = logging.getLogger("toolrun.catalog.cache")

# Every record class a cache entry holds. An entry lists each record's values by position, so an
# entry written by code whose classes had other fields would load with its values shifted into
# the wrong fields: the key covers each class's field names and types (and the version), and such
# an entry is never found. A record class added to ToolSpec or Problem belongs here (a test checks).
CACHED_RECORDS: tuple[type[Any], ...] = (
    ToolSpec,
    Param,
    ResourceLimits,
    Example,
    Expect,
    Problem,
    Sandbox,
    Declared,
    Output,
)
FORMAT = "toolrun-catalog-cache"
SUFFIX = ".json"


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


# -- the format: data only -----------------------------------------------------------------------------


class _Encoder:
    """`value` as a table of nodes, each after the nodes it refers to (by index): a str, number, bool or
    null is its own node (one node per distinct value); a tuple, list or dict is `["T"|"L"|"D", refs...]`
    (a dict's keys and values alternate); a record is `[its class name, refs of its fields in order]`.
    One object met twice is one node (as the loader shares repeated values, so does the loaded copy)."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.seen: dict[int, int] = {}
        self.scalars: dict[tuple[type, Any], int] = {}
        self.records = {cls: (cls.__name__, tuple(f.name for f in dataclasses.fields(cls))) for cls in CACHED_RECORDS}

    def ref(self, value: Any) -> int:
        kind = type(value)
        if value is None or kind in (str, int, float, bool):
            key = (kind, value)
            found = self.scalars.get(key)
            if found is None:
                found = self.scalars[key] = self._add(value)
            return found
        found = self.seen.get(id(value))
        if found is not None:
            return found
        if kind is tuple or kind is list:
            node: list[Any] = ["T" if kind is tuple else "L", *(self.ref(v) for v in value)]
        elif kind is dict:
            node = ["D"]
            for k, v in value.items():
                node += (self.ref(k), self.ref(v))
        elif kind in self.records:
            name, fields = self.records[kind]
            node = [name, *(self.ref(getattr(value, f)) for f in fields)]
        else:
            raise TypeError(f"a {kind.__name__} value cannot be cached")
        found = self.seen[id(value)] = self._add(node)
        return found

    def _add(self, node: Any) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1


def encode(value: Any) -> list[Any]:
    """The node table of `value` (its last node is `value`); TypeError for a value of another type."""
    encoder = _Encoder()
    encoder.ref(value)
    return encoder.nodes


def decode(nodes: list[Any]) -> Any:
    """The value of a node table `encode` made; ValueError for anything else."""
    if type(nodes) is not list or not nodes:
        raise ValueError("not a node table")
    records = {cls.__name__: (cls, len(dataclasses.fields(cls))) for cls in CACHED_RECORDS}
    built: list[Any] = []
    try:
        for node in nodes:
            if type(node) is not list:
                if type(node) not in (str, int, float, bool) and node is not None:
                    raise ValueError("a node of an unknown type")
                built.append(node)
                continue
            tag, refs = node[0], node[1:]
            if refs and min(refs) < 0:  # (a reference that is no number raises TypeError)
                raise ValueError("a reference that is not a node")
            items = [built[i] for i in refs]  # only nodes already built: no cycle, no reference ahead
            if tag == "T":
                built.append(tuple(items))
            elif tag == "L":
                built.append(items)
            elif tag == "D":
                built.append(dict(zip(items[::2], items[1::2], strict=True)))
            elif tag in records and len(items) == records[tag][1]:
                built.append(records[tag][0](*items))
            else:
                raise ValueError(f"an unknown node {tag!r}")
    except (IndexError, TypeError) as exc:
        raise ValueError(f"a malformed node table: {exc}") from None
    return built[-1]


# -- loading through the cache ---------------------------------------------------------------------------


def load_file_cached(
    path: Path, environ: Mapping[str, str], options: LoadOptions
) -> tuple[list[ToolSpec], list[Problem], bool, list[Any]]:
    """The file's tools, problems, whether they were built from the YAML (not from the cache), and the sandbox
    profiles it declares: from the cache when it holds the file (never in check mode), else built and stored."""
    # A load allocates hundreds of thousands of containers and frees none of them: the cyclic
    # GC would walk them again and again for nothing (it doubles the cost of decoding).
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
            cache_file = options.cache_dir / f"{digest}{SUFFIX}"
            del raw
            cached = _read_cache(cache_file, environ)
            if cached is not None:
                return cached[0], cached[1], False, cached[2]
    result = load_file(path, environ, options)
    _hide(result.extra_files)
    tools, problems, declared = result.tools, result.problems, result.declared
    if options.check:  # validate-catalog: nothing is served from these, and nothing is cached
        return tools, problems, True, declared
    store = cache_file is not None and result.cacheable
    env = {k: _env_digest(v) for k, v in result.used_env.items()}
    files = result.extra_files
    del result
    try:
        nodes = encode({"tools": tools, "warnings": problems, "sandboxes": declared})
    except (TypeError, RecursionError) as exc:  # a value of a kind the format does not hold: not cached
        log.debug("catalog cache: %s is not cached: %s", path, exc)
        return tools, problems, True, declared
    if store:
        assert cache_file is not None
        _write_cache(cache_file, {"env": env, "files": files, "nodes": nodes})
    # Compaction: the tools were allocated in between the YAML tree, the pydantic models and the other
    # garbage of the load, so every memory page they sit on stays resident once that garbage is freed
    # (for 10,000 tools: about 50 MB of live objects spread over 180 MB). Free everything first, then
    # build the tools again from their node table: they land packed on few pages, and the emptied ones go
    # back to the system. A server's forked workers share (and count in their RSS) every page the parent keeps.
    del tools, problems, declared
    entry = decode(nodes)
    return entry["tools"], entry["warnings"], True, entry["sandboxes"]


def _env_digest(value: str | None) -> str:
    return "-" if value is None else hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def _read_cache(cache_file: Path, environ: Mapping[str, str]) -> tuple[list[ToolSpec], list[Problem], list[Any]] | None:
    """The entry's tools, warnings and profiles; None (a miss) when there is none, or when it is stale, or not
    one this code wrote (logged: read from another owner, tampered with, truncated, another format)."""
    try:
        blob = _read_own(cache_file)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("catalog cache: ignoring the entry %s (%s); loading the catalog file itself", cache_file, exc)
        return None
    try:
        entry = _parse(blob)
    except (ValueError, RecursionError) as exc:
        log.warning("catalog cache: ignoring the entry %s: %s; loading the catalog file itself", cache_file, exc)
        return None
    try:
        for name, digest in entry["env"].items():
            if _env_digest(environ.get(name)) != digest:
                return None
        for file_name, digest in entry["files"].items():
            if hashlib.sha256(Path(file_name).read_bytes()).hexdigest() != digest:
                return None
    except (OSError, AttributeError, TypeError):
        return None
    _hide(entry["files"])
    return entry["tools"], entry["warnings"], entry["sandboxes"]


def _hide(files: Mapping[str, str]) -> None:
    """The other files the tools were built from (an fn tool's Python source, an output schema, an env file) are
    toolrun's own as the catalog file is: no sandbox sees them, and a `writable` path holding one fails the call.
    A tool that could write an fn tool's module would have the server run its code, unsandboxed, at the next
    start. An fn tool's module is hidden with the bytecode its import writes beside it (`__pycache__/<module>.*.pyc`,
    or under sys.pycache_prefix): the module's code and constants compiled; one not written yet is one no `writable`
    path may hold (the server would import bytecode a tool wrote there)."""
    from ..exec.sandbox import hide

    hide(files)
    hide(_bytecode(path) for path in files if path.endswith(".py"))


def _bytecode(path: str) -> str:
    """Where an import of the module at `path` writes its bytecode ("" where this Python writes none)."""
    import importlib.util

    try:
        return importlib.util.cache_from_source(path)
    except NotImplementedError:  # no cache tag: this Python writes no bytecode
        return ""


def _read_own(cache_file: Path) -> bytes:
    """The file's bytes, read without following a link; ValueError when it is not a regular file of this user
    that only this user may write."""
    fd = os.open(cache_file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file")
        if info.st_uid != os.geteuid() or info.st_mode & 0o022:
            raise ValueError(f"owned by uid {info.st_uid} with mode {info.st_mode & 0o7777:04o}, not this user's 0600")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    finally:
        os.close(fd)


def _parse(blob: bytes) -> dict[str, Any]:
    """An entry's first line (format, key, digest of the rest) checked, then the rest decoded."""
    first, newline, body = blob.partition(b"\n")
    if not newline or not first.startswith(b"{"):
        raise ValueError("not an entry of this format")
    head = json.loads(first)
    if not isinstance(head, dict) or head.get("format") != FORMAT or head.get("key") != cache_key():
        raise ValueError("not an entry of this format and version")
    if head.get("sha256") != hashlib.sha256(body).hexdigest():
        raise ValueError("its digest does not match its content (changed after it was written)")
    doc = json.loads(body)
    if not isinstance(doc, dict) or not isinstance(doc.get("env"), dict) or not isinstance(doc.get("files"), dict):
        raise ValueError("not an entry of this format")
    value = decode(doc.get("nodes"))  # type: ignore[arg-type]
    parts = ("tools", "warnings", "sandboxes")
    if not isinstance(value, dict) or not all(isinstance(value.get(k), list) for k in parts):
        raise ValueError("not an entry of this format")
    if not all(type(t) is ToolSpec for t in value["tools"]) or not all(type(p) is Problem for p in value["warnings"]):
        raise ValueError("an entry holding other records than tools and problems")
    if not all(type(d) is Declared for d in value["sandboxes"]):
        raise ValueError("an entry holding other records than sandbox profiles")
    return {"env": doc["env"], "files": doc["files"], **value}


def _write_cache(cache_file: Path, entry: dict[str, Any]) -> None:
    body = json.dumps(entry, separators=(",", ":"), check_circular=False).encode()
    head = json.dumps({"format": FORMAT, "key": cache_key(), "sha256": hashlib.sha256(body).hexdigest()})
    folder = cache_file.parent
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            log.warning("catalog cache: %s is not a folder of this user: nothing is stored there", folder)
            return
        if info.st_mode & 0o077:
            os.chmod(folder, 0o700)
        tmp = cache_file.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fd, 0o600)  # whatever the umask and whatever was there
            fh.write(head.encode() + b"\n" + body)
        os.replace(tmp, cache_file)
    except OSError:
        pass  # a cache that cannot be written is only a slower next start
