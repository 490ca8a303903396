"""One ingestion of a video at a time across every process and host that shares a data dir.

Two ingestions of the same video at once (two hosts of a cluster each running ``vidscope ingest``
on the shared watch folder, or the nightly run and a command) would each write the video's rows:
LanceDB's merge of one writer does not see the other's uncommitted inserts, so both insert, and the
table holds every clip twice (the cluster test caught it: the next stage refused its own read with
"duplicate natural keys"). Stages are idempotent one at a time, not side by side.

So an ingestion holds an exclusive lock on ``<data_dir>/locks/ingest-<video id>.lock`` from its
probe to its last stage. ``flock`` is released by the kernel when the holder's process ends in any
way (a killed host loses nothing and blocks nobody), and it works across network namespaces and
over NFS (Linux emulates it with POSIX locks there). A second ingestion of the video waits, says so
once, then finds every stage current and does nothing. With the store in object storage
(``[storage] uri``) and no shared data dir, hosts do not see each other's locks: give them one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: no other process is coordinated with (one machine, one ingestion)
    fcntl = None  # type: ignore[assignment]

LOCKS = "locks"


def lock_path(data_dir: Path, video_id: str) -> Path:
    """The lock file of ``video_id``'s ingestion under ``data_dir``."""
    if not video_id or not all(c.isalnum() for c in video_id):
        raise ValueError(f"not a video id: {video_id!r}")
    return Path(data_dir).expanduser() / LOCKS / f"ingest-{video_id}.lock"


@contextmanager
def ingesting(data_dir: Path, video_id: str, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold ``video_id``'s ingestion lock for the ``with`` block; when another process (or thread)
    holds it, call ``on_wait`` once and wait for it."""
    if fcntl is None:
        yield
        return
    path = lock_path(data_dir, video_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # releases the lock
