"""The C heap of a long-running process: hand freed memory back to the system (glibc; a no-op elsewhere).

A server keeps what it loaded for its whole life and forks workers that share those pages, so the pages
it keeps resident count in every worker's RSS. glibc keeps freed memory for reuse: the pages between
live blocks after a catalog load from YAML, and the big buffers of large answers (a `GET /tools` of
10,000 tools is 6 MB), which it serves from the heap once one such buffer has been freed.
"""

from __future__ import annotations

import functools
from typing import Any

M_MMAP_THRESHOLD = -3  # mallopt parameter (malloc.h)
# Blocks this big get their own mapping, returned on free. Above every buffer a request allocates and frees
# again: asyncio reads a socket into a fresh 256 KiB bytes (shrunk after the read) and a tool's pipe is read
# in 64 KiB; at glibc's initial 128 KiB each such read was an mmap, an mremap and page faults (about 100 us of
# kernel time per exec call). Large answers (a `GET /tools` of 10,000 tools is 6 MB) still get their own.
BIG_BLOCK = 1024 * 1024


@functools.cache
def _libc() -> Any:
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.malloc_trim  # noqa: B018 - glibc only (musl has no malloc_trim)
        libc.mallopt  # noqa: B018
    except (OSError, AttributeError, ImportError):  # pragma: no cover - not glibc
        return None
    return libc


def release_free_memory() -> None:
    """Return the free pages of the heap to the system (malloc_trim: its top and the pages in between)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


def big_blocks_mapped() -> None:
    """Every block of BIG_BLOCK bytes or more gets its own mapping, given back when it is freed.

    glibc's default raises that threshold to the size of the largest block freed so far, after which such
    blocks come from the heap and their pages stay with the process. A server calls this once at start."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(M_MMAP_THRESHOLD, BIG_BLOCK)
