"""Detect and track objects in the sampled frames (the ``detect`` stage).

Runs only when an object detector is configured (none is in the embedded profile: no detection
weights ship offline). Frames are fed in time order in chunks, continuing the tracker between
chunks, so track ids persist across the whole video.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from vidscope.core.images import decode_jpeg
from vidscope.models import registry
from vidscope.models.protocols.object_detector import ObjectDetector
from vidscope.tasks.stage import (
    Stage,
    StageContext,
    StageNotApplicable,
    StageOutcome,
    role_config,
)

CHUNK = 32

# A tracker keeps state between chunks, so one detector must not interleave two videos.
_video_locks: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_locks_guard = threading.Lock()


def _lock_for(detector: object) -> threading.Lock:
    with _locks_guard:
        return _video_locks.setdefault(detector, threading.Lock())


def _run(ctx: StageContext) -> StageOutcome:
    detector: ObjectDetector | None = registry.object_detector(ctx.settings)
    if detector is None:
        raise StageNotApplicable("no object detector configured (models.object_detector)")
    store, video_id = ctx.store, ctx.video.video_id
    total = store.count(store.frames, video_id)
    rows: list[dict[str, Any]] = []
    with _lock_for(detector):
        for first in range(0, total, CHUNK):
            frames = store.rows(
                store.frames,
                video_id=video_id,
                where=f"frame_index >= {first} AND frame_index < {first + CHUNK}",
                columns=["frame_index", "t", "jpeg"],
            ).to_pylist()
            images = [decode_jpeg(f["jpeg"]) for f in frames]
            found = detector.detect(images, track=True, new_sequence=first == 0)  # type: ignore[call-arg]
            for frame, detections in zip(frames, found, strict=True):
                rows += [
                    {
                        "video_id": video_id,
                        "frame_index": frame["frame_index"],
                        "det_index": i,
                        "t": frame["t"],
                        "label": d.label,
                        "box": [float(v) for v in d.box],
                        "score": float(d.score),
                        "track_id": d.track_id,
                    }
                    for i, d in enumerate(detections)
                ]
            ctx.progress("detect", min(first + CHUNK, total), total)
    store.replace_video_rows(store.detections, video_id, rows)
    labels = sorted({r["label"] for r in rows})
    tracks = len({(r["label"], r["track_id"]) for r in rows if r["track_id"] is not None})
    return StageOutcome(
        rows=len(rows), details={"detector": detector.name, "labels": labels[:50], "tracks": tracks}
    )


DETECT = Stage(
    name="detect",
    version=1,
    run=_run,
    config=lambda s: role_config(s, "object_detector", "detector"),
    needs=("frames",),
    description="objects per frame with persistent track ids (ultralytics YOLO + ByteTrack)",
)
