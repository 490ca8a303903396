"""Keep the resident memory of a long ingestion down (glibc only; a no-op elsewhere).

Several native libraries (CTranslate2, ONNX Runtime, Lance, PyAV) allocate from many threads.
glibc gives each thread its own malloc arena and keeps freed memory in them, so RSS only grows.
Capping the arenas and trimming freed memory after each stage keeps ingestion of long videos
within its memory budget (see benchmarks/ingest_memory.py).

Blocks of :data:`_MMAP_THRESHOLD` and more are also given their own mappings, returned to the
system when freed. glibc's default threshold starts at 128 KiB and rises to 32 MiB as such blocks
are freed, after which the models' per-call buffers (ONNX Runtime without its arena, CTranslate2)
stay in the arenas' heaps, fragmented. On the 12-minute lecture with the image–text model on and
120-s speech pieces (two runs each, 2026-11-29): peak RSS 1,528–1,578 MB with glibc's default,
1,359–1,406 MB at 16 MiB (CPU +5 %), 1,259–1,302 MB at 4 MiB (CPU +10 %: every such call maps
fresh pages).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading

#: mallopt parameter numbers of M_ARENA_MAX and M_MMAP_THRESHOLD in glibc's malloc.h.
_M_ARENA_MAX = -8
_M_MMAP_THRESHOLD = -3
_MAX_ARENAS = 2
_MMAP_THRESHOLD = 16 * 1024 * 1024

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


def limit_malloc() -> bool:
    """Cap glibc's malloc arenas and fix its mmap threshold (call early, before worker threads
    start). True when both were applied."""
    libc = _glibc()
    if libc is None:
        return False
    arenas = libc.mallopt(_M_ARENA_MAX, _MAX_ARENAS)
    return bool(arenas and libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD))


def release_free_memory() -> None:
    """Hand memory that was freed but kept by malloc back to the operating system."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
