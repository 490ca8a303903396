"""Embed every sampled frame with the image–text model (the ``frame_embed`` stage): visual search.

Moment search ranks clips by their frames' vectors (a clip is as close to a query as its closest
frame), whether or not the clip has speech or text, and MAVIS's fine stage
(:func:`vidscope.agents.mavis.search.rerank_frames`) compares the query with frames in a joint
image–text space; this stage gives each row of ``frames`` its ``image_embedding`` with
``models.image_text`` (CLIP, SigLIP, …) so neither decodes and embeds frames per query. Without an
image–text model, or when the configured one cannot be had (offline and not pulled), the stage is
skipped with the reason, "visual search is off: …", and ingestion goes on.

Frames are decoded and embedded :data:`BATCH` at a time and each batch is written at once, so a
run that stops half-way keeps what it did. The next run (the ledger row is then not current)
keeps frames that already carry a vector when the current model reproduces the stored vector of
the first of them (same model, same weights), and embeds only the rest; otherwise it embeds them
all again. A re-run of ``frames`` rewrites the frame rows without vectors, which makes this stage
re-run too (it needs ``frames``).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np

from vidscope.core.errors import BackendUnavailable
from vidscope.core.images import decode_jpeg
from vidscope.core.settings import Settings
from vidscope.models import model_files, onnx_clip, registry
from vidscope.models.protocols.image_text import ImageTextEmbedder
from vidscope.storage import Store
from vidscope.tasks.stage import (
    Stage,
    StageContext,
    StageNotApplicable,
    StageOutcome,
    role_config,
)

#: Frames decoded, embedded and written per step (a CLIP ViT-B/32 batch on a GPU; ~4 s on 2 CPU cores).
BATCH = 64
#: Cosine at or above which a stored vector counts as this model's (re-embedding is deterministic
#: up to float noise; a different model or checkpoint lands far below).
SAME_MODEL_COSINE = 0.999

log = logging.getLogger(__name__)
#: Reasons for "visual search is off" already logged by this process (said once, not per video).
_said: set[str] = set()
_said_lock = threading.Lock()


def _stored_vectors(store: Store, video_id: str) -> dict[int, np.ndarray]:
    """frame index -> its stored image embedding, for the frames of ``video_id`` that have one."""
    table = store.rows(
        store.frames,
        video_id=video_id,
        where="image_embedding IS NOT NULL",
        columns=["frame_index", "image_embedding"],
    )
    return {
        int(i): np.asarray(v, dtype=np.float32)
        for i, v in zip(
            table.column("frame_index").to_pylist(), table.column("image_embedding").to_pylist(), strict=True
        )
    }


def _jpegs(store: Store, video_id: str, indexes: list[int]) -> list[bytes]:
    rows = store.rows(
        store.frames,
        video_id=video_id,
        where=f"frame_index IN ({', '.join(map(str, indexes))})",
        columns=["frame_index", "jpeg"],
    ).to_pylist()
    return [row["jpeg"] for row in rows]  # sorted by frame index, like ``indexes``


def reusable(store: Store, video_id: str, model: ImageTextEmbedder, stored: dict[int, np.ndarray]) -> bool:
    """Whether the vectors in ``stored`` were made by ``model``: it re-embeds the first of them."""
    if not stored:
        return False
    first = min(stored)
    (jpeg,) = _jpegs(store, video_id, [first])
    again = np.asarray(model.embed_images([decode_jpeg(jpeg)])[0], dtype=np.float32)
    old = stored[first]
    cosine = float(again @ old / ((np.linalg.norm(again) * np.linalg.norm(old)) or 1.0))
    return cosine >= SAME_MODEL_COSINE


def visual_model(settings: Settings) -> ImageTextEmbedder:
    """The image–text model, or :class:`StageNotApplicable` saying why visual search is off.

    A configured model that cannot be had (offline, not pulled) is said once per process in the
    log; every video's ledger row keeps the reason, and the rest of ingestion goes on.
    """
    try:
        model = registry.image_text(settings)
    except BackendUnavailable as exc:
        reason = f"visual search is off: {exc.brief}"
        with _said_lock:
            if reason not in _said:
                _said.add(reason)
                log.warning("visual search is off: %s", exc)  # the details, once, in the log
        raise StageNotApplicable(reason) from exc
    if model is None:
        raise StageNotApplicable("visual search is off: no image-text model configured (models.image_text)")
    return model


def _availability(settings: Settings) -> str:
    """Whether the fetched model is in the cache: part of the stage's key, so pulling the model
    makes videos ingested without it get their vectors on the next run."""
    spec = registry.effective_spec(settings, "image_text")
    if not spec:
        return "none"
    kind, target = registry.parse_spec(spec)
    if kind != onnx_clip.KIND:
        return "configured"
    directory = onnx_clip.cache_dir(target, registry.backend_options(settings, spec), settings.data_dir)
    if directory is None:
        return "local"
    return "cached" if (directory / model_files.MANIFEST).is_file() else "absent"


def _run(ctx: StageContext) -> StageOutcome:
    model = visual_model(ctx.settings)
    store, video_id = ctx.store, ctx.video.video_id
    if model.dim != store.image_dim:
        raise RuntimeError(
            f"the image-text model gives {model.dim}-d vectors but the store was opened for "
            f"{store.image_dim}-d"
        )
    indexes = store.rows(store.frames, video_id=video_id, columns=["frame_index"]).column("frame_index")
    all_frames = [int(i) for i in indexes.to_pylist()]
    if not all_frames:
        raise StageNotApplicable("the video has no sampled frames")
    stored = _stored_vectors(store, video_id)
    kept = len(stored) if reusable(store, video_id, model, stored) else 0
    todo = [i for i in all_frames if not kept or i not in stored]
    for start in range(0, len(todo), BATCH):
        chunk = todo[start : start + BATCH]
        vectors = model.embed_images([decode_jpeg(j) for j in _jpegs(store, video_id, chunk)])
        updates: list[dict[str, Any]] = [
            {"video_id": video_id, "frame_index": i, "image_embedding": v.tolist()}
            for i, v in zip(chunk, vectors, strict=True)
        ]
        store.update_columns(store.frames, updates)
        ctx.progress("frame_embed", kept + start + len(chunk), len(all_frames))
    return StageOutcome(
        rows=len(all_frames),
        details={"model": model.name, "dim": model.dim, "embedded": len(todo), "kept": kept},
    )


FRAME_EMBED = Stage(
    name="frame_embed",
    version=1,
    run=_run,
    config=lambda s: {**role_config(s, "image_text", "model"), "available": _availability(s)},
    needs=("frames",),
    description="image embeddings of every sampled frame (models.image_text): visual search",
)
