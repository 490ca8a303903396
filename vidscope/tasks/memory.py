"""Keep the resident memory of a long ingestion down (glibc only; a no-op elsewhere).

Several native libraries (CTranslate2, ONNX Runtime, Lance, PyAV) allocate from many threads.
glibc gives each thread its own malloc arena and keeps freed memory in them, so RSS only grows.
Capping the arenas and trimming freed memory after each stage keeps ingestion of long videos
within its memory budget (see benchmarks/ingest_memory.py).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading

#: mallopt parameter number of M_ARENA_MAX in glibc's malloc.h.
_M_ARENA_MAX = -8
_MAX_ARENAS = 2

_lock = threading.Lock()
_libc: ctypes.CDLL | None = None
_loaded = False


def _glibc() -> ctypes.CDLL | None:
    global _libc, _loaded
    with _lock:
        if not _loaded:
            _loaded = True
            name = ctypes.util.find_library("c")
            try:
                libc = ctypes.CDLL(name) if name else None
                _libc = libc if libc is not None and hasattr(libc, "malloc_trim") else None
            except OSError:
                _libc = None
        return _libc


def limit_malloc_arenas() -> bool:
    """Cap glibc's malloc arenas (call early, before worker threads start). True when applied."""
    libc = _glibc()
    return bool(libc is not None and libc.mallopt(_M_ARENA_MAX, _MAX_ARENAS))


def release_free_memory() -> None:
    """Hand memory that was freed but kept by malloc back to the operating system."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
