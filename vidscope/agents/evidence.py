"""Evidence from a video for the agents: clips found by a query, frames asked about.

Shared by the Deep-Video-Discovery tools (:mod:`vidscope.agents.dvd.tools`), the AVI tools, the
extractive answerer and the flows. Clip search fuses two rankings of one video's clips with
reciprocal-rank fusion: text-embedding similarity to the query (exact, per video) and BM25 over the
clip's caption, speech transcript and on-screen text (Lance's full-text index, the one moment
search reads, filtered to the video).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

from pydantic import BaseModel, Field

from vidscope.agents import prompts
from vidscope.agents.answers import Support
from vidscope.agents.frame_grid import fit_frames
from vidscope.agents.tools import ToolContext, ToolError, ToolResult
from vidscope.core.errors import BackendUnavailable
from vidscope.core.lexicon import keywords
from vidscope.core.timecodes import fmt_time
from vidscope.models import registry
from vidscope.models.protocols.chat import ChatMessage, ChatReply
from vidscope.storage.clips import CLIP_TEXT_COLUMNS
from vidscope.storage.schema import sql_quote

#: Reciprocal-rank-fusion constant: damps the weight of top ranks so both rankings count.
RRF_K = 60


# ============================================================================ clip search


class ClipHit(BaseModel):
    """A clip found by :func:`search_clips` (the ``clip_search`` tool's hits)."""

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

    def found(self) -> str:
        """What a citation's support shows of the clip: its speech and on-screen text, the caption
        only without them (without a captioner the caption is a labelled stand-in made of them)."""
        said = [p for p in (self.speech, self.on_screen_text) if p]
        return " ".join(said) if said else self.caption or ""


class ClipSearchResult(ToolResult):
    """Clips of one video ranked by relevance to a query, returned in time order."""

    video_id: str
    query: str
    clips: list[ClipHit]
    searched_clips: int

    def support(self) -> list[Support]:
        # Each hit for the query supports its clip, with the words found there.
        return [
            Support(
                video_id=self.video_id, start=c.start, end=c.end, level="retrieved", found=c.found()[:160]
            )
            for c in self.clips
        ]

    def summary(self) -> str:
        best = sorted(self.clips, key=lambda c: -c.score)[:3]
        where = ", ".join(f"{fmt_time(c.start)}-{fmt_time(c.end)}" for c in best)
        return f"{len(self.clips)} of {self.searched_clips} clips; best at {where or 'none'}"

    def by_relevance(self) -> list[ClipHit]:
        """The clips, most relevant first."""
        return sorted(self.clips, key=lambda c: (-c.score, c.start))

    def for_model(self) -> dict[str, Any]:
        """What the model reads: each clip's times, relevance and what was said, shown and seen,
        without the store's clip index and without a stand-in caption (made without a captioner
        from the same speech and on-screen text: it would say everything twice; only its
        detected objects are kept). Every prompt token costs a small local model time (issue 44)."""
        clips = []
        for clip in self.clips:
            shown: dict[str, Any] = {"start": clip.start, "end": clip.end, "score": round(clip.score, 4)}
            caption, objects = _caption_or_objects(clip.caption)
            for key, value in (
                ("caption", caption),
                ("speech", clip.speech),
                ("on_screen_text", clip.on_screen_text),
                ("objects", objects),
            ):
                if value:
                    shown[key] = value
            clips.append(shown)
        return {
            "video_id": self.video_id,
            "query": self.query,
            "searched_clips": self.searched_clips,
            "clips": clips,
        }


_STAND_IN_OBJECTS = re.compile(r"objects detected: (.+?)(?:; |\.$)")


def _caption_or_objects(caption: str | None) -> tuple[str | None, str | None]:
    """A model's caption as it is; of a stand-in caption (``tasks.caption.signals_summary``) only
    the objects it names, since its speech and on-screen text are shown beside it anyway."""
    from vidscope.tasks.caption import NO_CAPTIONER_PREFIX

    if not caption or not caption.startswith(NO_CAPTIONER_PREFIX):
        return caption, None
    found = _STAND_IN_OBJECTS.search(caption)
    return None, found.group(1) if found else None


def load_clips(ctx: ToolContext, video_id: str, *, with_embeddings: bool = False) -> list[dict[str, Any]]:
    """The clips of ``video_id`` in time order."""
    columns = list(CLIP_TEXT_COLUMNS) + (["text_embedding"] if with_embeddings else [])
    return ctx.store.rows(ctx.store.clips, video_id=video_id, columns=columns, order_by=["start"]).to_pylist()


def keyword_scores(query: str, texts: list[str]) -> list[float]:
    """BM25-like scores of ``query`` over ``texts`` (idf-weighted, length-normalised overlap)."""
    q = set(keywords(query))
    if not q or not texts:
        return [0.0] * len(texts)
    docs = [Counter(keywords(t)) for t in texts]
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


def keyword_ranking(ctx: ToolContext, video_id: str, query: str, clips: list[dict[str, Any]]) -> list[int]:
    """Clip indexes of ``video_id`` whose words match ``query``, best first: BM25 by the clips'
    full-text index (Lance FTS over caption, speech and on-screen text), filtered to the video.

    Before the store's first ``optimize`` builds that index, :func:`keyword_scores` ranks
    ``clips`` (the video's clips, as :func:`load_clips` reads them) by the same measure.
    """
    store = ctx.store
    if store.fts_columns(store.clips):
        where = f"video_id = {sql_quote(video_id)}"
        rows = store.text_search(store.clips, query, len(clips), where=where, columns=["clip_index"])
        return [int(r["clip_index"]) for r in rows]
    texts = [" ".join(filter(None, (c["caption"], c["transcript_text"], c["ocr_text"]))) for c in clips]
    kw = keyword_scores(query, texts)
    return [
        int(clips[i]["clip_index"])
        for i in sorted((i for i, s in enumerate(kw) if s > 0), key=lambda i: (-kw[i], i))
    ]


def visual_ranking(ctx: ToolContext, video_id: str, query: str, limit: int) -> list[int]:
    """Clip indexes of ``video_id`` by their closest frame to ``query`` in the image–text space.

    Only clips with a frame at least ``[search] moment_min_visual_similarity`` alike count (a
    clip that does not look like the query gets no credit, as in moment search). Empty when
    visual search is off (no image–text model, or one that cannot be had) or the video's frames
    have no vectors yet (the ``frame_embed`` stage).
    """
    try:
        model = registry.image_text(ctx.settings)
    except BackendUnavailable:
        return []
    if model is None or model.dim != ctx.store.image_dim:
        return []
    vector = model.embed_texts([query])[0].tolist()
    store = ctx.store
    rows = store.nearest(store.frames, vector, limit * 6, video_id=video_id, columns=["clip_index"])
    floor = ctx.settings.search.moment_min_visual_similarity
    order: list[int] = []
    for row in rows:
        if 1.0 - float(row.get("_distance", 1.0)) < floor:
            break  # nearest first: the rest are less alike still
        if int(row["clip_index"]) not in order:
            order.append(int(row["clip_index"]))
    return order[:limit]


def search_clips(ctx: ToolContext, video_id: str, query: str, top_k: int) -> ClipSearchResult:
    """Text-vector, keyword and (where visual search is on) frame-vector rankings fused
    (reciprocal-rank fusion); top ``top_k`` in time order."""
    clips = load_clips(ctx, video_id)
    if not clips:
        raise ToolError(f"video {video_id} has no clips yet; ingest it first (vidscope ingest)")
    fused: dict[int, float] = {}
    for ranking in (
        vector_ranking(ctx, video_id, query, max(top_k * 4, 64)),
        keyword_ranking(ctx, video_id, query, clips),
        visual_ranking(ctx, video_id, query, max(top_k * 4, 64)),
    ):
        for rank, clip_index in enumerate(ranking):
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


# ============================================================================ frames


def sample_evenly(count: int, limit: int) -> list[int]:
    """``limit`` indexes spread evenly over ``range(count)`` (all when ``count <= limit``)."""
    if count <= limit:
        return list(range(count))
    return sorted({int(round(i * (count - 1) / (limit - 1))) for i in range(limit)}) if limit > 1 else [0]


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


def ask_about_frames(ctx: ToolContext, question: str, jpegs: list[bytes], times: list[float]) -> ChatReply:
    """Ask the vision model (``ctx.vision_model()``, never a separate planner) ``question`` about
    frames (JPEG) taken at ``times``; more frames than it takes per request (``max_images``) are
    stitched into labelled grids (:mod:`.frame_grid`) so the whole budget is seen."""
    vlm = ctx.vision_model()
    if vlm is None:
        raise ToolError("looking at frames needs a vision-language model (models.vlm or models.chat)")
    accepted = int(getattr(vlm, "max_images", 0) or len(jpegs) or 1)
    fitted = fit_frames(jpegs, times, accepted, ctx.settings.ingest.jpeg_quality)
    return vlm.chat(
        [
            ChatMessage(role="system", content=prompts.INSPECT_SYSTEM),
            ChatMessage(
                role="user",
                images=fitted.jpegs,
                content=f"Question: {question}\n{fitted.describe()}",
            ),
        ],
        max_tokens=ctx.config.max_tokens,
        temperature=ctx.config.temperature,
    )
