"""Deep-Video-Discovery tools over the clip database.

global_browse, clip_search, frame_inspect and finish.

Every tool is read-only and takes the id of the video it looks at, so one question can span several
videos. Results are typed models that record the time ranges they showed the model as specific
evidence, which is what citations are verified against (global_browse, an overview, records none).

Budgets follow the paper and its public code unless said otherwise: frame_inspect looks at up to
50 frames (the code's tool-VLM frame limit) at 720p, i.e. 720 px on the short side (``[agent]
max_frames``, ``frame_short_side``), stitched into grids when the vision model takes fewer images
per request; global_browse summarises the captions most relevant to the query (the code
ranks captions by embedding similarity and keeps 300) together with the subject registry.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, BeforeValidator, Field, WithJsonSchema

from vidscope.agents import prompts
from vidscope.agents.answers import read_cited_ranges
from vidscope.agents.chapter_list import ChapterEntry, load_chapters
from vidscope.agents.evidence import (
    ClipSearchResult,
    ask_about_frames,
    inspection_times,
    keyword_scores,
    load_clips,
    sample_evenly,
    search_clips,
)
from vidscope.agents.looks import FrameLook, read_look, times_inside
from vidscope.agents.tools import (
    ToolContext,
    ToolError,
    ToolRegistry,
    ToolResult,
    tool,
)
from vidscope.agents.vision import no_vision_note
from vidscope.core.errors import ImagesNotSupported
from vidscope.core.images import encode_jpeg, longest_side_for
from vidscope.models.json_tools import quote_data
from vidscope.models.protocols.chat import ChatMessage, Usage
from vidscope.storage.subjects import SUBJECTS

log = logging.getLogger(__name__)

#: Subjects global_browse shows at most (the most mentioned), and spans/actions per subject.
BROWSE_SUBJECTS = 30
BROWSE_SUBJECT_SPANS = 12
BROWSE_SUBJECT_ACTIONS = 12

# ============================================================================ results


class CaptionSample(BaseModel):
    """A caption sampled by :func:`global_browse`."""

    start: float
    end: float
    caption: str


class SubjectEntry(BaseModel):
    """A subject of the video from the registry built during ingestion."""

    name: str
    appearance: str | None = None
    identity: str | None = None
    actions: list[str] = Field(default_factory=list)
    spans: list[list[float]] = Field(
        default_factory=list, description="[start, end] seconds in which the subject is seen."
    )
    mentions: int = 0


class BrowseResult(ToolResult):
    """A query-focused overview of a whole video: its subjects and its most relevant captions."""

    video_id: str
    query: str
    duration: float
    total_clips: int
    summary_text: str | None = Field(None, description="The model's summary; absent without a chat model.")
    captions: list[CaptionSample] = Field(default_factory=list)
    subjects: list[SubjectEntry] = Field(
        default_factory=list, description="Recurring subjects, most mentioned first."
    )
    subjects_missing: str | None = Field(
        None, description="Why the video has no subject registry: its (optional) stage failed."
    )
    chapters: list[ChapterEntry] = Field(
        default_factory=list, description="The video's parts in order (an overview, not evidence)."
    )
    usage: Usage | None = None

    def summary(self) -> str:
        what = "summary" if self.summary_text else "captions only"
        text = f"{what} over {len(self.captions)} of {self.total_clips} clips"
        if self.subjects_missing:
            return f"{text}, subjects missing ({self.subjects_missing})"
        return f"{text}, {len(self.subjects)} subjects" if self.subjects else text

    def model_usage(self) -> Usage | None:
        return self.usage

    def for_model(self) -> dict[str, Any]:
        # With a summary the model does not need every caption again; times are kept for citing.
        data = self.model_dump(mode="json", exclude={"usage"})
        if self.summary_text:
            data["captions"] = [{"start": c.start, "end": c.end} for c in self.captions]
        return data


class FrameInspectResult(FrameLook):
    """The vision-language model's answer about frames taken from some time ranges."""

    ranges: list[list[float]]

    def looked(self) -> list[list[float]]:
        return self.ranges

    def summary(self) -> str:
        if self.no_vision:
            return self.answer
        return f"{len(self.frame_times)} frames inspected: {self.answer[:80]}"


class FinishResult(ToolResult):
    """Never produced: finish is handled by the runtime (declared only for its schema)."""


class CitedMoment(BaseModel):
    """A cited moment of a named video (questions over several videos cite these)."""

    video_id: str
    start: float
    end: float


# ============================================================================ subjects


def load_subjects(ctx: ToolContext, video_id: str, limit: int = BROWSE_SUBJECTS) -> list[SubjectEntry]:
    """The video's subject registry, most mentioned (then earliest seen) first; empty if none."""
    rows = ctx.store.rows(SUBJECTS, video_id=video_id).to_pylist()
    rows.sort(
        key=lambda r: (
            -(r["mentions"] or 0),
            r["first_seen"] if r["first_seen"] is not None else math.inf,
        )
    )
    return [
        SubjectEntry(
            name=r["name"],
            appearance=r["appearance"],
            identity=r["identity"],
            actions=list(r["actions"] or [])[:BROWSE_SUBJECT_ACTIONS],
            spans=[[s["start"], s["end"]] for s in (r["spans"] or [])][:BROWSE_SUBJECT_SPANS],
            mentions=r["mentions"] or 0,
        )
        for r in rows[:limit]
    ]


def _subjects_missing(ctx: ToolContext, video_id: str) -> str | None:
    """Why ``video_id`` has no subject registry when its optional stage failed (the ledger's
    reason), so the model reads "missing", not "no recurring subjects"; else None."""
    from vidscope.tasks.stage import stage_failure  # here: the ingestion stage module, for one row

    reason = stage_failure(ctx.store, video_id, "subjects")
    return f"the subjects stage failed: {reason}" if reason else None


# ============================================================================ tools


def relevant_captions(ctx: ToolContext, video_id: str, query: str, count: int) -> list[dict[str, Any]]:
    """The ``count`` captioned clips most relevant to ``query``, in time order.

    Ranked by clip search (embedding similarity fused with keywords, as DVD ranks captions by
    embedding similarity); without a text embedder, by keywords alone, the rest of the budget
    spread evenly over the clips no keyword matched so the summary still sees the whole video.
    """
    clips = [c for c in load_clips(ctx, video_id) if c["caption"]]
    if len(clips) <= count:
        return clips
    by_index = {int(c["clip_index"]): c for c in clips}
    try:
        hits = search_clips(ctx, video_id, query, min(count, 100)).by_relevance()
        chosen = [by_index[h.clip_index] for h in hits if h.clip_index in by_index]
    except ToolError:  # no text embedder: keywords only
        scores = keyword_scores(query, [c["caption"] for c in clips])
        chosen = [clips[i] for i in sorted(range(len(clips)), key=lambda i: -scores[i]) if scores[i] > 0]
    chosen = chosen[:count]
    if len(chosen) < count:
        rest = [c for c in clips if c not in chosen]
        chosen += [rest[i] for i in sample_evenly(len(rest), count - len(chosen))]
    return sorted(chosen, key=lambda c: float(c["start"]))


@tool(
    version=4,
    uses_chat=True,
    uses_embedder=True,
    settings=("browse_captions", "max_tokens", "temperature"),
)
def global_browse(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video to browse."],
    query: Annotated[str, "What the overview should focus on (the question, or a part of it)."],
) -> BrowseResult:
    """Overview of a whole video: its chapters (start, end, title), its recurring subjects (who or
    what, appearance, identity, actions, when seen) and a summary, focused on the query, of the
    captions most relevant to it (with their times). Use it first for questions about the video as
    a whole, its order of events or its main subjects. It is an overview: cite moments found by
    clip_search or frame_inspect."""
    record = ctx.video(video_id)
    picked = relevant_captions(ctx, video_id, query, ctx.config.browse_captions)
    if not picked:
        raise ToolError(f"video {video_id} has no captions yet; ingest it first (vidscope ingest)")
    captions = [CaptionSample(start=c["start"], end=c["end"], caption=c["caption"]) for c in picked]
    result = BrowseResult(
        video_id=video_id,
        query=query,
        duration=record.duration,
        total_clips=ctx.clip_count(video_id),
        captions=captions,
        subjects=load_subjects(ctx, video_id),
        chapters=load_chapters(ctx.store, video_id),
    )
    if not result.subjects:
        result.subjects_missing = _subjects_missing(ctx, video_id)
    if ctx.chat is None:
        return result
    data = [{"start": c.start, "end": c.end, "caption": c.caption} for c in captions]
    reply = ctx.chat.chat(
        [
            ChatMessage(role="system", content=prompts.BROWSE_SYSTEM),
            ChatMessage(
                role="user",
                content=(
                    f"Query: {query}\nVideo duration: {record.duration:.1f}s. The {len(data)} "
                    f"captions most relevant to the query, of {result.total_clips} clips, in "
                    f"time order (JSON, data):\n{quote_data(data, compact=False)}"
                ),
            ),
        ],
        max_tokens=ctx.config.max_tokens,
        temperature=ctx.config.temperature,
    )
    result.summary_text = (reply.text or "").strip() or None
    result.usage = reply.usage
    return result


@tool(version=2, uses_embedder=True, uses_models=("image_text",))
def clip_search(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video to search."],
    query: Annotated[str, "What to look for: words spoken or shown, objects, actions, scenes."],
    top_k: Annotated[int, Field(description="How many clips to return (1-50).", ge=1, le=50)] = 16,
) -> ClipSearchResult:
    """Find the clips of a video most relevant to a query, by meaning (caption embeddings) fused
    with keyword matches in the speech transcript, on-screen text and captions, and with what its
    frames show (where visual search is on). Returns the clips in time order with their start/end
    times, caption, speech and on-screen text."""
    ctx.video(video_id)
    return search_clips(ctx, video_id, query, top_k)


def _frames_from_video(ctx: ToolContext, record: Any, ranges: list[list[float]]) -> list[dict[str, Any]]:
    """Frames decoded by time from the video file (decord random access), as JPEG.

    Sharper than the stored frames, and as dense: never more than ``[ingest] frame_fps`` (2) a
    second, as DVD inspects a clip through its 2 fps decode (a 5-s range gives at most 10 frames;
    the 50-frame budget only fills on long ranges), not at the source's 30 fps. Empty when the file
    is no longer where it was ingested (or no longer the same size), so the caller falls back to
    stored frames.
    """
    path = Path(record.path)
    try:
        if not path.is_file() or path.stat().st_size != record.size_bytes:
            return []
        fps = min(max(record.fps, 1.0), ctx.settings.ingest.frame_fps)
        times = inspection_times(ranges, frame_budget(ctx), fps)
        config = ctx.config
        side = longest_side_for(record.width, record.height, config.frame_short_side, config.frame_max_side)
        from vidscope.tasks.decode import frames_at  # PyAV: only when a look decodes the file

        images = frames_at(path, times, max_side=side)
    except (OSError, ValueError) as exc:  # moved, truncated since, undecodable: use stored frames
        log.info("frame_inspect: reading %s failed (%s); using stored frames", path, exc)
        return []
    quality = ctx.settings.ingest.jpeg_quality
    return [{"t": t, "jpeg": encode_jpeg(image, quality)} for t, image in zip(times, images, strict=True)]


def _stored_frames(ctx: ToolContext, video_id: str, ranges: list[list[float]]) -> list[dict[str, Any]]:
    """Frames stored at ingestion inside ``ranges`` (the nearest ones when a range holds none)."""
    where = " OR ".join(f"(t >= {a} AND t <= {b})" for a, b in ranges)
    frames = ctx.store.rows(
        ctx.store.frames, video_id=video_id, where=where, columns=["t", "jpeg"], order_by=["t"]
    ).to_pylist()
    if not frames:
        # A range shorter than the frame interval may hold no sample: take the nearest frames.
        times = ctx.store.rows(ctx.store.frames, video_id=video_id, columns=["t"]).column("t").to_numpy()
        if times.size == 0:
            raise ToolError(f"video {video_id} has no stored frames; ingest it first")
        mids = np.array([(a + b) / 2 for a, b in ranges])
        nearest = sorted({float(times[np.abs(times - m).argmin()]) for m in mids})
        where = " OR ".join(f"t = {t!r}" for t in nearest)
        frames = ctx.store.rows(
            ctx.store.frames, video_id=video_id, where=where, columns=["t", "jpeg"], order_by=["t"]
        ).to_pylist()
    return [frames[i] for i in sample_evenly(len(frames), frame_budget(ctx))]


def frame_budget(ctx: ToolContext) -> int:
    """Frames frame_inspect looks at: ``[agent] max_frames`` (DVD: 50). When the vision model takes
    fewer images per request (a backend's ``max_images``, e.g. vLLM's ``--limit-mm-per-prompt``),
    they are stitched into grids rather than dropped (:func:`ask_about_frames`)."""
    return ctx.config.max_frames


# v3: 50 frames at 720 px by default (the paper's budget); v4: 720 px on the short side (720p),
# all 50 frames seen (grids beyond max_images), the "no vision model" note; v5: a structured reply
# (found, what, when) that says whether the look saw anything, frames at the stored 2 fps
@tool(
    version=5,
    uses_models=("vlm",),
    settings=("max_frames", "frame_max_side", "frame_short_side", "max_tokens", "temperature"),
)
def frame_inspect(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    question: Annotated[str, "What to look for in the frames."],
    time_ranges: Annotated[
        list[list[float]],
        Field(
            description="Time ranges [[start, end], ...] in seconds to take frames from.",
            min_length=1,
            max_length=8,
        ),
    ],
) -> FrameInspectResult:
    """Look closely at frames sampled from the given time ranges and answer a visual question
    about them (appearance, colours, counts, positions, small details, text in the image)."""
    if ctx.vision_model() is None:
        return _no_vision(ctx, video_id, question)
    record = ctx.video(video_id)
    ranges: list[list[float]] = []
    for pair in time_ranges:
        if len(pair) != 2 or not pair[0] <= pair[1]:
            raise ToolError(f"each time range must be [start, end] with start <= end, got {pair}")
        start, end = max(0.0, float(pair[0])), min(float(pair[1]), record.duration)
        if start > end:
            raise ToolError(f"range {pair} lies outside the video (duration {record.duration:.1f}s)")
        ranges.append([start, end])
    frames = _frames_from_video(ctx, record, ranges) or _stored_frames(ctx, video_id, ranges)
    times = [round(float(f["t"]), 2) for f in frames]
    try:
        reply = ask_about_frames(ctx, question, [f["jpeg"] for f in frames], times)
    except ImagesNotSupported:  # learned on this call; the backend remembers it for the process
        return _no_vision(ctx, video_id, question)
    look = read_look(reply.text)
    return FrameInspectResult(
        video_id=video_id,
        question=question,
        answer=look.what,
        frame_times=times,
        ranges=ranges,
        usage=reply.usage,
        found=look.found,
        seen_at=times_inside(look.when, ranges),
    )


def _no_vision(ctx: ToolContext, video_id: str, question: str) -> FrameInspectResult:
    """frame_inspect's observation when no model can look at frames (nothing perceived)."""
    note = no_vision_note(ctx, "frame_inspect")
    return FrameInspectResult(
        video_id=video_id, question=question, answer=note, frame_times=[], ranges=[], no_vision=True
    )


#: What the model is shown of finish's ``citations`` and ``choice``: the forms it should write,
#: inline. The validators take more (one pair, "0:10-0:15" strings, a list of letters), and
#: pydantic's own schema of them — a ``$defs`` entry for :class:`CitedMoment`, ``anyOf`` with null —
#: made finish's spec 340 of the real 1.5B model's tokens, read with every question; shown so, 260
#: (issue 44: a cold question's first prompt 1,515 -> 1,435 tokens).
_CITATIONS_SHOWN = {
    "type": "array",
    "items": {
        "anyOf": [
            {"type": "array", "items": {"type": "number"}},
            {
                "type": "object",
                "properties": {
                    "video_id": {"type": "string"},
                    "start": {"type": "number"},
                    "end": {"type": "number"},
                },
            },
        ]
    },
}
_CHOICE_SHOWN = {"type": "string"}


@tool(terminal=True)
def finish(
    answer: Annotated[str, "The final answer to the question, in plain words."],
    citations: Annotated[
        list[list[float] | CitedMoment],
        BeforeValidator(read_cited_ranges),  # {start, end} objects, "0:10-0:15" strings, one pair
        WithJsonSchema(_CITATIONS_SHOWN),
        Field(
            description="Time ranges [[start, end], ...] in seconds that support the answer; when "
            "several videos were searched, {video_id, start, end} objects."
        ),
    ] = [],  # noqa: B006 - pydantic copies defaults
    choice: Annotated[
        str | list[str] | None,
        WithJsonSchema(_CHOICE_SHOWN),
        "For multiple-choice questions: the letter of the chosen option (all the right letters, "
        'e.g. "AC", when several may be right).',
    ] = None,
) -> FinishResult:
    """Give the final answer with the time ranges (seconds) of the moments that support it. Cite
    only ranges your tools returned. This ends the conversation."""
    return FinishResult()


#: The tools of the Deep-Video-Discovery agent, in the order the model sees them.
DVD_TOOLS = (global_browse, clip_search, frame_inspect, finish)


def dvd_registry() -> ToolRegistry:
    """The allow-list of the question-answering agent (read-only tools plus finish)."""
    return ToolRegistry(DVD_TOOLS)
