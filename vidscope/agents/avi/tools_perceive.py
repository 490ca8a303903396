"""AVI Perceive tools: look closely at one time range — object_detect, text_extract,
boundary_detect and frame_analysis run a model on frames of the range."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, Field

from vidscope.agents.answers import Support
from vidscope.agents.evidence import ask_about_frames, sample_evenly
from vidscope.agents.grounding import (
    MIN_CONTRAST,
    CurveInterval,
    interval_from_curve,
    refine_edge,
    smooth,
)
from vidscope.agents.looks import FrameLook, read_look, times_inside
from vidscope.agents.perception import (
    TimeRange,
    checked_range,
    frames_from_file,
    perception_backend,
    range_frames,
)
from vidscope.agents.tools import ToolContext, ToolError, ToolResult, tool
from vidscope.agents.vision import no_vision_note
from vidscope.core.errors import BackendUnavailable, ImagesNotSupported
from vidscope.core.images import encode_jpeg
from vidscope.core.lexicon import canonical_form
from vidscope.models import registry
from vidscope.storage.videos import VideoRecord
from vidscope.tasks.ocr import SAME_FRAME_DIFF, TextTracker, thumbnail

log = logging.getLogger(__name__)

#: Frames and sampling rate per perception tool.
DETECT_FRAMES, DETECT_FPS = 32, 2.0
OCR_FRAMES, OCR_FPS = 16, 2.0
BOUNDARY_FRAMES, BOUNDARY_FPS = 128, 4.0
#: Extra frames decoded between the last sample outside and the first inside an event's edge.
BOUNDARY_PROBES = 4
#: AVI's frame-analysis budget (64 frames), also the default: more than the vision model takes
#: per request are stitched into grids rather than dropped.
ANALYSIS_MAX_FRAMES = 64
#: Longest side of the frames frame_analysis sends (smaller images, fewer image tokens).
ANALYSIS_MAX_SIDE = 448
#: boundary_detect's interval must be narrower than this share of its range to say where the
#: event is (a flat curve returns the whole range).
NARROWED_SHARE = 0.9
#: Output limits that keep results within the model's token budget.
DETECT_SHOWN_FRAMES = 12
DETECT_BOXES_PER_LABEL = 4
OCR_SHOWN_ITEMS = 40
CURVE_POINTS = 24


# ============================================================================ perceive


class ObjectSummary(BaseModel):
    """How often one kind of object was seen in the checked frames."""

    label: str
    frames_seen: int
    max_count: int
    mean_count: float = Field(description="Mean count over all checked frames.")
    first_seen: float | None = None
    last_seen: float | None = None


class FrameObjects(BaseModel):
    """Objects in one frame: counts per label and (a few) boxes x1,y1,x2,y2 in pixels."""

    t: float
    counts: dict[str, int]
    boxes: dict[str, list[list[int]]] = Field(default_factory=dict)


class ObjectDetectResult(ToolResult):
    """Object counts over the frames of a time range, summarised per label."""

    video_id: str
    time_range: list[float]
    source: str = Field(description="Where detections came from: the detector or stored rows.")
    frames_checked: int
    objects: list[ObjectSummary]
    frames: list[FrameObjects] = Field(default_factory=list, description="Some frames with objects.")
    not_found: list[str] = Field(default_factory=list)

    def support(self) -> list[Support]:
        # Each object supports the span it was seen in (first to last frame with it); a look that
        # found nothing only echoes the range.
        start, end = self.time_range
        if not self.objects:
            said = (
                f"none of {', '.join(self.not_found)} detected" if self.not_found else "no objects detected"
            )
            return [Support(video_id=self.video_id, start=start, end=end, level="echoed", found=said)]
        half = (end - start) / max(1, self.frames_checked) / 2
        return [
            Support(
                video_id=self.video_id,
                start=max(start, (o.first_seen if o.first_seen is not None else start) - half),
                end=min(end, (o.last_seen if o.last_seen is not None else end) + half),
                level="perceived",
                found=f"{o.label} (up to {o.max_count} in a frame, in {o.frames_seen} frames)",
                localized=o.first_seen is not None,
            )
            for o in self.objects
        ]

    def summary(self) -> str:
        seen = ", ".join(f"{o.label}≤{o.max_count}" for o in self.objects[:5]) or "nothing"
        return f"{self.frames_checked} frames ({self.source}): {seen}"


def matching_object(label: str, wanted: list[str]) -> str | None:
    """The requested object name that ``label`` is an instance of, if any: both compared in their
    canonical (singular, lower-case) form, as the tag vocabulary does ("cars" matches "car")."""

    def key(name: str) -> str:
        return canonical_form(name, "object") or " ".join(name.lower().split())

    target = key(label)
    return next((o for o in wanted if key(o) == target), None)


def _detected_frames(
    ctx: ToolContext, record: VideoRecord, start: float, end: float, prompts_: list[str] | None
) -> tuple[str, list[float], list[list[tuple[str, tuple[float, ...]]]]]:
    """(source, frame times, per-frame (label, box)) from the detector or the stored detections."""
    detector = perception_backend(ctx, "object_detector", registry.object_detector)
    if detector is not None:
        frames = range_frames(
            ctx, record, start, end, budget=DETECT_FRAMES, fps=DETECT_FPS, prefer_file=False
        )
        open_vocabulary = bool(getattr(detector, "open_vocabulary", False))
        try:
            found = detector.detect(frames.images, prompts=prompts_ if open_vocabulary and prompts_ else None)
        except (ValueError, BackendUnavailable) as exc:
            raise ToolError(f"object detection failed: {exc}") from exc
        detected = [[(d.label, tuple(d.box)) for d in dets] for dets in found]
        return f"detector {detector.name} on {frames.source}", frames.times, detected
    store = ctx.store
    if store.count(store.detections, record.video_id) == 0:
        raise ToolError(
            "no object detector is configured (models.object_detector) and this video has no stored "
            "detections; object_detect cannot run"
        )
    window = f"t >= {start!r} AND t <= {end!r}"
    # Frames are matched by index: a frame without detections still counts as checked.
    frame_times = {
        int(r["frame_index"]): float(r["t"])
        for r in store.rows(
            store.frames, video_id=record.video_id, where=window, columns=["frame_index", "t"]
        ).to_pylist()
    }
    rows = store.rows(
        store.detections, video_id=record.video_id, where=window, columns=["frame_index", "t", "label", "box"]
    ).to_pylist()
    for r in rows:
        frame_times.setdefault(int(r["frame_index"]), float(r["t"]))
    order = sorted(frame_times, key=lambda i: frame_times[i])
    position = {index: k for k, index in enumerate(order)}
    per_frame: list[list[tuple[str, tuple[float, ...]]]] = [[] for _ in order]
    for r in rows:
        per_frame[position[int(r["frame_index"])]].append((r["label"], tuple(r["box"])))
    times = [frame_times[i] for i in order]
    return "stored detections (ingest detect stage)", times, per_frame


@tool(version=1, uses_models=("object_detector",))
def object_detect(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    time_range: TimeRange,
    objects: Annotated[
        list[str] | None,
        Field(
            description="Object kinds to count (e.g. ['person', 'car']); omit to count every kind.",
            max_length=20,
        ),
    ] = None,
) -> ObjectDetectResult:
    """Detect and count objects in the frames of a time range: for each kind, in how many frames
    it appears, its largest and mean count per frame, and when it is first and last seen, plus the
    boxes in a few frames. Use it for "how many", "is there a", "when does X appear"."""
    record = ctx.video(video_id)
    start, end = checked_range(record, time_range)
    wanted = [o for o in (objects or []) if o.strip()]
    source, times, per_frame = _detected_frames(ctx, record, start, end, wanted or None)
    counts: list[dict[str, int]] = []
    boxes: list[dict[str, list[list[int]]]] = []
    for found in per_frame:
        frame_counts: dict[str, int] = {}
        frame_boxes: dict[str, list[list[int]]] = {}
        for label, box in found:
            name = matching_object(label, wanted) if wanted else label
            if name is None:
                continue
            frame_counts[name] = frame_counts.get(name, 0) + 1
            label_boxes = frame_boxes.setdefault(name, [])
            if len(label_boxes) < DETECT_BOXES_PER_LABEL:
                label_boxes.append([int(round(v)) for v in box])
        counts.append(frame_counts)
        boxes.append(frame_boxes)
    labels = sorted({name for c in counts for name in c})
    summaries = []
    for name in labels:
        seen = [t for t, c in zip(times, counts, strict=True) if c.get(name)]
        values = [c.get(name, 0) for c in counts]
        summaries.append(
            ObjectSummary(
                label=name,
                frames_seen=len(seen),
                max_count=max(values),
                mean_count=round(sum(values) / max(1, len(values)), 2),
                first_seen=round(seen[0], 2),
                last_seen=round(seen[-1], 2),
            )
        )
    summaries.sort(key=lambda s: (-s.frames_seen, s.label))
    with_objects = [i for i, c in enumerate(counts) if c]
    shown_frames = [with_objects[i] for i in sample_evenly(len(with_objects), DETECT_SHOWN_FRAMES)]
    return ObjectDetectResult(
        video_id=video_id,
        time_range=[start, end],
        source=source,
        frames_checked=len(times),
        objects=summaries,
        frames=[FrameObjects(t=round(times[i], 2), counts=counts[i], boxes=boxes[i]) for i in shown_frames],
        not_found=[o for o in wanted if o not in labels],
    )


class TextItem(BaseModel):
    """Text on screen during [start, end]."""

    text: str
    start: float
    end: float
    score: float


class TextExtractResult(ToolResult):
    """The text read on screen in a time range, each line with when it is shown."""

    video_id: str
    time_range: list[float]
    source: str
    frames_read: int
    items: list[TextItem]
    more: int = Field(0, description="Items left out to keep the result short.")

    def support(self) -> list[Support]:
        # Each line supports only when it is shown, not the whole range read; no text only echoes.
        if not self.items:
            start, end = self.time_range
            return [Support(video_id=self.video_id, start=start, end=end, level="echoed", found="no text")]
        return [
            Support(
                video_id=self.video_id, start=i.start, end=i.end, level="perceived", found=f"text {i.text!r}"
            )
            for i in self.items
        ]

    def summary(self) -> str:
        shown = "; ".join(i.text for i in self.items[:3])
        return f"{len(self.items) + self.more} text items ({self.source}): {shown[:80]}"


@tool(version=1, uses_models=("text_reader",))
def text_extract(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    time_range: TimeRange,
) -> TextExtractResult:
    """Read the text shown on screen in a time range (signs, captions, slides, labels, numbers),
    each distinct line with the times it is visible."""
    record = ctx.video(video_id)
    start, end = checked_range(record, time_range)
    reader = perception_backend(ctx, "text_reader", registry.text_reader)
    if reader is None:
        where = f"t <= {end!r} AND t_end >= {start!r}"
        rows = ctx.store.rows(ctx.store.ocr, video_id=video_id, where=where, order_by=["t"]).to_pylist()
        if not rows and ctx.store.count(ctx.store.ocr, video_id) == 0:
            raise ToolError(
                "no text reader is configured (models.text_reader) and this video has no stored "
                "on-screen text; text_extract cannot run"
            )
        items = [
            TextItem(
                text=r["text"], start=round(r["t"], 2), end=round(r["t_end"], 2), score=round(r["score"], 3)
            )
            for r in rows
        ]
        source, frames_read = "stored OCR (ingest ocr stage)", 0
    else:
        frames = range_frames(ctx, record, start, end, budget=OCR_FRAMES, fps=OCR_FPS, prefer_file=False)
        interval = (end - start) / max(1, len(frames.times)) if len(frames.times) > 1 else 0.5
        tracker = TextTracker(interval)
        previous: np.ndarray | None = None
        last_lines: list[Any] = []
        for i, (t, image) in enumerate(zip(frames.times, frames.images, strict=True)):
            small = thumbnail(image)
            # A frame that looks like the last one shows the same text: skip the slow read.
            if previous is None or float(np.abs(small - previous).mean()) >= SAME_FRAME_DIFF:
                try:
                    last_lines = reader.read(image)
                except ValueError as exc:
                    raise ToolError(f"text reading failed: {exc}") from exc
                previous = small
            tracker.add(i, t, last_lines)
        items = [
            TextItem(text=it.text, start=round(it.t, 2), end=round(it.t_end, 2), score=round(it.score, 3))
            for it in tracker.items(end)
        ]
        source, frames_read = f"{reader.name} on {frames.source}", len(frames.times)
    return TextExtractResult(
        video_id=video_id,
        time_range=[start, end],
        source=source,
        frames_read=frames_read,
        items=items[:OCR_SHOWN_ITEMS],
        more=max(0, len(items) - OCR_SHOWN_ITEMS),
    )


class BoundaryResult(ToolResult):
    """When an event happens inside a time range, from frame-to-text similarity."""

    video_id: str
    event: str
    time_range: list[float]
    t_start: float
    t_end: float
    contrast: float = Field(
        description="Peak minus floor of the similarity curve; near 0 means no clear change."
    )
    source: str
    curve: list[list[float]] = Field(
        default_factory=list, description="[time, smoothed similarity] at a few points."
    )

    @property
    def clear(self) -> bool:
        """Whether the curve shows the event somewhere: a change of at least
        :data:`~vidscope.agents.grounding.MIN_CONTRAST` that narrows the range (a flat curve
        returns all of it)."""
        a, b = self.time_range
        narrowed = (self.t_end - self.t_start) < NARROWED_SHARE * max(b - a, 1e-9)
        return self.contrast >= MIN_CONTRAST and narrowed

    def support(self) -> list[Support]:
        # A clear peak perceives the event's span; a flat curve found no event, only its range.
        level = "perceived" if self.clear else "echoed"
        said = f"{self.event!r} most alike here (contrast {self.contrast:.3f})"
        if not self.clear:
            said = f"no clear moment of {self.event!r} (contrast {self.contrast:.3f})"
        return [Support(video_id=self.video_id, start=self.t_start, end=self.t_end, level=level, found=said)]

    def summary(self) -> str:
        return f"{self.event!r}: [{self.t_start:.2f}, {self.t_end:.2f}] (contrast {self.contrast:.3f})"


def _similarities(embedder: Any, images: list[np.ndarray], text_vector: np.ndarray) -> np.ndarray:
    vectors = np.asarray(embedder.embed_images(images), dtype=np.float64)
    return vectors @ text_vector


def _refined_edges(
    ctx: ToolContext,
    record: VideoRecord,
    embedder: Any,
    text_vector: np.ndarray,
    times: list[float],
    found: CurveInterval,
) -> tuple[float, float]:
    """The interval's edges sharpened by decoding a few frames between the last sample outside and
    the first sample inside each edge (one decode for both edges)."""
    edges: dict[str, tuple[float, float]] = {}
    if found.first > 0:
        edges["start"] = (times[found.first], times[found.first - 1])
    if found.last < len(times) - 1:
        edges["end"] = (times[found.last], times[found.last + 1])
    probes = {
        which: [inside + (outside - inside) * (i + 1) / (BOUNDARY_PROBES + 1) for i in range(BOUNDARY_PROBES)]
        for which, (inside, outside) in edges.items()
    }
    every = [t for ts in probes.values() for t in ts]
    images = frames_from_file(ctx, record, every)
    if images is None or not every:
        return found.start, found.end
    result = {"start": found.start, "end": found.end}
    scores = _similarities(embedder, images, text_vector).tolist()
    offset = 0
    for which, (inside, outside) in edges.items():
        count = len(probes[which])
        part = scores[offset : offset + count]
        result[which] = refine_edge(inside, outside, probes[which], part, found.threshold)
        offset += count
    return result["start"], result["end"]


@tool(version=1, uses_models=("image_text",))
def boundary_detect(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    time_range: TimeRange,
    event: Annotated[
        str, "The event or visual state to locate, described as it looks (e.g. 'a red car parks')."
    ],
) -> BoundaryResult:
    """Find when an event starts and ends inside a time range: every frame is compared with the
    event's description (image-text similarity), the curve is smoothed, and the clearest run of
    matching frames gives [t_start, t_end] in seconds. Narrow the range first (clip_retrieve)."""
    record = ctx.video(video_id)
    start, end = checked_range(record, time_range, instant=False)
    embedder = perception_backend(ctx, "image_text", registry.image_text)
    if embedder is None:
        raise ToolError("boundary_detect needs an image-text model (models.image_text); none is configured")
    frames = range_frames(ctx, record, start, end, budget=BOUNDARY_FRAMES, fps=BOUNDARY_FPS, prefer_file=True)
    if len(frames.times) < 2:
        raise ToolError(f"the range [{start:g}, {end:g}] holds too few frames to find boundaries")
    text_vector = np.asarray(embedder.embed_texts([event])[0], dtype=np.float64)
    scores = _similarities(embedder, frames.images, text_vector)
    found = interval_from_curve(frames.times, scores.tolist(), start, end)
    t_start, t_end = found.start, found.end
    if found.contrast > 0 and frames.source == "video file":
        t_start, t_end = _refined_edges(ctx, record, embedder, text_vector, frames.times, found)
    curve = smooth(scores.tolist(), 3)
    points = sample_evenly(len(curve), CURVE_POINTS)
    return BoundaryResult(
        video_id=video_id,
        event=event,
        time_range=[start, end],
        t_start=round(t_start, 2),
        t_end=round(t_end, 2),
        contrast=round(found.contrast, 4),
        source=frames.source,
        curve=[[round(frames.times[i], 2), round(float(curve[i]), 4)] for i in points],
    )


class FrameAnalysisResult(FrameLook):
    """A vision-language model's answer about the frames of some time ranges."""

    time_ranges: list[list[float]]

    def looked(self) -> list[list[float]]:
        return self.time_ranges

    def summary(self) -> str:
        if self.no_vision:
            return self.answer
        return f"{len(self.frame_times)} frames analysed: {self.answer[:80]}"


def _shares(ranges: list[tuple[float, float]], budget: int) -> list[int]:
    """Frames per range: ``budget`` split in proportion to the ranges' lengths, at least one each."""
    total = sum(b - a for a, b in ranges)
    if total <= 0:
        return [max(1, budget // len(ranges))] * len(ranges)
    return [max(1, int(round(budget * (b - a) / total))) for a, b in ranges]


# v3: a list of ranges (compare moments in one request), frames shared by their lengths
# v4: 64 frames by default (the paper's budget), grids beyond max_images; "no vision model" note
# v5: a structured reply (found, what, when) that says whether the look saw anything
@tool(
    version=5,
    uses_models=("vlm",),
    settings=("frame_max_side", "frame_short_side", "max_tokens", "temperature"),
)
def frame_analysis(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    time_ranges: Annotated[
        list[TimeRange],
        Field(description="Time ranges [[start, end], ...] in seconds (1-8).", min_length=1, max_length=8),
    ],
    question: Annotated[str, "What to find out from the frames."],
    frames: Annotated[
        int,
        Field(
            description="How many frames to look at in all, spread over the ranges by length (1-64).",
            ge=1,
            le=ANALYSIS_MAX_FRAMES,
        ),
    ] = ANALYSIS_MAX_FRAMES,
) -> FrameAnalysisResult:
    """The last resort, after object_detect, text_extract and boundary_detect: look at frames
    spread over one or more time ranges and answer a visual question about them (appearance,
    actions, order of movements, counts, colours, positions). Several ranges let you compare
    moments in one look."""
    vlm = ctx.vision_model()
    if vlm is None:
        return _no_vision(ctx, video_id, question)
    record = ctx.video(video_id)
    ranges = [checked_range(record, r) for r in time_ranges]
    # The paper's budget (64 frames) whatever the server's image limit: more frames than it takes
    # per request are stitched into grids by ask_about_frames.
    budget = min(frames, ANALYSIS_MAX_FRAMES)
    times: list[float] = []
    images: list[np.ndarray] = []
    for (start, end), share in zip(ranges, _shares(ranges, budget), strict=True):
        found = range_frames(
            ctx,
            record,
            start,
            end,
            budget=min(share, budget - len(times)),
            fps=max(record.fps, 1.0),
            prefer_file=True,
            max_side=ANALYSIS_MAX_SIDE,
        )
        times += found.times
        images += found.images
        if len(times) >= budget:
            break
    quality = ctx.settings.ingest.jpeg_quality
    order = sorted(range(len(times)), key=times.__getitem__)
    jpegs = [encode_jpeg(_downscaled(images[i], ANALYSIS_MAX_SIDE), quality) for i in order]
    shown = [round(times[i], 2) for i in order]
    try:
        reply = ask_about_frames(ctx, question, jpegs, shown)
    except ImagesNotSupported:  # learned on this call; the backend remembers it for the process
        return _no_vision(ctx, video_id, question)
    look = read_look(reply.text)
    return FrameAnalysisResult(
        video_id=video_id,
        question=question,
        answer=look.what,
        time_ranges=[[a, b] for a, b in ranges],
        frame_times=shown,
        usage=reply.usage,
        found=look.found,
        seen_at=times_inside(look.when, ranges),
    )


def _no_vision(ctx: ToolContext, video_id: str, question: str) -> FrameAnalysisResult:
    """frame_analysis's observation when no model can look at frames (nothing perceived)."""
    note = no_vision_note(ctx, "frame_analysis")
    return FrameAnalysisResult(
        video_id=video_id, question=question, answer=note, time_ranges=[], frame_times=[], no_vision=True
    )


def _downscaled(image: np.ndarray, max_side: int) -> np.ndarray:
    """``image`` with its longest side at most ``max_side`` (stored frames may be larger)."""
    height, width = image.shape[:2]
    if max(height, width) <= max_side:
        return image
    from PIL import Image

    scale = max_side / max(height, width)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return np.asarray(Image.fromarray(image).resize(size, Image.Resampling.LANCZOS))
