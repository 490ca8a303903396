"""Describe each clip (the ``caption`` stage) and attach its speech and on-screen text.

With a captioning model configured, a few frames of the clip plus its speech and on-screen text go
to the model. Without one, the clip gets a clearly labelled summary of its own signals, never an
invented description. A clip the model fails on gets that summary too, and the failure is counted.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
from prefect import task
from prefect.cache_policies import NO_CACHE

from vidscope.core.errors import ModelOutputError
from vidscope.core.images import decode_jpeg
from vidscope.core.settings import Settings
from vidscope.models import registry
from vidscope.models.protocols.captioner import Captioner
from vidscope.storage.clips import SIGNALS_SUMMARY
from vidscope.tasks.stage import Stage, StageContext, StageOutcome, StageResult, role_config, run_stage

log = logging.getLogger(__name__)

NO_CAPTIONER_PREFIX = "[no visual caption: no captioning model configured]"


def clip_texts(
    clips: list[dict[str, Any]], segments: list[dict[str, Any]], ocr_items: list[dict[str, Any]]
) -> list[tuple[str, str]]:
    """Per clip: (speech said in it, on-screen text shown in it).

    Words are assigned by their midpoint, so a sentence spanning two clips is split between them;
    segments without word timings go to every clip they overlap.
    """
    result = []
    for clip in clips:
        start, end = clip["start"], clip["end"]
        words: list[str] = []
        for seg in segments:
            if seg["end"] <= start or seg["start"] >= end:
                continue
            if seg.get("words"):
                words += [
                    w["word"].strip() for w in seg["words"] if start <= (w["start"] + w["end"]) / 2 < end
                ]
            else:
                words.append(seg["text"].strip())
        shown: list[str] = []
        for item in ocr_items:
            if item["t"] < end and item["t_end"] > start and item["text"] not in shown:
                shown.append(item["text"])
        result.append((" ".join(w for w in words if w), " | ".join(shown)))
    return result


def clip_objects(clips: list[dict[str, Any]], detections: list[dict[str, Any]]) -> list[str]:
    """Per clip: the detected object labels with how many distinct tracks (or boxes) each had."""
    result = []
    for clip in clips:
        seen: dict[str, set[Any]] = {}
        for det in detections:
            if clip["start"] <= det["t"] < clip["end"]:
                key = det["track_id"] if det["track_id"] is not None else (det["t"], tuple(det["box"]))
                seen.setdefault(det["label"], set()).add(key)
        ranked = sorted(seen.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        result.append(", ".join(f"{label} x{len(keys)}" for label, keys in ranked[:10]))
    return result


def signals_summary(speech: str, onscreen: str, objects: str = "") -> str:
    """The labelled stand-in for a caption, built only from what was heard, read and detected."""
    parts = []
    if speech:
        parts.append(f'speech: "{speech}"')
    if onscreen:
        parts.append(f'on-screen text: "{onscreen}"')
    if objects:
        parts.append(f"objects detected: {objects}")
    if not parts:
        return f"{NO_CAPTIONER_PREFIX} No speech, on-screen text or objects were found in this clip."
    return f"{NO_CAPTIONER_PREFIX} Signals in this clip: " + "; ".join(parts) + "."


def _clip_frames(ctx: StageContext, clip_index: int) -> list[np.ndarray]:
    """Up to ``[ingest] caption_frames`` stored frames of the clip, evenly spread, in order."""
    rows = ctx.store.rows(
        ctx.store.frames,
        video_id=ctx.video.video_id,
        where=f"clip_index = {clip_index}",
        columns=["frame_index", "jpeg"],
        order_by=["frame_index"],
    ).to_pylist()
    if not rows:
        return []
    wanted = min(ctx.settings.ingest.caption_frames, len(rows))
    picks = np.linspace(0, len(rows) - 1, num=wanted).round().astype(int)
    return [decode_jpeg(rows[i]["jpeg"]) for i in sorted(set(picks.tolist()))]


#: Clips per ``caption_batch`` call for backends that batch (local VLMs on a GPU).
CAPTION_BATCH = 8
CAPTION_ERRORS = (ModelOutputError, RuntimeError, TimeoutError, ValueError)


def _caption_context(speech: str, onscreen: str, objects: str) -> str:
    parts = (
        f"speech: {speech}" if speech else "",
        f"on-screen text: {onscreen}" if onscreen else "",
        f"objects detected: {objects}" if objects else "",
    )
    return "\n".join(p for p in parts if p)


def _model_captions(
    ctx: StageContext, captioner: Captioner, clips: list[dict[str, Any]], contexts: list[str]
) -> list[str | None]:
    """The model's caption per clip (``None`` where it failed), batched when the backend can."""
    video_id = ctx.video.video_id
    batch_fn = getattr(captioner, "caption_batch", None)
    results: list[str | None] = []
    step = CAPTION_BATCH if callable(batch_fn) else 1
    for first in range(0, len(clips), step):
        chunk = clips[first : first + step]
        frames = [_clip_frames(ctx, clip["clip_index"]) for clip in chunk]
        try:
            if callable(batch_fn):
                captions = list(batch_fn(frames, contexts[first : first + step]))
            else:
                captions = [captioner.caption(frames[0], contexts[first])]
            results += [(c or "").strip() or None for c in captions]
        except CAPTION_ERRORS as exc:
            log.warning(
                "captioning clips %d-%d of %s failed: %s",
                chunk[0]["clip_index"],
                chunk[-1]["clip_index"],
                video_id[:12],
                exc,
            )
            results += [None] * len(chunk)
        ctx.progress("caption", len(results), len(clips))
    return results


def _run(ctx: StageContext) -> StageOutcome:
    store, video_id = ctx.store, ctx.video.video_id
    clips = store.rows(store.clips, video_id=video_id, columns=["clip_index", "start", "end"]).to_pylist()
    segments = store.rows(
        store.transcripts, video_id=video_id, columns=["start", "end", "text", "words"]
    ).to_pylist()
    ocr_items = store.rows(store.ocr, video_id=video_id, columns=["t", "t_end", "text"]).to_pylist()
    detections = store.rows(
        store.detections, video_id=video_id, columns=["t", "label", "box", "track_id"]
    ).to_pylist()
    objects_per_clip = clip_objects(clips, detections)
    texts = clip_texts(clips, segments, ocr_items)
    captioner: Captioner | None = registry.captioner(ctx.settings)
    if captioner is not None:
        contexts = [
            _caption_context(sp, on, ob) for (sp, on), ob in zip(texts, objects_per_clip, strict=True)
        ]
        model_captions = _model_captions(ctx, captioner, clips, contexts)
    else:
        model_captions = [None] * len(clips)
    updates = []
    for clip, (speech, onscreen), objects, caption in zip(
        clips, texts, objects_per_clip, model_captions, strict=True
    ):
        source = captioner.name if caption is not None and captioner is not None else SIGNALS_SUMMARY
        if caption is None:
            caption = signals_summary(speech, onscreen, objects)
        updates.append(
            {
                "video_id": video_id,
                "clip_index": clip["clip_index"],
                "caption": caption,
                "caption_source": source,
                "transcript_text": speech or None,
                "ocr_text": onscreen or None,
            }
        )
    store.update_columns(store.clips, updates)
    failures = sum(1 for c in model_captions if c is None) if captioner is not None else 0
    return StageOutcome(
        rows=len(updates),
        details={"captioner": captioner.name if captioner else None, "failed_clips": failures},
    )


CAPTION = Stage(
    name="caption",
    version=2,  # v2: up to [ingest] caption_frames (10) frames per clip, was 4
    run=_run,
    config=lambda s: {
        **role_config(s, "captioner", "captioner"),
        "caption_frames": s.ingest.caption_frames,
    },
    needs=("segment",),
    reads=("frames", "speech", "ocr", "detect"),
    description="clip captions from the captioning model, or a labelled summary of the clip's signals",
)


@task(name="caption", cache_policy=NO_CACHE, task_run_name="caption · {path.name}")
def caption_task(video_id: str, path: Path, settings: Settings) -> StageResult:
    """Prefect task: the ``caption`` stage for one registered video (a no-op when it is current)."""
    return run_stage(CAPTION, video_id, path, settings)
