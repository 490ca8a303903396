"""How many threads a model library's own pool gets during ingestion.

Ingestion runs two model stages side by side: speech (faster-whisper on CTranslate2) beside
frames → OCR (ONNX Runtime). Left to their defaults, each library starts a thread per core and
busy-waits between operations, so on a 2-core machine four spinning threads fight over two
cores. On the throughput benchmark's 5-minute narrated video (2 cores), giving each stage one
thread cut the ingestion's wall time from 61–86 s to 42–45 s and its CPU time from 108–146 s to
68–74 s (``benchmarks/RESULTS.md``). Each stage therefore gets half of the cores this process may
use, at least one.
"""

from __future__ import annotations

import os

#: The model stages ingestion runs at the same time (speech, and OCR after frame sampling).
SIDE_BY_SIDE_STAGES = 2


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, e.g. a container's limit)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity call (macOS)
        return os.cpu_count() or 1


def stage_threads() -> int:
    """Threads for one model stage's own pool: half the usable cores, at least one."""
    return max(1, usable_cores() // SIDE_BY_SIDE_STAGES)
