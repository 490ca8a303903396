"""SAMA's tools that find moments: temporal_grounding (candidate times for a description),
visual_similarity (how alike two segments of two videos look, and where they match best), and
subtitle_retriever / subtitle_extractor over the stored speech transcripts.

Frame embeddings come from the ``frames.image_embedding`` column when a ``frame_embed`` stage has
written it (with the dimension of the configured image–text model); otherwise they are computed
on the fly from the stored frames with the configured ``image_text`` model, and the result says so.
"""

from __future__ import annotations

import bisect
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, Field

from vidscope.agents.answers import Support
from vidscope.agents.evidence import keyword_scores, sample_evenly, search_clips
from vidscope.agents.perception import TimeRange, checked_range, perception_backend
from vidscope.agents.tools import ToolContext, ToolError, ToolResult, tool
from vidscope.core.images import decode_jpeg
from vidscope.models import registry
from vidscope.models.protocols.image_text import ImageTextEmbedder

#: Hints temporal_grounding returns at most; transcript segments the retriever returns at most.
GROUNDING_HINTS = 5
SUBTITLE_HITS = 8
#: Reciprocal-rank fusion constant (as in clip search).
RRF_K = 60

FROM_STORE = "stored frame embeddings (frame_embed stage)"


# ============================================================================ frame embeddings


class FrameVectors(BaseModel):
    """Unit image embeddings of the stored frames of one segment, and where they came from."""

    model_config = {"arbitrary_types_allowed": True}

    times: list[float]
    vectors: Any  # np.ndarray (n, dim)
    source: str


def frame_vectors(
    ctx: ToolContext,
    video_id: str,
    start: float,
    end: float,
    *,
    outside: tuple[float, float] | None = None,
    limit: int | None = None,
) -> FrameVectors:
    """Embeddings of the stored frames in [start, end] of ``video_id`` (but not in ``outside``;
    at most ``limit``, spread evenly): the stored ones when all are present (and match the
    configured model's dimension), else computed now."""
    store = ctx.store
    rows = store.rows(
        store.frames,
        video_id=video_id,
        where=f"t >= {start!r} AND t <= {end!r}",
        columns=["t", "image_embedding"],
        order_by=["t"],
    ).to_pylist()
    if outside is not None:
        rows = [r for r in rows if not outside[0] <= float(r["t"]) <= outside[1]]
    if limit is not None and len(rows) > limit:
        rows = [rows[i] for i in sample_evenly(len(rows), limit)]
    if not rows:
        raise ToolError(f"video {video_id} has no stored frames in [{start:g}, {end:g}]s; ingest it first")
    times = [float(r["t"]) for r in rows]
    model = perception_backend(ctx, "image_text", registry.image_text)
    stored = [r["image_embedding"] for r in rows]
    if all(v is not None for v in stored) and (model is None or len(stored[0]) == model.dim):
        return FrameVectors(times=times, vectors=_unit(np.array(stored, dtype=np.float32)), source=FROM_STORE)
    if model is None:
        raise ToolError(
            "no frame embeddings are stored (no frame_embed stage has run) and no image-text model "
            "is configured (models.image_text) to compute them"
        )
    jpegs = store.rows(
        store.frames,
        video_id=video_id,
        where=f"t >= {min(times)!r} AND t <= {max(times)!r}",
        columns=["t", "jpeg"],
        order_by=["t"],
    ).to_pylist()
    wanted = set(times)
    images = [decode_jpeg(r["jpeg"]) for r in jpegs if float(r["t"]) in wanted]
    vectors = _embed(model, images)
    return FrameVectors(
        times=times,
        vectors=vectors,
        source=f"computed on the fly with {model.name} (no stored frame embeddings)",
    )


def _embed(model: ImageTextEmbedder, images: list[np.ndarray]) -> np.ndarray:
    return _unit(np.asarray(model.embed_images(images), dtype=np.float32))


def _unit(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1.0)


# ============================================================================ temporal_grounding


class TimeHint(BaseModel):
    """A candidate moment for the query, with the evidence that found it."""

    start: float
    end: float
    score: float = Field(description="Fused rank score; higher is better.")
    found_by: list[str]


class GroundingResult(ToolResult):
    """Candidate moments of one video for a description — hints to verify, not answers."""

    video_id: str
    query: str
    hints: list[TimeHint]
    notes: list[str] = Field(default_factory=list)

    def support(self) -> list[Support]:
        # SAMA App. C: grounding returns "hints, not evidence" — to verify with a look or the
        # subtitles; a hint verifies nothing by itself.
        return [
            Support(
                video_id=self.video_id,
                start=h.start,
                end=h.end,
                level="echoed",
                found=f"hint by {', '.join(h.found_by)}",
            )
            for h in self.hints
        ]

    def summary(self) -> str:
        best = ", ".join(f"{h.start:g}-{h.end:g}s" for h in self.hints[:3])
        return f"{len(self.hints)} candidate moments: {best or 'none'}"


# v2: hints span the stored clips, not clips recomputed from the current [ingest] clip_seconds.
@tool(version=2, uses_embedder=True, uses_models=("image_text",))
def temporal_grounding(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    query: Annotated[str, "The event or scene to locate, in words."],
) -> GroundingResult:
    """Candidate times at which a described event or scene happens in a video, found by clip
    search (captions, speech, on-screen text) and by image-text similarity of its frames. These are
    hints: check the best ones with video_reader before relying on them."""
    record = ctx.video(video_id)
    # The clips as ingested: the setting may have changed since, and clips need not be even.
    clip_rows = ctx.store.rows(
        ctx.store.clips, video_id=video_id, columns=["clip_index", "start", "end"], order_by=["start"]
    ).to_pylist()
    bounds = {int(r["clip_index"]): (float(r["start"]), float(r["end"])) for r in clip_rows}
    starts = [float(r["start"]) for r in clip_rows]
    fused: dict[int, float] = {}
    found_by: dict[int, set[str]] = {}
    notes: list[str] = []
    try:
        clips = search_clips(ctx, video_id, query, GROUNDING_HINTS * 2).by_relevance()
    except ToolError as exc:
        clips = []
        notes.append(f"clip search: {exc}")
    for rank, clip in enumerate(clips):
        fused[clip.clip_index] = fused.get(clip.clip_index, 0.0) + 1.0 / (RRF_K + rank + 1)
        found_by.setdefault(clip.clip_index, set()).add("clip search")
    try:
        model = perception_backend(ctx, "image_text", registry.image_text)
    except ToolError as exc:  # configured but not to be had (offline): the clip search still counts
        model = None
        notes.append(f"visual search is off ({exc}): frames were not compared with the query")
    if model is None:
        if not notes or not notes[-1].startswith("visual search is off"):
            notes.append("no image-text model (models.image_text): frames were not compared with the query")
    elif clip_rows:
        vectors = frame_vectors(ctx, video_id, 0.0, record.duration)
        text = _unit(np.asarray(model.embed_texts([query]), dtype=np.float32))[0]
        scores = vectors.vectors @ text
        best: dict[int, float] = {}
        for t, s in zip(vectors.times, scores, strict=True):
            # The stored clip the frame falls in (the last one starting at or before it).
            index = int(clip_rows[max(0, bisect.bisect_right(starts, t) - 1)]["clip_index"])
            best[index] = max(best.get(index, -1.0), float(s))
        for rank, index in enumerate(sorted(best, key=lambda i: -best[i])[: GROUNDING_HINTS * 2]):
            fused[index] = fused.get(index, 0.0) + 1.0 / (RRF_K + rank + 1)
            found_by.setdefault(index, set()).add("image-text similarity")
        notes.append(f"frames: {vectors.source}")
    top = [i for i in sorted(fused, key=lambda i: (-fused[i], i)) if i in bounds][:GROUNDING_HINTS]
    hints = [
        TimeHint(
            start=round(bounds[i][0], 2),
            end=round(min(record.duration, bounds[i][1]), 2),
            score=round(fused[i] * 1000, 3),
            found_by=sorted(found_by[i]),
        )
        for i in top
    ]
    return GroundingResult(video_id=video_id, query=query, hints=hints, notes=notes)


# ============================================================================ visual_similarity


class SimilarityResult(ToolResult):
    """How alike a segment of one video looks to a segment of another, and where it matches best.

    ``cosine`` is the configured image–text model's own score, whose scale depends on the model
    (unrelated photos often score 0.4–0.7 with CLIP); ``similarity`` places it on a scale that
    means the same for every model: 0 as alike as unrelated footage of the library, 1 the same
    frames."""

    video_id: str
    time_range: list[float]
    other_video_id: str
    other_range: list[float]
    cosine: float = Field(description="Mean cosine of the best aligned frames (the model's own scale).")
    unrelated_cosine: float | None = Field(
        description="What unrelated footage (frames sampled from other videos) scores against the "
        "segment: the median of their mean cosines with it."
    )
    similarity: float | None = Field(
        description="0 = no more alike than unrelated footage, 1 = the same frames; "
        "null without unrelated footage to compare with."
    )
    above_unrelated: float | None = Field(
        description="Share of the sampled unrelated frames that look less alike than the match, in [0, 1]."
    )
    judgement: str
    best_match: list[float] = Field(description="[start, end] of the other range that matches best.")
    source: str
    unrelated_source: str | None = Field(default=None, description="Where the unrelated footage came from.")

    def support(self) -> list[Support]:
        # Measured on both segments' frames: the compared range and its best match.
        said = f"visual similarity {self.judgement}"
        return [
            Support(
                video_id=self.video_id,
                start=self.time_range[0],
                end=self.time_range[1],
                level="retrieved",
                found=said,
            ),
            Support(
                video_id=self.other_video_id,
                start=self.best_match[0],
                end=self.best_match[1],
                level="retrieved",
                found=said,
            ),
        ]

    def summary(self) -> str:
        a, b = self.best_match
        score = "n/a" if self.similarity is None else f"{self.similarity:.3f}"
        return (
            f"similarity {score}; best match {self.other_video_id[:8]} {a:g}-{b:g}s "
            f"({self.judgement}; cosine {self.cosine:.3f})"
        )


def align(reference: np.ndarray, candidate: np.ndarray) -> tuple[float, int]:
    """(mean cosine, offset) of the best placement of ``reference``'s frame sequence inside
    ``candidate``'s (frame by frame, in order); a shorter candidate is matched inside the reference."""
    if len(candidate) < len(reference):
        score, _ = align(candidate, reference)
        return score, 0
    sims = reference @ candidate.T
    n = len(reference)
    best, offset = -1.0, 0
    for start in range(len(candidate) - n + 1):
        score = float(np.mean(sims[np.arange(n), start + np.arange(n)]))
        if score > best:
            best, offset = score, start
    return best, offset


#: Unrelated frames sampled to calibrate visual_similarity's score, at most.
BACKGROUND_FRAMES = 24
#: Other videos the unrelated frames are sampled from, at most (spread over the library).
BACKGROUND_VIDEOS = 8
#: Mean cosine from which aligned frames count as the same frames (re-encodes, small shifts).
SAME_FRAMES_COSINE = 0.98


def background_vectors(
    ctx: ToolContext, video_id: str, other_video_id: str, other_range: tuple[float, float]
) -> tuple[np.ndarray, str] | None:
    """Frames that show something else than the compared segments, embedded like them: sampled
    from up to :data:`BACKGROUND_VIDEOS` of the library's other videos (not the reference; not the
    compared part of the other); in a library of these two videos only, from the other video
    outside the compared range. None when there are no such frames."""
    table = ctx.store.rows(ctx.store.videos, columns=["video_id"])
    ids = sorted(str(v) for v in table.column("video_id").to_pylist())
    others = [v for v in ids if v != video_id]
    others = [others[i] for i in sample_evenly(len(others), BACKGROUND_VIDEOS)]
    per_video = max(1, BACKGROUND_FRAMES // max(1, len(others)))
    parts: list[np.ndarray] = []
    for other in others:
        try:
            duration = ctx.video(other).duration
            skip = other_range if other == other_video_id else None
            parts.append(frame_vectors(ctx, other, 0.0, duration, outside=skip, limit=per_video).vectors)
        except ToolError:
            continue
    if not parts:
        return None
    where = "other videos of the library" if len(others) > 1 else "the other video outside the compared range"
    return np.concatenate(parts), where


def judge(cosine: float, background: np.ndarray | None) -> tuple[float | None, float | None, str]:
    """(similarity on the calibrated scale, share of unrelated frames below, words) for an
    aligned mean ``cosine``, given ``background``: per unrelated frame, its mean cosine with the
    reference frames. Unrelated footage scores the background's median (robust to the odd copy
    of the reference in the library); "the same frames" needs the match above every unrelated
    frame too, so a model whose scores crowd near 1 does not call everything the same."""
    if background is None or background.size == 0:
        if cosine >= SAME_FRAMES_COSINE:
            return (
                None,
                None,
                "the same frames, by the raw cosine (no unrelated footage to calibrate against)",
            )
        return None, None, "no unrelated footage to calibrate against; only the raw cosine"
    unrelated = float(np.median(background))
    similarity = float(np.clip((cosine - unrelated) / max(1e-6, 1.0 - unrelated), 0.0, 1.0))
    above = float(np.mean(background < cosine))
    if above == 1.0 and cosine >= SAME_FRAMES_COSINE:
        verdict = "the same frames"
    elif above == 1.0:
        verdict = "more alike than any unrelated footage sampled"
    elif above >= 0.5:
        verdict = "more alike than most unrelated footage, not clearly the same"
    else:
        verdict = "no more alike than unrelated footage"
    return round(similarity, 4), round(above, 4), verdict


# v2: the raw cosine and a score calibrated against unrelated footage, not (cosine + 1) / 2.
# uses_library: the unrelated footage comes from the library's other videos.
@tool(version=2, uses_models=("image_text",), uses_library=True)
def visual_similarity(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the reference video."],
    time_range: TimeRange,
    other_video_id: Annotated[str, "Id of the video to compare with."],
    other_range: TimeRange,
) -> SimilarityResult:
    """Compare how a segment of one video looks against a segment of another, frame by frame,
    and find the part of the other segment that matches best. ``similarity`` is calibrated: 0 =
    no more alike than unrelated footage (frames sampled from other videos), 1 = the same
    frames; ``judgement`` says it in words; ``cosine`` is the image model's raw score (rank
    candidates against one reference by it). Use it for "same person/place/step", "which video
    shows the same", aligning steps."""
    start, end = checked_range(ctx.video(video_id), time_range, instant=False)
    o_start, o_end = checked_range(ctx.video(other_video_id), other_range, instant=False)
    reference = frame_vectors(ctx, video_id, start, end)
    other = frame_vectors(ctx, other_video_id, o_start, o_end)
    score, offset = align(reference.vectors, other.vectors)
    if len(other.times) >= len(reference.times):
        # The matched stretch spans as long as the reference, from the aligned first frame.
        a = other.times[offset]
        b = min(o_end, a + (end - start))
    else:
        a, b = o_start, o_end
    source = reference.source if reference.source == other.source else f"{reference.source}; {other.source}"
    found = background_vectors(ctx, video_id, other_video_id, (o_start, o_end))
    # Each unrelated frame scored as a still segment would be: its mean cosine with the reference.
    background = (found[0] @ reference.vectors.T).mean(axis=1) if found is not None else None
    similarity, above, verdict = judge(score, background)
    return SimilarityResult(
        video_id=video_id,
        time_range=[start, end],
        other_video_id=other_video_id,
        other_range=[o_start, o_end],
        cosine=round(score, 4),
        unrelated_cosine=None
        if background is None or not background.size
        else round(float(np.mean(background)), 4),
        similarity=similarity,
        above_unrelated=above,
        judgement=verdict,
        best_match=[round(a, 2), round(b, 2)],
        source=source,
        unrelated_source=None if found is None else f"{len(found[0])} frames of {found[1]}",
    )


# ============================================================================ subtitles


class SubtitleLine(BaseModel):
    """One transcript segment."""

    start: float
    end: float
    text: str
    language: str | None = None
    score: float | None = None


class SubtitleResult(ToolResult):
    """Transcript lines of one video: found for a query, or read from an interval."""

    video_id: str
    query: str | None = None
    time_range: list[float] | None = None
    lines: list[SubtitleLine]

    def support(self) -> list[Support]:
        return [
            Support(
                video_id=self.video_id, start=x.start, end=x.end, level="retrieved", found=f"said {x.text!r}"
            )
            for x in self.lines
        ]

    def summary(self) -> str:
        return f"{len(self.lines)} lines" + (f": {self.lines[0].text[:60]}" if self.lines else "")


def _segments(ctx: ToolContext, video_id: str, where: str | None = None) -> list[dict[str, Any]]:
    return ctx.store.rows(
        ctx.store.transcripts,
        video_id=video_id,
        where=where,
        columns=["start", "end", "text", "language"],
        order_by=["start"],
    ).to_pylist()


@tool(version=1, uses_embedder=True)
def subtitle_retriever(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    query: Annotated[str, "What is said that you are looking for."],
) -> SubtitleResult:
    """Find the lines of a video's speech transcript most related to a query (by meaning and by
    keywords), with their times. Use it when the answer may be spoken."""
    rows = _segments(ctx, video_id)
    if not rows:
        raise ToolError(f"video {video_id} has no speech transcript (no speech, or not transcribed)")
    texts = [r["text"] for r in rows]
    vectors = ctx.embedder().embed([query, *texts])
    vectors = _unit(np.asarray(vectors, dtype=np.float32))
    by_meaning = np.argsort(-(vectors[1:] @ vectors[0]))
    kw = keyword_scores(query, texts)
    by_words = sorted((i for i, s in enumerate(kw) if s > 0), key=lambda i: (-kw[i], i))
    fused: dict[int, float] = {}
    for ranking in (list(by_meaning), by_words):
        for rank, i in enumerate(ranking):
            fused[int(i)] = fused.get(int(i), 0.0) + 1.0 / (RRF_K + rank + 1)
    top = sorted(sorted(fused, key=lambda i: -fused[i])[:SUBTITLE_HITS])
    lines = [
        SubtitleLine(
            start=rows[i]["start"],
            end=rows[i]["end"],
            text=rows[i]["text"],
            language=rows[i]["language"],
            score=round(fused[i] * 1000, 3),
        )
        for i in top
    ]
    return SubtitleResult(video_id=video_id, query=query, lines=lines)


@tool(version=1)
def subtitle_extractor(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    t0: Annotated[float, "Start of the interval, in seconds."],
    t1: Annotated[float, "End of the interval, in seconds."],
) -> SubtitleResult:
    """The speech transcript of a video between two times, line by line with times."""
    start, end = checked_range(ctx.video(video_id), [t0, t1])
    rows = _segments(ctx, video_id, f"start < {end!r} AND `end` > {start!r}")
    lines = [
        SubtitleLine(start=r["start"], end=r["end"], text=r["text"], language=r["language"]) for r in rows
    ]
    return SubtitleResult(video_id=video_id, time_range=[start, end], lines=lines)
