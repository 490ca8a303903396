"""Describe each clip (the ``caption`` stage) and attach its speech and on-screen text.

With a captioning model configured, the clip's frames plus its speech, on-screen text and detected
objects (quoted as data) go to the model, which writes a detailed narration. Frames that barely
differ from the last one kept, within the clip or at the end of the clip before, are not sent
(``[ingest] caption_dedup``), so a still scene costs one image instead of ten.

With ``[ingest] caption_carry_subjects`` (the default) and a captioner that can, the clips are
captioned in order and each call also sees the subject registry after the clip before and reports
this clip's subjects, as Deep Video Discovery's ``S_i, c_i = VLM(f_i, S_{i-1})``; the stage stores
that registry in the ``subjects`` table. A reply whose registry part is unusable keeps its caption
and leaves the registry as it was. (DVD's public code captions clips in parallel and merges the
per-clip registries with one more LLM call afterwards; we follow the paper's sequential form, which
needs no merge call and lets clip i reuse the ids of clip i-1.) Carrying forces sequential order,
which costs a local batched VLM its batching; turn it off to batch, and the ``subjects`` stage then
derives the registry from the captions with the chat model.

Without a model, the clip gets a clearly labelled summary of its own signals, never an invented
description. A clip the model fails on gets that summary too, and the failure is counted.
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image as PILImage

from vidscope.core.errors import BackendUnavailable, ModelOutputError
from vidscope.core.hashing import stable_hash
from vidscope.core.images import decode_jpeg
from vidscope.models import registry
from vidscope.models.captioning import DEFAULT_CAPTION_PROMPT, REGISTRY_INSTRUCTIONS
from vidscope.models.protocols.captioner import Captioner, RegistryCaptioner
from vidscope.storage.clips import SIGNALS_SUMMARY
from vidscope.storage.subjects import SUBJECTS
from vidscope.tasks.stage import Stage, StageContext, StageOutcome, role_config
from vidscope.tasks.subjects import (
    MAX_REPORTED_ERRORS,
    REGISTRY_DETAIL,
    Subject,
    apply_updates,
    merge_registry,
    prompt_registry,
    subject_row,
)

log = logging.getLogger(__name__)

NO_CAPTIONER_PREFIX = "[no visual caption: no captioning model configured]"
#: Side of the grayscale thumbnail compared to find near-duplicate frames.
SIGNATURE_SIDE = 16
#: Share of thumbnail cells, the most changed, whose change decides whether a frame is new.
CHANGED_SHARE = 0.1


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


def frame_signature(jpeg: bytes) -> np.ndarray:
    """A 16x16 grayscale thumbnail of a stored frame (float32, 0-255), for near-duplicate checks.

    The JPEG is decoded at reduced scale (PIL's draft mode), so this costs a fraction of a full
    decode.
    """
    with PILImage.open(io.BytesIO(jpeg)) as image:
        image.draft("L", (SIGNATURE_SIDE * 4, SIGNATURE_SIDE * 4))
        small = image.convert("L").resize((SIGNATURE_SIDE, SIGNATURE_SIDE), PILImage.Resampling.BOX)
        return np.asarray(small, dtype=np.float32)


def frame_change(a: np.ndarray, b: np.ndarray) -> float:
    """How much two signatures differ: the mean absolute difference (gray levels, 0-255) over the
    :data:`CHANGED_SHARE` of thumbnail cells that changed most.

    A mean over the whole thumbnail would call a signing hand or a passing car (a few cells)
    unchanged; the most-changed tenth sees them while sensor noise and compression flicker stay
    low (measured on the sample videos: benchmarks/RESULTS.md, "Caption images per hour").
    """
    diff = np.sort(np.abs(a - b).ravel())
    return float(diff[-max(1, round(diff.size * CHANGED_SHARE)) :].mean())


def pick_caption_frames(
    signatures: list[np.ndarray], previous: np.ndarray | None, threshold: float, cap: int
) -> list[int]:
    """Indices of the clip's frames to send to the captioner.

    A frame is kept when it differs from the last kept frame, the previous clip's last sent frame
    before any is kept here, by at least ``threshold`` (so slow drift still adds a frame once it
    adds up); a clip with nothing new sends its middle frame. At most ``cap`` are kept, evenly
    spread. ``threshold`` 0 keeps every frame.
    """
    if not signatures:
        return []
    kept: list[int] = []
    last = previous
    for i, signature in enumerate(signatures):
        if last is None or threshold <= 0 or frame_change(signature, last) >= threshold:
            kept.append(i)
            last = signature
    if not kept:
        kept = [len(signatures) // 2]
    if len(kept) > cap:
        picks = np.linspace(0, len(kept) - 1, num=cap).round().astype(int)
        kept = [kept[i] for i in sorted(set(picks.tolist()))]
    return kept


class FramePicker:
    """Loads each clip's frames for captioning, dropping near-duplicates within and across clips.

    Clips must be asked for in time order: the last frame sent for one clip is what the next
    clip's first frame is compared with.
    """

    def __init__(self, ctx: StageContext) -> None:
        self.ctx = ctx
        self.threshold = ctx.settings.ingest.caption_dedup
        self.cap = ctx.settings.ingest.caption_frames
        self.previous: np.ndarray | None = None
        self.stored = 0
        self.sent = 0

    def frames(self, clip_index: int) -> list[np.ndarray]:
        """The frames of ``clip_index`` to send, decoded, in order."""
        ctx = self.ctx
        rows = ctx.store.rows(
            ctx.store.frames,
            video_id=ctx.video.video_id,
            where=f"clip_index = {clip_index}",
            columns=["frame_index", "jpeg"],
            order_by=["frame_index"],
        ).to_pylist()
        if not rows:
            return []
        if self.threshold > 0:
            signatures = [frame_signature(r["jpeg"]) for r in rows]
            picks = pick_caption_frames(signatures, self.previous, self.threshold, self.cap)
            self.previous = signatures[picks[-1]]
        else:  # every frame, evenly spread up to the cap: no need to look at them
            wanted = min(self.cap, len(rows))
            picks = sorted(set(np.linspace(0, len(rows) - 1, num=wanted).round().astype(int).tolist()))
        self.stored += len(rows)
        self.sent += len(picks)
        return [decode_jpeg(rows[i]["jpeg"]) for i in picks]


#: Registry entries each caption request shows. Every clip's request carries the registry (720
#: an hour, where the subjects stage sends it 60 times an hour), so it is kept to the 40 most
#: mentioned or most recently seen subjects; an entry left out is matched again by its name.
CAPTION_REGISTRY_SUBJECTS = 40
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
    ctx: StageContext,
    captioner: Captioner,
    clips: list[dict[str, Any]],
    contexts: list[str],
    picker: FramePicker,
) -> list[str | None]:
    """The model's caption per clip (``None`` where it failed), batched when the backend can."""
    video_id = ctx.video.video_id
    batch_fn = getattr(captioner, "caption_batch", None)
    results: list[str | None] = []
    step = CAPTION_BATCH if callable(batch_fn) else 1
    for first in range(0, len(clips), step):
        chunk = clips[first : first + step]
        frames = [picker.frames(clip["clip_index"]) for clip in chunk]
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


@dataclass
class CarriedRegistry:
    """The subject registry carried through captioning, and how its updates went."""

    subjects: list[Subject] = field(default_factory=list)
    #: Clips whose reply updated the registry (an empty subject list counts: nothing new there).
    updates: int = 0
    #: Clips whose reply had a caption but no usable registry update (the registry was kept).
    unusable: int = 0
    problems: list[str] = field(default_factory=list)


def _carried_captions(
    ctx: StageContext,
    captioner: RegistryCaptioner,
    clips: list[dict[str, Any]],
    contexts: list[str],
    picker: FramePicker,
) -> tuple[list[str | None], CarriedRegistry]:
    """Caption the clips in order, each call seeing the registry the previous ones built."""
    video_id = ctx.video.video_id
    duration = float(ctx.video.duration) or max((float(c["end"]) for c in clips), default=0.0)
    carried = CarriedRegistry()
    results: list[str | None] = []
    for clip, context in zip(clips, contexts, strict=True):
        span = (float(clip["start"]), float(clip["end"]))
        frames = picker.frames(clip["clip_index"])
        try:
            reply = captioner.caption_with_registry(
                frames, context, prompt_registry(carried.subjects, CAPTION_REGISTRY_SUBJECTS), span
            )
        except BackendUnavailable:
            raise  # the server is gone: the stage is unavailable, not partly done
        except CAPTION_ERRORS as exc:
            log.warning("captioning clip %d of %s failed: %s", clip["clip_index"], video_id[:12], exc)
            results.append(None)
            ctx.progress("caption", len(results), len(clips))
            continue
        results.append(reply.caption)
        if reply.subjects is None:
            carried.unusable += 1
            problem = f"clip {clip['clip_index']}: {reply.problem}"
            carried.problems.append(problem[:300])
            log.warning(
                "caption of clip %d of %s: registry update unusable (%s); the registry is kept",
                clip["clip_index"],
                video_id[:12],
                reply.problem,
            )
        else:
            carried.updates += 1
            apply_updates(carried.subjects, reply.subjects, span, duration)
        ctx.progress("caption", len(results), len(clips))
    return results, carried


def _run(ctx: StageContext) -> StageOutcome:
    store, video_id = ctx.store, ctx.video.video_id
    clips = store.rows(
        store.clips, video_id=video_id, columns=["clip_index", "start", "end"], order_by=["clip_index"]
    ).to_pylist()
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
    picker = FramePicker(ctx)
    carried: CarriedRegistry | None = None
    if captioner is not None:
        contexts = [
            _caption_context(sp, on, ob) for (sp, on), ob in zip(texts, objects_per_clip, strict=True)
        ]
        if ctx.settings.ingest.caption_carry_subjects and isinstance(captioner, RegistryCaptioner):
            model_captions, carried = _carried_captions(ctx, captioner, clips, contexts, picker)
        else:
            model_captions = _model_captions(ctx, captioner, clips, contexts, picker)
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
    details: dict[str, Any] = {
        "captioner": captioner.name if captioner else None,
        "failed_clips": failures,
        "frames_stored": picker.stored,
        "frames_sent": picker.sent,
    }
    if carried is not None and carried.updates:
        # The registry the captioner kept is the video's registry: the subjects stage keeps it.
        final = merge_registry(carried.subjects)
        store.replace_video_rows(
            SUBJECTS, video_id, [subject_row(video_id, i, s) for i, s in enumerate(final)]
        )
        details[REGISTRY_DETAIL] = {
            "subjects": len(final),
            "updates": carried.updates,
            "unusable": carried.unusable,
            "problems": carried.problems[:MAX_REPORTED_ERRORS],
            "merged": len(carried.subjects) - len(final),
        }
    elif carried is not None:
        details["registry_unusable"] = carried.problems[:MAX_REPORTED_ERRORS]
    return StageOutcome(rows=len(updates), details=details)


CAPTION = Stage(
    name="caption",
    # v2: up to [ingest] caption_frames (10) frames per clip, was 4.
    # v3: detailed narrations; near-duplicate frames are not sent; with caption_carry_subjects the
    # clips are captioned in order carrying the subject registry, which this stage stores.
    version=3,
    run=_run,
    config=lambda s: {
        **role_config(s, "captioner", "captioner"),
        "caption_frames": s.ingest.caption_frames,
        "caption_dedup": s.ingest.caption_dedup,
        "carry_subjects": s.ingest.caption_carry_subjects,
        "prompts": stable_hash(DEFAULT_CAPTION_PROMPT, REGISTRY_INSTRUCTIONS),
    },
    needs=("segment",),
    reads=("frames", "speech", "ocr", "detect"),
    description="clip narrations from the captioning model (carrying the subject registry), or a "
    "labelled summary of the clip's signals",
)
