"""Cut a video into fixed-length clips (the ``segment`` stage); clips are the unit of retrieval."""

from __future__ import annotations

import math

from vidscope.tasks.stage import Stage, StageContext, StageOutcome

#: A trailing remainder shorter than this is folded into the previous clip instead of standing alone.
MIN_LAST_CLIP_SECONDS = 0.25


def clip_bounds(duration: float, clip_seconds: float) -> list[tuple[float, float]]:
    """``[(start, end), …]`` covering ``[0, duration]`` in ``clip_seconds`` steps; the last is shorter."""
    if duration <= 0:
        return []
    count = max(1, math.ceil(duration / clip_seconds - 1e-9))
    if count > 1 and duration - (count - 1) * clip_seconds < MIN_LAST_CLIP_SECONDS:
        count -= 1
    bounds = [(i * clip_seconds, min((i + 1) * clip_seconds, duration)) for i in range(count)]
    bounds[-1] = (bounds[-1][0], duration)
    return bounds


def clip_index_at(t: float, clip_seconds: float, clip_count: int) -> int:
    """The index of the clip containing time ``t`` (clamped to the existing clips)."""
    return min(max(int(t // clip_seconds), 0), clip_count - 1)


def _run(ctx: StageContext) -> StageOutcome:
    video_id = ctx.video.video_id
    bounds = clip_bounds(ctx.video.duration, ctx.settings.ingest.clip_seconds)
    rows = [
        {"video_id": video_id, "clip_index": i, "start": start, "end": end}
        for i, (start, end) in enumerate(bounds)
    ]
    ctx.store.replace_video_rows(ctx.store.clips, video_id, rows)
    return StageOutcome(rows=len(rows))


SEGMENT = Stage(
    name="segment",
    version=1,
    run=_run,
    config=lambda s: {"clip_seconds": s.ingest.clip_seconds},
    needs=("probe",),
    description="fixed-length clips (5 s by default; the last one shorter)",
)
