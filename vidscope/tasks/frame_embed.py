"""Embed every sampled frame with the image–text model (the ``frame_embed`` stage): visual search.

Moment search ranks clips by their frames' vectors (a clip is as close to a query as its closest
frame), whether or not the clip has speech or text, and MAVIS's fine stage
(:func:`vidscope.agents.mavis.search.rerank_frames`) compares the query with frames in a joint
image–text space; this stage gives each row of ``frames`` its ``image_embedding`` with
``models.image_text`` (CLIP, SigLIP, …) so neither decodes and embeds frames per query. Without an
image–text model, or when the configured one cannot be had (offline and not pulled), the stage is
skipped with the reason, "visual search is off: …", and ingestion goes on.

Only frames that differ are embedded: a near-duplicate of the last embedded frame shares its
vector. "Differ" is judged on what the model sees, by a cheap pixel gate: the centre square of the
frame (CLIP's crop), decoded from the JPEG at 1/8 scale, as :data:`VIEW` x :data:`VIEW` colour
means; a frame whose mean absolute difference from the last embedded frame's view is below
:data:`SAME_VIEW_LEVELS` (of 255), and whose every small cell (:data:`CELL`) changed by less than
:data:`SAME_CELL_LEVELS` on average, shares that frame's vector (the gate compares with the last
*embedded* frame, not the previous one, so a slow drift is embedded once it adds up). On the
12-minute slide lecture of ``benchmarks/ocr_cost.py`` (1,440 frames, 24 slides, a moving speaker
inset at the edge of the view) 359 frames are embedded instead of 1,440, at about 65 CPU-ms
each for CLIP ViT-B/32 int8 on this machine; on moving footage nearly every frame is. Frames that
pass the gate get exactly the vector they got before.

Frames are decoded and embedded :data:`BATCH` at a time and each batch is written at once, so a
run that stops half-way keeps what it did. The next run (the ledger row is then not current)
keeps frames that already carry a vector when the current model reproduces the stored vector of
the first of them (same model, same weights), and embeds only the rest; otherwise it embeds them
all again. A re-run of ``frames`` rewrites the frame rows without vectors, which makes this stage
re-run too (it needs ``frames``).
"""

from __future__ import annotations

import io
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
#: Side of the colour thumbnail of the model's view that the near-duplicate gate compares (each cell
#: is a 7x7 block of CLIP's 224-px input).
VIEW = 32
#: Mean absolute difference (levels of 255, over the three colours) below which a frame's view
#: counts as the same as the last embedded frame's: JPEG noise on a still picture is ~0.1; a new
#: 20-px line of slide text across the view is ~2.2 and is embedded; a 14-px line (0.7) passes this
#: test and is caught only where its cells change by :data:`SAME_CELL_LEVELS` (OCR reads text).
SAME_VIEW_LEVELS = 2.0
#: Side of the square cells (in thumbnail pixels: 2 = 14 model pixels, under half a CLIP patch)
#: whose mean may change by at most :data:`SAME_CELL_LEVELS`: a local change (a car moving in a
#: still traffic camera's view, a speaker's inset) moves the mean too little. A 40x24-px object in a
#: 640x360 frame covers at least half a cell wherever it lies, so a strong colour change there counts.
CELL = 2
SAME_CELL_LEVELS = 32.0
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


def view_thumbnail(jpeg: bytes) -> np.ndarray:
    """The near-duplicate gate's picture of a frame: the centre square (the part CLIP's crop keeps),
    :data:`VIEW` x :data:`VIEW` box means of its colours, from the JPEG decoded at reduced scale (~1 ms)."""
    from PIL import Image

    with Image.open(io.BytesIO(jpeg)) as image:
        image.draft("RGB", (max(VIEW, image.width // 8), max(VIEW, image.height // 8)))
        colour = image.convert("RGB")
        width, height = colour.size
        side = min(width, height)
        left, top = (width - side) // 2, (height - side) // 2
        square = colour.crop((left, top, left + side, top + side))
        return np.asarray(square.resize((VIEW, VIEW), Image.Resampling.BOX), dtype=np.float32)


def same_view(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two :func:`view_thumbnail` pictures are near-duplicates: little change on average
    (:data:`SAME_VIEW_LEVELS`) and in every cell (:data:`SAME_CELL_LEVELS`)."""
    difference = a - b
    if float(np.abs(difference).mean()) >= SAME_VIEW_LEVELS:
        return False
    cells = difference.reshape(VIEW // CELL, CELL, VIEW // CELL, CELL, -1).mean(axis=(1, 3))
    return float(np.abs(cells).max()) < SAME_CELL_LEVELS


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
    anchor: tuple[np.ndarray, np.ndarray] | None = None  # the last embedded frame: view, vector
    embedded = 0
    for start in range(0, len(todo), BATCH):
        chunk = todo[start : start + BATCH]
        jpegs = _jpegs(store, video_id, chunk)
        views = [view_thumbnail(j) for j in jpegs]
        # Which frames differ from the anchor; the anchor moves to each one that does.
        owners: list[int] = []  # per frame: the position in ``chunk`` whose vector it gets (-1: anchor's)
        current, current_view = -1, None if anchor is None else anchor[0]
        for position, view in enumerate(views):
            if current_view is None or not same_view(view, current_view):
                current, current_view = position, view
            owners.append(current)
        fresh = sorted(set(owners) - {-1})
        vectors = dict(zip(fresh, model.embed_images([decode_jpeg(jpegs[p]) for p in fresh]), strict=True))
        embedded += len(fresh)
        updates: list[dict[str, Any]] = []
        for i, owner in zip(chunk, owners, strict=True):
            vector = anchor[1] if owner == -1 and anchor is not None else vectors[owner]
            updates.append({"video_id": video_id, "frame_index": i, "image_embedding": vector.tolist()})
        if fresh:
            anchor = (views[fresh[-1]], vectors[fresh[-1]])
        store.update_columns(store.frames, updates)
        ctx.progress("frame_embed", kept + start + len(chunk), len(all_frames))
    return StageOutcome(
        rows=len(all_frames),
        details={
            "model": model.name,
            "dim": model.dim,
            "embedded": embedded,
            "shared": len(todo) - embedded,
            "kept": kept,
        },
    )


FRAME_EMBED = Stage(
    name="frame_embed",
    version=2,  # 2: near-duplicate frames share the vector of the last frame that differed
    run=_run,
    config=lambda s: {**role_config(s, "image_text", "model"), "available": _availability(s)},
    needs=("frames",),
    description="image embeddings of every sampled frame (models.image_text): visual search",
)
