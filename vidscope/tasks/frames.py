"""Sample frames at a fixed rate and store them as JPEG (the ``frames`` stage).

Frames stream from the decoder in batches, so memory stays bounded however long the video is;
each batch is an idempotent upsert, and rows left over from an earlier run with other settings are
deleted at the end. A crash half-way therefore leaves rows that the next run overwrites, never
duplicates.
"""

from __future__ import annotations

from vidscope.core.images import encode_jpeg
from vidscope.storage.schema import sql_quote
from vidscope.tasks.decode import merge_ranges, sample_frames
from vidscope.tasks.segment import clip_bounds, clip_index_at
from vidscope.tasks.stage import Stage, StageContext, StageOutcome

WRITE_BATCH = 128


def _run(ctx: StageContext) -> StageOutcome:
    settings, store, video = ctx.settings.ingest, ctx.store, ctx.video
    clip_count = len(clip_bounds(video.duration, settings.clip_seconds))
    batch: list[dict[str, object]] = []
    written = 0
    lost: list[tuple[float, float]] = []
    # Up to the registered duration: a truncated file is registered with what its data reach.
    frames = sample_frames(
        ctx.path, fps=settings.frame_fps, max_side=settings.max_frame_side, end=video.duration, lost=lost
    )
    for frame in frames:
        height, width = frame.image.shape[:2]
        batch.append(
            {
                "video_id": video.video_id,
                "frame_index": frame.index,
                "t": frame.t,
                "clip_index": clip_index_at(frame.t, settings.clip_seconds, clip_count),
                "width": width,
                "height": height,
                "jpeg": encode_jpeg(frame.image, settings.jpeg_quality),
            }
        )
        if len(batch) >= WRITE_BATCH:
            written += store.upsert(store.frames, batch)
            batch.clear()
            ctx.progress("frames", frame.t, video.duration)
    written += store.upsert(store.frames, batch)
    if written == 0:
        raise RuntimeError("no frame could be decoded")
    store.delete_rows(store.frames, f"video_id = {sql_quote(video.video_id)} AND frame_index >= {written}")
    details: dict[str, object] = {"fps": settings.frame_fps}
    if lost:
        # Corrupt packets were skipped: say which stretches of the picture are missing.
        ranges = merge_ranges(lost)
        details["lost"] = [[round(a, 2), round(b, 2)] for a, b in ranges]
        details["note"] = "corrupt video skipped at " + ", ".join(f"{a:.1f}–{b:.1f} s" for a, b in ranges)
    return StageOutcome(rows=written, details=details)


FRAMES = Stage(
    name="frames",
    version=1,
    run=_run,
    config=lambda s: {
        "fps": s.ingest.frame_fps,
        "max_side": s.ingest.max_frame_side,
        "jpeg_quality": s.ingest.jpeg_quality,
        "clip_seconds": s.ingest.clip_seconds,
    },
    needs=("probe",),
    description="frames at 2 fps (default), resized to the frame size limit, stored as JPEG",
)
