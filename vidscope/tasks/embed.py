"""Embed each clip's text (caption, speech, on-screen text) for search (the ``embed`` stage)."""

from __future__ import annotations

from typing import Any

from vidscope.models import registry
from vidscope.models.protocols.text_embedder import TextEmbedder
from vidscope.storage.clips import SIGNALS_SUMMARY
from vidscope.tasks.stage import (
    Stage,
    StageContext,
    StageNotApplicable,
    StageOutcome,
    role_config,
)

BATCH = 256


def clip_search_text(clip: dict[str, Any]) -> str:
    """The text a clip is found by. A signals summary is skipped: it only repeats speech and text."""
    parts = []
    if clip.get("caption") and clip.get("caption_source") != SIGNALS_SUMMARY:
        parts.append(clip["caption"])
    if clip.get("transcript_text"):
        parts.append(clip["transcript_text"])
    if clip.get("ocr_text"):
        parts.append(clip["ocr_text"])
    return "\n".join(parts)


def _run(ctx: StageContext) -> StageOutcome:
    embedder: TextEmbedder | None = registry.text_embedder(ctx.settings)
    if embedder is None:
        raise StageNotApplicable("no text embedder configured (models.text_embedder)")
    if embedder.dim != ctx.store.text_dim:
        raise RuntimeError(
            f"the text embedder gives {embedder.dim}-d vectors but the store was "
            f"opened for {ctx.store.text_dim}-d"
        )
    store, video_id = ctx.store, ctx.video.video_id
    clips = store.rows(
        store.clips,
        video_id=video_id,
        columns=["clip_index", "caption", "caption_source", "transcript_text", "ocr_text"],
    ).to_pylist()
    texts = [clip_search_text(c) for c in clips]
    with_text = [i for i, t in enumerate(texts) if t]
    updates = [
        {
            "video_id": video_id,
            "clip_index": c["clip_index"],
            "text_embedding": None,
            "embed_model": None,
        }
        for c in clips
    ]
    for start in range(0, len(with_text), BATCH):
        chunk = with_text[start : start + BATCH]
        vectors = embedder.embed([texts[i] for i in chunk])
        for i, vector in zip(chunk, vectors, strict=True):
            updates[i]["text_embedding"] = vector.tolist()
            updates[i]["embed_model"] = embedder.name
        ctx.progress("embed", start + len(chunk), len(with_text))
    store.update_columns(store.clips, updates)
    return StageOutcome(
        rows=len(with_text),
        details={"embedder": embedder.name, "clips_without_text": len(clips) - len(with_text)},
    )


EMBED = Stage(
    name="embed",
    version=1,
    run=_run,
    config=lambda s: role_config(s, "text_embedder", "embedder"),
    needs=("caption",),
    description="text embeddings of clip captions, speech and on-screen text (MiniLM by default)",
)
