"""Progress events from ingestion, for whoever displays them (the CLI's progress bars).

Stages call :func:`report`; a front end registers a listener with :func:`listen`. Events are plain
dicts so any thread (Prefect runs tasks in worker threads) can emit them cheaply.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

Listener = Callable[[dict[str, Any]], None]

_listeners: list[Listener] = []
_lock = threading.Lock()


def report(video_id: str, stage: str, event: str, **fields: Any) -> None:
    """Emit one event: ``event`` is started/progress/done/skipped/cached/failed/blocked/unavailable."""
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        with suppress(Exception):  # a display problem must never break ingestion
            listener({"video_id": video_id, "stage": stage, "event": event, **fields})


@contextmanager
def listen(listener: Listener) -> Iterator[None]:
    """Receive every event emitted while the block runs."""
    with _lock:
        _listeners.append(listener)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(listener)
