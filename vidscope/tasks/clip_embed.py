"""Embed every clip as a whole with the video–text model (the ``clip_embed`` stage).

MAVIS's fine stage scores candidates with a video encoder where one is configured; this stage gives
each clip of the video one row in ``clip_videos``: the embedding ``models.video_text`` (X-CLIP, …)
makes of :attr:`~vidscope.models.protocols.video_text.VideoTextEmbedder.frames_per_clip` of the
clip's sampled frames, chosen evenly over it (repeated when the clip has fewer). The MAVIS rerank
and moment search read these vectors instead of embedding clips per query. Without a video–text
model the stage is skipped with that reason.

Clips are embedded :data:`BATCH` at a time and each batch is written at once, so a run that stops
half-way keeps what it did. The next run keeps clips that already have a vector when the current
model reproduces the stored vector of the first of them (same model, same weights, same frames)
and embeds only the rest; otherwise it embeds them all again, as ``frame_embed`` does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vidscope.core.images import decode_jpeg
from vidscope.models import registry
from vidscope.models.protocols.image import Image
from vidscope.models.protocols.video_text import VideoTextEmbedder
from vidscope.storage import Store
from vidscope.storage.schema import sql_quote
from vidscope.tasks.stage import (
    Stage,
    StageContext,
    StageNotApplicable,
    StageOutcome,
    role_config,
)

#: Clips decoded, embedded and written per step (8 clips x 8 frames: one X-CLIP base forward).
BATCH = 8
#: Cosine at or above which a stored vector counts as this model's (see ``frame_embed``).
SAME_MODEL_COSINE = 0.999


def pick_frames(frame_indexes: list[int], count: int) -> list[int]:
    """``count`` of a clip's frame indexes, evenly over it in time order (repeats when it has fewer)."""
    positions = np.linspace(0, len(frame_indexes) - 1, num=count)
    return [frame_indexes[int(round(p))] for p in positions]


def _clip_frames(store: Store, video_id: str) -> dict[int, list[int]]:
    """clip index -> the frame indexes sampled in it, in time order."""
    table = store.rows(store.frames, video_id=video_id, columns=["frame_index", "clip_index"])
    frames: dict[int, list[int]] = {}
    pairs = zip(table.column("clip_index").to_pylist(), table.column("frame_index").to_pylist(), strict=True)
    for clip, frame in sorted(pairs, key=lambda p: p[1]):
        frames.setdefault(int(clip), []).append(int(frame))
    return frames


def _images(store: Store, video_id: str, indexes: list[int]) -> dict[int, Image]:
    rows = store.rows(
        store.frames,
        video_id=video_id,
        where=f"frame_index IN ({', '.join(map(str, sorted(set(indexes))))})",
        columns=["frame_index", "jpeg"],
    ).to_pylist()
    return {int(row["frame_index"]): decode_jpeg(row["jpeg"]) for row in rows}


def embed_clips(
    store: Store, video_id: str, model: VideoTextEmbedder, clips: list[int], frames: dict[int, list[int]]
) -> np.ndarray:
    """The model's vectors of ``clips`` (one row each), from their stored frames."""
    picks = {c: pick_frames(frames[c], model.frames_per_clip) for c in clips}
    images = _images(store, video_id, [i for p in picks.values() for i in p])
    return model.embed_videos([[images[i] for i in picks[c]] for c in clips])


def _stored(store: Store, video_id: str) -> dict[int, np.ndarray]:
    table = store.rows(
        store.clip_videos,
        video_id=video_id,
        where="video_embedding IS NOT NULL",
        columns=["clip_index", "video_embedding"],
    )
    return {
        int(c): np.asarray(v, dtype=np.float32)
        for c, v in zip(
            table.column("clip_index").to_pylist(), table.column("video_embedding").to_pylist(), strict=True
        )
    }


def _run(ctx: StageContext) -> StageOutcome:
    model = registry.video_text(ctx.settings)
    if model is None:
        raise StageNotApplicable("no video-text model configured (models.video_text)")
    store, video_id = ctx.store, ctx.video.video_id
    if model.dim != store.video_dim:
        raise RuntimeError(
            f"the video-text model gives {model.dim}-d vectors but the store was opened for "
            f"{store.video_dim}-d"
        )
    spans = {
        int(r["clip_index"]): (float(r["start"]), float(r["end"]))
        for r in store.rows(
            store.clips, video_id=video_id, columns=["clip_index", "start", "end"]
        ).to_pylist()
    }
    frames = _clip_frames(store, video_id)
    clips = sorted(c for c in spans if frames.get(c))
    if not clips:
        raise StageNotApplicable("the video has no clips with sampled frames")
    stored = {c: v for c, v in _stored(store, video_id).items() if c in spans}
    kept = 0
    if stored:
        first = min(stored)
        again = embed_clips(store, video_id, model, [first], frames)[0] if first in frames else None
        if again is not None and float(again @ stored[first]) >= SAME_MODEL_COSINE:
            kept = len(stored)
    if not kept:  # another model's vectors, or clips that no longer exist: start over
        store.delete_rows(store.clip_videos, f"video_id = {sql_quote(video_id)}")
    todo = [c for c in clips if not kept or c not in stored]
    for start in range(0, len(todo), BATCH):
        chunk = todo[start : start + BATCH]
        vectors = embed_clips(store, video_id, model, chunk, frames)
        rows: list[dict[str, Any]] = [
            {
                "video_id": video_id,
                "clip_index": c,
                "start": spans[c][0],
                "end": spans[c][1],
                "video_embedding": v.tolist(),
                "model": model.name,
            }
            for c, v in zip(chunk, vectors, strict=True)
        ]
        store.upsert(store.clip_videos, rows)
        ctx.progress("clip_embed", kept + start + len(chunk), len(clips))
    return StageOutcome(
        rows=len(clips),
        details={
            "model": model.name,
            "dim": model.dim,
            "frames_per_clip": model.frames_per_clip,
            "embedded": len(todo),
            "kept": kept,
        },
    )


CLIP_EMBED = Stage(
    name="clip_embed",
    version=1,
    run=_run,
    config=lambda s: role_config(s, "video_text", "model"),
    needs=("segment", "frames"),
    description="one video-text embedding per clip (models.video_text), for the search rerank",
)
