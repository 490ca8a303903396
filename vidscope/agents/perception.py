"""Frames and perception backends for the AVI tools: one time range of a video, checked against
its duration, read from the file when it is still where it was ingested (denser, sharper) or from
the stored 2 fps frames otherwise; backends from the model registry or handed in by the caller
(:class:`PerceptionContext`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import numpy as np
from pydantic import Field

from vidscope.agents.evidence import inspection_times, sample_evenly
from vidscope.agents.tools import ToolContext, ToolError
from vidscope.core.errors import BackendUnavailable
from vidscope.core.images import decode_jpeg
from vidscope.core.settings import Settings
from vidscope.storage.videos import VideoRecord
from vidscope.tasks.decode import frames_at

log = logging.getLogger(__name__)

#: The protocol type of one perception role (object detector, text reader, image–text embedder).
Backend = TypeVar("Backend")

#: How far past the end of the video a range may reach (rounding in the model's numbers).
RANGE_SLACK = 1.0


TimeRange = Annotated[
    list[float],
    Field(description="[start, end] in seconds.", min_length=2, max_length=2),
]


# ============================================================================ backends and frames


class PerceptionContext(ToolContext):
    """A :class:`ToolContext` that also carries model backends given by the caller.

    ``backends`` maps a model role (``image_text``, ``object_detector``, ``text_reader``) to an
    object satisfying that role's protocol; roles not given are loaded from the settings.
    """

    def __init__(self, *args: Any, backends: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.backends = dict(backends or {})


def perception_backend(
    ctx: ToolContext, role: str, load: Callable[[Settings], Backend | None]
) -> Backend | None:
    """The backend for ``role``: one handed to a :class:`PerceptionContext`, else the configured
    one, loaded with ``load`` (the role's loader in :mod:`vidscope.models.registry`)."""
    given: Mapping[str, Any] = getattr(ctx, "backends", {})
    if role in given:
        return given[role]
    try:
        return load(ctx.settings)
    except BackendUnavailable as exc:
        raise ToolError(str(exc)) from exc


def checked_range(
    record: VideoRecord, time_range: list[float], *, instant: bool = True
) -> tuple[float, float]:
    """``time_range`` as (start, end) inside the video; a :class:`ToolError` saying what is wrong."""
    start, end = float(time_range[0]), float(time_range[1])
    duration = float(record.duration)
    if not (math.isfinite(start) and math.isfinite(end)):
        raise ToolError(f"time range {time_range} must be finite numbers of seconds")
    if start < 0 or start > duration:
        raise ToolError(f"start {start:g}s lies outside the video (duration {duration:.1f}s)")
    if end > duration + RANGE_SLACK:
        raise ToolError(f"end {end:g}s lies past the end of the video (duration {duration:.1f}s)")
    end = min(end, duration)
    if end < start or (end == start and not instant):
        raise ToolError(f"time range [{start:g}, {end:g}] must have start < end")
    return start, end


@dataclass
class RangeFrames:
    """Frames of one time range: their times, RGB images, and where they came from."""

    times: list[float]
    images: list[np.ndarray]
    source: str


def file_usable(record: VideoRecord) -> bool:
    """Whether the ingested file is still where it was, with the same size."""
    path = Path(record.path)
    try:
        return path.is_file() and path.stat().st_size == record.size_bytes
    except OSError:
        return False


def frames_from_file(
    ctx: ToolContext, record: VideoRecord, times: list[float], max_side: int | None = None
) -> list[np.ndarray] | None:
    """Frames at ``times`` decoded from the video file; ``None`` when it cannot be read."""
    if not times or not file_usable(record):
        return None
    try:
        return frames_at(Path(record.path), times, max_side=max_side or ctx.settings.ingest.max_frame_side)
    except (OSError, ValueError) as exc:  # moved, truncated, undecodable: use stored frames
        log.info("reading %s failed (%s); using stored frames", record.path, exc)
        return None


def stored_range_frames(
    ctx: ToolContext, video_id: str, start: float, end: float, budget: int
) -> RangeFrames:
    """Stored frames inside [start, end] (evenly thinned to ``budget``; the nearest if none)."""
    store = ctx.store
    rows = (
        store.rows(store.frames, video_id=video_id, where=f"t >= {start!r} AND t <= {end!r}", columns=["t"])
        .column("t")
        .to_pylist()
    )
    if not rows:
        all_times = np.array(store.rows(store.frames, video_id=video_id, columns=["t"]).column("t"))
        if all_times.size == 0:
            raise ToolError(f"video {video_id} has no stored frames and its file is unreadable")
        rows = [float(all_times[np.abs(all_times - (start + end) / 2).argmin()])]
    rows.sort()
    picked = [rows[i] for i in sample_evenly(len(rows), budget)]
    where = " OR ".join(f"t = {t!r}" for t in picked)
    frames = store.rows(
        store.frames, video_id=video_id, where=where, columns=["t", "jpeg"], order_by=["t"]
    ).to_pylist()
    return RangeFrames(
        [float(f["t"]) for f in frames], [decode_jpeg(f["jpeg"]) for f in frames], "stored frames"
    )


def range_frames(
    ctx: ToolContext,
    record: VideoRecord,
    start: float,
    end: float,
    *,
    budget: int,
    fps: float,
    prefer_file: bool,
    max_side: int | None = None,
) -> RangeFrames:
    """Up to ``budget`` frames spread over [start, end], at most ``fps`` per second.

    ``prefer_file`` reads the video file first (any rate, exact times); otherwise the frames stored
    at ingestion come first and the file is the fallback (a video ingested without frames).
    """
    times = inspection_times([[start, end]], budget, min(fps, max(record.fps, 1.0)))

    def from_file() -> RangeFrames | None:
        images = frames_from_file(ctx, record, times, max_side)
        return None if images is None else RangeFrames(times, images, "video file")

    if prefer_file:
        found = from_file()
        if found is not None:
            return found
    try:
        return stored_range_frames(ctx, record.video_id, start, end, budget)
    except ToolError:
        found = None if prefer_file else from_file()
        if found is None:
            raise
        return found
