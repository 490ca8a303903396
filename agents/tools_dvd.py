"""Deep-Video-Discovery tools over the clip database.

global_browse, clip_search, frame_inspect and finish.

Every tool is read-only and takes the id of the video it looks at, so one question can span several
videos. Results are typed models that record the time ranges they showed the model, which is what
citations are verified against.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, Field

from vidscope.agents import prompts
from vidscope.agents.tools import (
    ToolContext,
    ToolError,
    ToolRegistry,
    ToolResult,
    tool,
)
from vidscope.models.json_tools import quote_data
from vidscope.models.protocols.chat import ChatMessage, ChatReply, Usage
from vidscope.storage.clips import CLIP_TEXT_COLUMNS
from vidscope.storage.subjects import SUBJECTS
from vidscope.tasks.decode import frames_at
from vidscope.tasks.frames import encode_jpeg

log = logging.getLogger(__name__)

#: Subjects global_browse shows at most (the most mentioned), and spans/actions per subject.
BROWSE_SUBJECTS = 30
BROWSE_SUBJECT_SPANS = 12
BROWSE_SUBJECT_ACTIONS = 12

#: Reciprocal-rank-fusion constant: damps the weight of top ranks so both rankings count.
RRF_K = 60

_TOKEN = re.compile(r"[\w']+", re.UNICODE)
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "his",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "she",
        "so",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "they",
        "this",
        "to",
        "was",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)

_CLIP_COLUMNS = list(CLIP_TEXT_COLUMNS)


def tokens(text: str | None) -> list[str]:
    """Lower-case word tokens of ``text`` without stop words (the keyword matcher's vocabulary)."""
    return [t for t in _TOKEN.findall((text or "").lower()) if t not in _STOPWORDS]


def fmt_time(seconds: float) -> str:
    """``m:ss`` (or ``h:mm:ss``) for traces and answers."""
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


# ============================================================================ results


class ClipHit(BaseModel):
    """A clip returned by :func:`clip_search`."""

    start: float
    end: float
    clip_index: int
    score: float = Field(description="Fused relevance (reciprocal-rank fusion); higher is better.")
    caption: str | None = None
    speech: str | None = None
    on_screen_text: str | None = None

    def text(self) -> str:
        """The clip's caption, speech and on-screen text in one string."""
        return " ".join(p for p in (self.caption, self.speech, self.on_screen_text) if p)


class ClipSearchResult(ToolResult):
    """Clips of one video ranked by relevance to a query, returned in time order."""

    video_id: str
    query: str
    clips: list[ClipHit]
    searched_clips: int

    def evidence_ranges(self) -> list[tuple[str, float, float]]:
        return [(self.video_id, c.start, c.end) for c in self.clips]

    def summary(self) -> str:
        best = sorted(self.clips, key=lambda c: -c.score)[:3]
        where = ", ".join(f"{fmt_time(c.start)}-{fmt_time(c.end)}" for c in best)
        return f"{len(self.clips)} of {self.searched_clips} clips; best at {where or 'none'}"

    def by_relevance(self) -> list[ClipHit]:
        """The clips, most relevant first."""
        return sorted(self.clips, key=lambda c: (-c.score, c.start))


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
    """A query-focused overview of a whole video."""

    video_id: str
    query: str
    duration: float
    total_clips: int
    summary_text: str | None = Field(None, description="The model's summary; absent without a chat model.")
    captions: list[CaptionSample] = Field(default_factory=list)
    subjects: list[SubjectEntry] = Field(
        default_factory=list, description="Recurring subjects, most mentioned first."
    )
    usage: Usage | None = None

    def evidence_ranges(self) -> list[tuple[str, float, float]]:
        ranges = [(self.video_id, c.start, c.end) for c in self.captions]
        ranges += [(self.video_id, a, b) for s in self.subjects for a, b in s.spans]
        return ranges

    def summary(self) -> str:
        what = "summary" if self.summary_text else "captions only"
        text = f"{what} over {len(self.captions)} of {self.total_clips} clips"
        return f"{text}, {len(self.subjects)} subjects" if self.subjects else text

    def model_usage(self) -> Usage | None:
        return self.usage

    def for_model(self) -> dict[str, Any]:
        # With a summary the model does not need every caption again; times are kept for citing.
        data = self.model_dump(mode="json", exclude={"usage"})
        if self.summary_text:
            data["captions"] = [{"start": c.start, "end": c.end} for c in self.captions]
        return data


class FrameInspectResult(ToolResult):
    """The vision-language model's answer about frames taken from some time ranges."""

    video_id: str
    question: str
    answer: str
    frame_times: list[float]
    ranges: list[list[float]]
    usage: Usage | None = None

    def evidence_ranges(self) -> list[tuple[str, float, float]]:
        return [(self.video_id, float(a), float(b)) for a, b in self.ranges]

    def summary(self) -> str:
        return f"{len(self.frame_times)} frames inspected: {self.answer[:80]}"

    def model_usage(self) -> Usage | None:
        return self.usage

    def for_model(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"usage"})


class FinishResult(ToolResult):
    """Never produced: finish is handled by the runtime (declared only for its schema)."""


# ============================================================================ search logic


def load_clips(ctx: ToolContext, video_id: str, *, with_embeddings: bool = False) -> list[dict[str, Any]]:
    """The clips of ``video_id`` in time order."""
    columns = _CLIP_COLUMNS + (["text_embedding"] if with_embeddings else [])
    return ctx.store.rows(ctx.store.clips, video_id=video_id, columns=columns, order_by=["start"]).to_pylist()


def keyword_scores(query: str, texts: list[str]) -> list[float]:
    """BM25-like scores of ``query`` over ``texts`` (idf-weighted, length-normalised overlap)."""
    q = set(tokens(query))
    if not q or not texts:
        return [0.0] * len(texts)
    docs = [Counter(tokens(t)) for t in texts]
    n = len(docs)
    avg_len = max(1.0, sum(sum(d.values()) for d in docs) / n)
    idf = {}
    for term in q:
        df = sum(1 for d in docs if term in d)
        idf[term] = math.log(1 + (n - df + 0.5) / (df + 0.5))
    scores = []
    for doc in docs:
        norm = 1.2 * (0.25 + 0.75 * sum(doc.values()) / avg_len)
        scores.append(sum(idf[t] * doc[t] * 2.2 / (doc[t] + norm) for t in q if doc.get(t)))
    return scores


def vector_ranking(ctx: ToolContext, video_id: str, query: str, limit: int) -> list[int]:
    """Clip indexes of ``video_id`` by text-embedding similarity to ``query`` (exact, per video)."""
    vector = ctx.embedder().embed([query])[0]
    store = ctx.store
    rows = store.nearest(store.clips, vector, limit, video_id=video_id, columns=["clip_index"])
    return [int(r["clip_index"]) for r in rows]


def search_clips(ctx: ToolContext, video_id: str, query: str, top_k: int) -> ClipSearchResult:
    """Vector and keyword rankings fused (reciprocal-rank fusion); top ``top_k`` in time order."""
    clips = load_clips(ctx, video_id)
    if not clips:
        raise ToolError(f"video {video_id} has no clips yet; ingest it first (vidscope ingest)")
    texts = [" ".join(filter(None, (c["caption"], c["transcript_text"], c["ocr_text"]))) for c in clips]
    fused: dict[int, float] = {}
    for rank, clip_index in enumerate(vector_ranking(ctx, video_id, query, max(top_k * 4, 64))):
        fused[clip_index] = fused.get(clip_index, 0.0) + 1.0 / (RRF_K + rank + 1)
    kw = keyword_scores(query, texts)
    by_kw = sorted((i for i, s in enumerate(kw) if s > 0), key=lambda i: (-kw[i], i))
    for rank, i in enumerate(by_kw):
        clip_index = int(clips[i]["clip_index"])
        fused[clip_index] = fused.get(clip_index, 0.0) + 1.0 / (RRF_K + rank + 1)
    best = sorted(fused, key=lambda k: (-fused[k], k))[:top_k]
    by_index = {int(c["clip_index"]): c for c in clips}
    hits = [
        ClipHit(
            start=float(by_index[k]["start"]),
            end=float(by_index[k]["end"]),
            clip_index=k,
            score=round(fused[k] * 1000, 3),
            caption=by_index[k]["caption"],
            speech=by_index[k]["transcript_text"] or None,
            on_screen_text=by_index[k]["ocr_text"] or None,
        )
        for k in best
        if k in by_index
    ]
    hits.sort(key=lambda h: h.start)
    return ClipSearchResult(video_id=video_id, query=query, clips=hits, searched_clips=len(clips))


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


def sample_evenly(count: int, limit: int) -> list[int]:
    """``limit`` indexes spread evenly over ``range(count)`` (all when ``count <= limit``)."""
    if count <= limit:
        return list(range(count))
    return sorted({int(round(i * (count - 1) / (limit - 1))) for i in range(limit)}) if limit > 1 else [0]


# ============================================================================ tools


@tool(version=2, uses_chat=True)
def global_browse(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video to browse."],
    query: Annotated[str, "What the overview should focus on (the question, or a part of it)."],
) -> BrowseResult:
    """Overview of a whole video: its recurring subjects (who or what, appearance, identity,
    actions, when seen) and a summary of events relevant to the query, written from captions
    sampled evenly across the video (with their times). Use it first for questions about the video
    as a whole, its order of events or its main subjects."""
    record = ctx.video(video_id)
    clips = [c for c in load_clips(ctx, video_id) if c["caption"]]
    if not clips:
        raise ToolError(f"video {video_id} has no captions yet; ingest it first (vidscope ingest)")
    picked = [clips[i] for i in sample_evenly(len(clips), ctx.config.browse_captions)]
    captions = [CaptionSample(start=c["start"], end=c["end"], caption=c["caption"]) for c in picked]
    result = BrowseResult(
        video_id=video_id,
        query=query,
        duration=record.duration,
        total_clips=len(clips),
        captions=captions,
        subjects=load_subjects(ctx, video_id),
    )
    if ctx.chat is None:
        return result
    data = [{"start": c.start, "end": c.end, "caption": c.caption} for c in captions]
    reply = ctx.chat.chat(
        [
            ChatMessage(role="system", content=prompts.BROWSE_SYSTEM),
            ChatMessage(
                role="user",
                content=(
                    f"Query: {query}\nVideo duration: {record.duration:.1f}s. "
                    f"Captions (JSON, data):\n{quote_data(data, compact=False)}"
                ),
            ),
        ],
        max_tokens=ctx.config.max_tokens,
        temperature=ctx.config.temperature,
    )
    result.summary_text = (reply.text or "").strip() or None
    result.usage = reply.usage
    return result


@tool(version=1, uses_embedder=True)
def clip_search(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video to search."],
    query: Annotated[str, "What to look for: words spoken or shown, objects, actions, scenes."],
    top_k: Annotated[int, Field(description="How many clips to return (1-50).", ge=1, le=50)] = 16,
) -> ClipSearchResult:
    """Find the clips of a video most relevant to a query, by meaning (caption embeddings) fused
    with keyword matches in the speech transcript, on-screen text and captions. Returns the clips in
    time order with their start/end times, caption, speech and on-screen text."""
    ctx.video(video_id)
    return search_clips(ctx, video_id, query, top_k)


def inspection_times(ranges: list[list[float]], budget: int, fps: float) -> list[float]:
    """Up to ``budget`` times spread over ``ranges`` in proportion to their lengths, never denser
    than the video's own frame rate (a zero-length range gets its one instant)."""
    times: list[float] = []
    total = sum(b - a for a, b in ranges)
    for a, b in ranges:
        share = budget * (b - a) / total if total > 0 else budget / len(ranges)
        count = max(1, min(int(round(share)), int((b - a) * fps) + 1))
        step = (b - a) / count
        times += [a + step * (i + 0.5) for i in range(count)]
    return sorted(times)[:budget] if len(times) > budget else sorted(times)


def _frames_from_video(ctx: ToolContext, record: Any, ranges: list[list[float]]) -> list[dict[str, Any]]:
    """Frames decoded by time from the video file (decord random access), as JPEG.

    Finer than the stored 2 fps frames for short ranges. Empty when the file is no longer where it
    was ingested (or no longer the same size), so the caller falls back to stored frames.
    """
    path = Path(record.path)
    try:
        if not path.is_file() or path.stat().st_size != record.size_bytes:
            return []
        times = inspection_times(ranges, ctx.config.max_frames, max(record.fps, 1.0))
        images = frames_at(path, times, max_side=ctx.settings.ingest.max_frame_side)
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
    return [frames[i] for i in sample_evenly(len(frames), ctx.config.max_frames)]


def ask_about_frames(ctx: ToolContext, question: str, jpegs: list[bytes], times: list[float]) -> ChatReply:
    """Ask the vision-language chat model ``question`` about frames (JPEG) taken at ``times``."""
    assert ctx.chat is not None
    return ctx.chat.chat(
        [
            ChatMessage(role="system", content=prompts.INSPECT_SYSTEM),
            ChatMessage(
                role="user",
                images=jpegs,
                content=(
                    f"Question: {question}\nThe {len(jpegs)} images are frames at these "
                    "times (seconds): "
                    f"{times}"
                ),
            ),
        ],
        max_tokens=ctx.config.max_tokens,
        temperature=ctx.config.temperature,
    )


@tool(version=2, uses_chat=True)
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
    if ctx.chat is None:
        raise ToolError("frame_inspect needs a vision-language chat model (models.chat); none is configured")
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
    reply = ask_about_frames(ctx, question, [f["jpeg"] for f in frames], times)
    return FrameInspectResult(
        video_id=video_id,
        question=question,
        answer=(reply.text or "").strip(),
        frame_times=times,
        ranges=ranges,
        usage=reply.usage,
    )


@tool(terminal=True)
def finish(
    answer: Annotated[str, "The final answer to the question, in plain words."],
    citations: Annotated[
        list[list[float]],
        Field(description="Time ranges [[start, end], ...] in seconds that support the answer."),
    ] = [],  # noqa: B006 - pydantic copies defaults
    choice: Annotated[str | None, "For multiple-choice questions: the letter of the chosen option."] = None,
) -> FinishResult:
    """Give the final answer with the time ranges (seconds) of the moments that support it. Cite
    only ranges your tools returned. This ends the conversation."""
    return FinishResult()


#: The tools of the Deep-Video-Discovery agent, in the order the model sees them.
DVD_TOOLS = (global_browse, clip_search, frame_inspect, finish)


def dvd_registry() -> ToolRegistry:
    """The allow-list of the question-answering agent (read-only tools plus finish)."""
    return ToolRegistry(DVD_TOOLS)
