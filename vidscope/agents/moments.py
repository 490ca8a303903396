"""Moments across the library: clip-level hybrid search over every video at once.

Two rankings of the library's clips (three with a video encoder) are fused with reciprocal-rank fusion, as
:func:`~vidscope.agents.evidence.search_clips` does inside one video: the nearest clip text
embeddings to the query (``Store.nearest``: the corpus ANN index when no filter applies, an exact
scan of the filtered rows otherwise) and BM25 full-text matches over the clips' captions, speech
and on-screen text (``Store.text_search``, Lance FTS). Where a video–text model is configured
(``models.video_text``, X-CLIP) and the ``clip_embed`` stage has stored its clip vectors, a third
ranking joins the fusion: the clips whose whole-clip vectors are nearest the query's vector in that
model's space (``clip_videos``; what the clips look like and how they move, not what their captions
say). Where an image–text model is configured (``models.image_text``, the default profile's CLIP)
and the ``frame_embed`` stage has stored frame vectors, the clips whose frames look most like the
query join the fusion too (a clip scores as its closest frame), so silent clips without any text
are found by what they show; :func:`search_moments_by_image` ranks by that alone for a picture.
Hits of one video whose clips touch are
merged into one moment, scored by its best clip; each moment names its video, file, time span and
the text that was said or shown in it.

The fused score orders moments but says nothing of how well any of them matches: the best moment
of an unrelated query fuses as high as that of a related one. Each moment therefore also carries a
``relevance`` from 0 to 1 (:func:`relevance`, the one place it is defined): the cosine similarity
between the query and the text of the moment's best-matching clip in the text embedder's space.
With the embedded MiniLM a clip saying or showing what was asked scores 0.6–0.8 and unrelated ones
under 0.3 (``[search] moment_min_relevance``, the default cut-off: weaker moments are left out,
and counted in a note, unless ``min_relevance=0`` — ``vidscope search --moments --all``).

Used by the ``search_moments`` flow (``vidscope search --moments``, ``GET /api/moments``, the MCP
``search_moments`` tool), by the MAVIS search to place its hits' moments at clip precision, and by
the ``library_search`` agent tool.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from datetime import time as time_of_day
from typing import Any

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, Field

from vidscope.agents.evidence import RRF_K
from vidscope.models.protocols.image import Image
from vidscope.models.protocols.image_text import ImageTextEmbedder
from vidscope.models.protocols.text_embedder import TextEmbedder
from vidscope.models.protocols.video_text import VideoTextEmbedder
from vidscope.storage.schema import sql_quote
from vidscope.storage.store import Store

__all__ = [
    "Moment",
    "MomentFilters",
    "MomentSearch",
    "best_moments",
    "relevance",
    "search_moments",
    "search_moments_by_image",
]

#: Refine factor of the corpus ANN ranking. It is :data:`MIN_DEPTH` (50) deep, not 16 like the
#: store's default (20, chosen for top 16), so 10 already re-ranks 500 candidates: at 1M clips
#: recall@50 0.997 against an exact scan (20: 1.000, 5: 0.933) in 43.5 ms vs 60.6 ms for 20
#: (benchmarks/search_scale.py --moments, RESULTS.md).
ANN_REFINE_FACTOR = 10
#: Run the meaning (ANN) and words (FTS) rankings at the same time, in two threads.
PARALLEL_RANKINGS = True
#: Clips each ranking contributes per moment asked for (and at least :data:`MIN_DEPTH`).
DEPTH_PER_MOMENT = 4
MIN_DEPTH = 50
#: Characters of a moment's text kept (speech and on-screen text of its clips, in time order).
TEXT_LIMIT = 400
#: Frames the visual ranking reads per clip it wants (2 fps x 5 s clips hold 10 frames; a clip's
#: best frames are near each other in the ranking, so fewer suffice).
FRAMES_PER_CLIP = 6
#: Clips closer than this (seconds) count as touching and merge into one moment.
TOUCH = 0.05
#: A touching hit joins a moment when its fused score is at least this fraction of the moment's
#: best: a clip first in one ranking scores half of one first in both, so it stays out of that one.
JOIN_RATIO = 0.6
#: Clips one moment spans at most (20 s of 5 s clips): a moment points at a place, not a chapter.
MAX_CLIPS = 4

_CLIP_COLUMNS = ("video_id", "clip_index", "start", "end", "caption", "transcript_text", "ocr_text")


class Moment(BaseModel):
    """A span of one video that matches a query (``vidscope search --moments --json`` items)."""

    video_id: str
    file: str = Field(description="The video's file name.")
    start: float = Field(description="Seconds from the start of the video.")
    end: float
    score: float = Field(
        description="Rank score of its best clip (reciprocal-rank fusion x 1000): orders moments, "
        "not comparable across queries."
    )
    relevance: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="0-1: cosine similarity of the query and the text of its best-matching clip "
        "(text embedder); None when no clip of it has a text vector.",
    )
    text: str = Field(description="What was said or shown in the moment (its caption when neither).")
    kind: str = Field(
        "clip",
        description="'clip': found among the clips; 'chapter': a chapter found by its title and "
        "summary (vidscope.flows.summarize.chapter_moments), listed after the clip moments.",
    )


class MomentFilters(BaseModel):
    """Which clips a moment search may return; every field left ``None`` means no restriction."""

    videos: list[str] | None = Field(None, description="Only these video ids.")
    start: float | None = Field(None, ge=0, description="Only clips ending after this second.")
    end: float | None = Field(None, ge=0, description="Only clips starting before this second.")
    added_after: datetime | None = Field(None, description="Only videos ingested at or after this.")
    added_before: datetime | None = Field(None, description="Only videos ingested before this.")
    clock_from: datetime | time_of_day | None = Field(
        None,
        description="Only moments whose burned-in clock shows this wall time or later (a time of "
        "day applies on any day; vidscope.tasks.clock).",
    )
    clock_to: datetime | time_of_day | None = Field(
        None, description="Only moments whose clock shows a time before this."
    )

    def check(self) -> None:
        """Raise ``ValueError`` (one line) when the time or the ingestion date range is empty."""
        if self.start is not None and self.end is not None and self.start >= self.end:
            raise ValueError(f"the time range {self.start:g}–{self.end:g} s is empty")
        low, high = self.clock_from, self.clock_to
        if isinstance(low, datetime) and isinstance(high, datetime) and low >= high:
            raise ValueError(f"the clock range {low.isoformat()} – {high.isoformat()} is empty")
        after, before = self.added_after, self.added_before
        if after is not None and before is not None and _utc(after) >= _utc(before):
            raise ValueError("the ingestion date range is empty (its start is not before its end)")


class MomentSearch(BaseModel):
    """The moments found for one query, best first."""

    query: str
    moments: list[Moment] = Field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = Field(default_factory=list)
    ranked_by: list[str] = Field(
        default_factory=list,
        description="The rankings fused: 'text-embedding', 'full-text', 'video-text:<model>', "
        "'image-text:<model>'.",
    )


def search_moments(
    store: Store,
    query: str,
    *,
    embedder: TextEmbedder,
    k: int = 10,
    filters: MomentFilters | None = None,
    video_text: VideoTextEmbedder | None = None,
    image_text: ImageTextEmbedder | None = None,
    min_relevance: float = 0.0,
    min_visual_similarity: float = 0.2,
    show_all: bool = False,
) -> MomentSearch:
    """The ``k`` best moments of the library for ``query`` (see the module docstring).

    With ``image_text`` the clips whose frames look like the query join the fusion (visual search).
    Moments whose :func:`relevance` is under ``min_relevance`` are left out (a note counts them;
    one saying no moment passed the bar when none did); a clip's frame similarity counts toward its
    relevance with ``min_visual_similarity`` placed on the bar (:func:`sight_relevance`);
    ``show_all`` keeps the moments under the bar (their relevance unchanged). Raises
    ``ValueError`` for an empty query, ``k < 1`` or a reversed time or date range.
    """
    started = time.perf_counter()
    query = query.strip()
    if not query:
        raise ValueError("the query is empty")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    filters = filters or MomentFilters()
    filters.check()
    result = MomentSearch(query=query)
    where = _where(store, filters)
    if where == _NOTHING:
        clocked = filters.clock_from is not None or filters.clock_to is not None
        result.notes.append(
            "no ingested video matches the filters"
            + (" (no burned-in clock read in them shows a time in the range)" if clocked else "")
        )
        return _done(result, started)
    if not store.fts_columns(store.clips):
        result.notes.append(
            "the clips have no full-text index yet (it is built after ingestion); ranked by meaning only"
        )
    depth = max(MIN_DEPTH, DEPTH_PER_MOMENT * k)
    vector = embedder.embed([query])[0]
    if PARALLEL_RANKINGS:
        # The ANN search and the full-text search are independent Lance reads that release the
        # GIL: overlapping them cut p50 latency at 1M clips (benchmarks/search_scale.py --moments).
        with ThreadPoolExecutor(max_workers=1) as pool:
            meaning = pool.submit(
                store.nearest,
                store.clips,
                vector,
                depth,
                where=where,
                columns=_CLIP_COLUMNS,
                refine_factor=ANN_REFINE_FACTOR,
            )
            by_words = store.text_search(store.clips, query, depth, where=where, columns=_word_columns(store))
            by_meaning = meaning.result()
    else:
        by_meaning = store.nearest(
            store.clips, vector, depth, where=where, columns=_CLIP_COLUMNS, refine_factor=ANN_REFINE_FACTOR
        )
        by_words = store.text_search(store.clips, query, depth, where=where, columns=_word_columns(store))
    rankings = [by_meaning, by_words]
    result.ranked_by = ["text-embedding", "full-text"] if by_words else ["text-embedding"]
    if video_text is not None:
        by_look = _by_video_text(store, video_text, query, depth, where)
        if by_look:
            rankings.append(by_look)
            result.ranked_by.append(f"video-text:{video_text.name}")
        else:
            result.notes.append(
                f"no clip has a vector of {video_text.name} yet (the clip_embed stage); the video "
                "encoder did not rank clips"
            )
    if image_text is not None:
        seen_frames = _by_frames(store, image_text.embed_texts([query])[0], depth, filters)
        # Only clips that look like the query (a frame at least min_visual_similarity alike) rank.
        by_sight = [row for row in seen_frames if row[_SIGHT] >= min_visual_similarity]
        if by_sight:
            rankings.append(by_sight)
            result.ranked_by.append(f"image-text:{image_text.name}")
        elif seen_frames:
            result.notes.append(
                f"no frame looks like {query!r} to {image_text.name} (none at least "
                f"{min_visual_similarity:.2f} alike); nothing was ranked by what it shows"
            )
        else:
            result.notes.append(
                f"no frame has a vector of {image_text.name} yet (the frame_embed stage); nothing "
                "was ranked by what it shows"
            )
    similar = relevance(store, vector, by_meaning, (row for ranking in rankings for row in ranking))
    if image_text is not None:
        for key, seen in _sight(by_sight).items():
            lifted = sight_relevance(seen, min_relevance, min_visual_similarity)
            similar[key] = max(similar.get(key, 0.0), lifted)
    bar = 0.0 if show_all else min_relevance
    return _finish(store, result, rankings, k, started, similar=similar, min_relevance=bar)


def search_moments_by_image(
    store: Store,
    image: Image,
    *,
    image_text: ImageTextEmbedder,
    k: int = 10,
    filters: MomentFilters | None = None,
    label: str = "image",
) -> MomentSearch:
    """The ``k`` moments whose frames look most like ``image`` (search by image).

    ``label`` names the image in the result's ``query``. Raises ``ValueError`` for ``k < 1`` or a
    reversed time or date range.
    """
    started = time.perf_counter()
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    filters = filters or MomentFilters()
    filters.check()
    result = MomentSearch(query=f"image: {label}")
    if _where(store, filters) == _NOTHING:
        result.notes.append("no ingested video matches the filters")
        return _done(result, started)
    depth = max(MIN_DEPTH, DEPTH_PER_MOMENT * k)
    ranking = _by_frames(store, image_text.embed_images([image])[0], depth, filters)
    result.ranked_by = [f"image-text:{image_text.name}"]
    if not ranking:
        result.notes.append(f"no frame has a vector of {image_text.name} yet (the frame_embed stage)")
    # By image, a moment's relevance is its frames' similarity to the picture (no bar applies).
    return _finish(store, result, [ranking], k, started, similar=_sight(ranking), min_relevance=0.0)


def _finish(
    store: Store,
    result: MomentSearch,
    rankings: list[list[dict[str, Any]]],
    k: int,
    started: float,
    *,
    similar: dict[tuple[str, int], float],
    min_relevance: float,
) -> MomentSearch:
    """Fuse ``rankings``, merge touching clips into moments and keep the ``k`` best in ``result``
    whose relevance (the best of its clips' in ``similar``) reaches ``min_relevance``."""
    query = result.query
    fused, rows = _fuse(*rankings)
    _fill_texts(store, rows)
    moments = _merge(fused, rows)
    moments.sort(key=lambda m: (-m[0], m[1]["video_id"], m[1]["start"]))
    for _, moment in moments:
        known = [similar[_key(c)] for c in moment["clips"] if _key(c) in similar]
        moment["relevance"] = max(known) if known else None
    passed = [m for m in moments if m[1]["relevance"] is None or m[1]["relevance"] >= min_relevance]
    if min_relevance > 0 and moments and not passed:
        result.notes.append(
            f"no moment passed the relevance bar {min_relevance:.2f} for {query!r} "
            f"(best {max(m['relevance'] or 0.0 for _, m in moments):.2f}; --all shows them)"
        )
    elif len(passed) < len(moments) and len(passed) < k:
        weaker = len(moments) - len(passed)
        result.notes.append(
            f"{weaker} weaker moment{'s' if weaker > 1 else ''} under the relevance bar "
            f"{min_relevance:.2f} not shown (--all shows them)"
        )
    top = passed[:k]
    files = _file_names(store, sorted({m["video_id"] for _, m in top}))
    result.moments = [
        Moment(
            video_id=m["video_id"],
            file=files.get(m["video_id"], m["video_id"][:12]),
            start=float(m["start"]),
            end=float(m["end"]),
            score=round(score * 1000, 3),
            relevance=None if m["relevance"] is None else round(m["relevance"], 3),
            text=_text(m["clips"]),
        )
        for score, m in top
    ]
    return _done(result, started)


def best_moments(
    store: Store,
    query: str,
    video_ids: Sequence[str],
    *,
    embedder: TextEmbedder,
    per_video: int = 3,
    video_text: VideoTextEmbedder | None = None,
    image_text: ImageTextEmbedder | None = None,
) -> dict[str, list[Moment]]:
    """Per video of ``video_ids``, its ``per_video`` best moments for ``query`` (clip precision)."""
    if not video_ids:
        return {}
    found = search_moments(
        store,
        query,
        embedder=embedder,
        k=per_video * len(video_ids) * 4,
        filters=MomentFilters(videos=list(video_ids)),
        video_text=video_text,
        image_text=image_text,
    )
    best: dict[str, list[Moment]] = {}
    for moment in found.moments:
        kept = best.setdefault(moment.video_id, [])
        if len(kept) < per_video:
            kept.append(moment)
    return best


def relevance(
    store: Store,
    query_vector: Sequence[float],
    by_meaning: list[dict[str, Any]],
    clips: Iterable[dict[str, Any]],
) -> dict[tuple[str, int], float]:
    """Relevance (0-1) of each clip to the query: the cosine similarity of the query's vector and
    the clip's text vector, clipped at 0 (the moments' ``relevance``, defined here only).

    Clips of the meaning ranking have theirs from its cosine distance; clips that carry their text
    vector (the words ranking reads it with its hits, :func:`_word_columns`) are compared here;
    the vectors of the others (found by the video encoder alone) are read. A clip without a text
    vector has none.
    """
    similar = {_key(row): 1.0 - float(row["_distance"]) for row in by_meaning if "_distance" in row}
    column = store.clips.vector_column or "text_embedding"
    query = np.asarray(query_vector, dtype=np.float32)
    query = query / (np.linalg.norm(query) or 1.0)
    carried: set[tuple[str, int]] = set()  # read with their vector column (None: they have none)
    pending: set[tuple[str, int]] = set()
    for clip in clips:
        key = _key(clip)
        if key in similar or key in carried:
            continue
        if column not in clip:
            pending.add(key)
            continue
        carried.add(key)
        if clip[column] is not None:
            vector = np.asarray(clip[column], dtype=np.float32)
            similar[key] = float(vector @ query / (np.linalg.norm(vector) or 1.0))
    missing = sorted(pending - similar.keys() - carried)
    if missing:
        # Two IN lists, then the exact pairs here: Lance's BTree on video_id narrows the read to
        # those videos' clips, where an OR of (video AND clips) per video scanned every clip
        # (p50 381 ms per search at 1M clips vs 39 ms now, same values; RESULTS.md, issue 44).
        videos = ", ".join(sql_quote(v) for v in sorted({v for v, _ in missing}))
        indexes = ", ".join(str(c) for c in sorted({c for _, c in missing}))
        wanted = set(missing)
        found = store.rows(
            store.clips,
            where=f"video_id IN ({videos}) AND clip_index IN ({indexes})",
            columns=["video_id", "clip_index", column],
            order_by=(),
        )
        ids = zip(found.column("video_id").to_pylist(), found.column("clip_index").to_pylist(), strict=True)
        # Only the wanted pairs become Python rows (the IN lists' cross product holds ~50x more).
        for row in found.filter(pa.array([key in wanted for key in ids], pa.bool_())).to_pylist():
            if row[column] is not None:
                vector = np.asarray(row[column], dtype=np.float32)
                similar[_key(row)] = float(vector @ query / (np.linalg.norm(vector) or 1.0))
    return {key: min(1.0, max(0.0, value)) for key, value in similar.items()}


# ============================================================================ helpers


def _word_columns(store: Store) -> list[str]:
    """What the words ranking reads of each hit: the clip's columns and its text vector, so that
    :func:`relevance` need not read the vectors of words-only hits again. That second read took
    every clip of the hits' videos (up to 50 videos x their clips) and cost 32 ms of a 59-ms
    search at 2M clips (benchmarks/search_scale.py --moments, issue 44)."""
    return [*_CLIP_COLUMNS, store.clips.vector_column or "text_embedding"]


def _key(row: dict[str, Any]) -> tuple[str, int]:
    return str(row["video_id"]), int(row["clip_index"])


#: A filter no clip passes (the date filter matched no video).
_NOTHING = "__nothing__"


def _utc(moment: datetime) -> datetime:
    """``moment`` as an aware UTC datetime (a naive one is taken as UTC)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _where(store: Store, filters: MomentFilters) -> str | None:
    """The Lance SQL filter on clips for ``filters`` (``None``: none; :data:`_NOTHING`: no clip)."""
    parts = []
    videos = set(filters.videos) if filters.videos is not None else None
    if filters.added_after is not None or filters.added_before is not None:
        table = store.rows(store.videos, columns=["video_id", "added_at"]).to_pylist()
        dated = {
            r["video_id"]
            for r in table
            if (filters.added_after is None or _utc(r["added_at"]) >= _utc(filters.added_after))
            and (filters.added_before is None or _utc(r["added_at"]) < _utc(filters.added_before))
        }
        videos = dated if videos is None else videos & dated
    if videos is not None:
        if not videos:
            return _NOTHING
        parts.append(f"video_id IN ({', '.join(sql_quote(v) for v in sorted(videos))})")
    if filters.start is not None:
        parts.append(f"`end` > {float(filters.start)!r}")
    if filters.end is not None:
        parts.append(f"`start` < {float(filters.end)!r}")
    if filters.clock_from is not None or filters.clock_to is not None:
        from vidscope.tasks.clock import load_runs, spans_filter, video_spans

        runs = load_runs(store, sorted(videos) if videos is not None else None)
        spans = video_spans(runs, filters.clock_from, filters.clock_to)
        if not spans:
            return _NOTHING
        parts.append(f"({spans_filter(spans)})")
    return " AND ".join(parts) or None


def _fuse(
    *rankings: list[dict[str, Any]],
) -> tuple[dict[tuple[str, int], float], dict[tuple[str, int], dict[str, Any]]]:
    """Reciprocal-rank fusion of clip rankings keyed by (video, clip index), and the clips' rows."""
    fused: dict[tuple[str, int], float] = {}
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for ranking in rankings:
        for rank, row in enumerate(ranking):
            key = (str(row["video_id"]), int(row["clip_index"]))
            fused[key] = fused.get(key, 0.0) + 1.0 / (RRF_K + rank + 1)
            rows.setdefault(key, row)
    return fused, rows


def _by_video_text(
    store: Store, video_text: VideoTextEmbedder, query: str, depth: int, where: str | None
) -> list[dict[str, Any]]:
    """Clips ranked by the video–text model: the query's vector against the stored clip vectors.

    Rows of another model (same size, other space) are dropped after the search rather than
    filtered before it: a filter would turn the corpus ANN search into an exact scan.
    """
    if store.count(store.clip_videos) == 0:
        return []
    vector = video_text.embed_texts([query])[0]
    found = store.nearest(
        store.clip_videos,
        vector,
        depth,
        where=where,
        columns=["video_id", "clip_index", "start", "end", "model"],
    )
    return [row for row in found if row["model"] == video_text.name]


def _by_frames(store: Store, vector: np.ndarray, depth: int, filters: MomentFilters) -> list[dict[str, Any]]:
    """Clips ranked by their closest frame to ``vector`` in the image–text space, with their rows.

    A clip is as close as its closest frame (max-pooling: a thing shown for one second counts).
    The frame search is filtered by video only (frames have no clip span); the clips found are
    then read under the whole filter, so time ranges apply too.
    """
    if store.count(store.frames) == 0:
        return []
    by_video = MomentFilters(
        videos=filters.videos, added_after=filters.added_after, added_before=filters.added_before
    )
    where = _where(store, by_video)
    found = store.nearest(
        store.frames,
        vector.tolist(),
        depth * FRAMES_PER_CLIP,
        where=where,
        columns=["video_id", "clip_index"],
        refine_factor=ANN_REFINE_FACTOR,
    )
    order: list[tuple[str, int]] = []
    closest: dict[tuple[str, int], float] = {}
    for row in found:
        key = (str(row["video_id"]), int(row["clip_index"]))
        if key not in order:
            order.append(key)
            closest[key] = 1.0 - float(row.get("_distance", 1.0))
    order = order[:depth]
    if not order:
        return []
    clip_where = _where(store, filters)
    keys = " OR ".join(
        f"(video_id = {sql_quote(v)} AND clip_index IN ({', '.join(str(c) for w, c in order if w == v)}))"
        for v in sorted({v for v, _ in order})
    )
    where_clips = f"({keys})" + (f" AND ({clip_where})" if clip_where else "")
    rows = {
        (str(r["video_id"]), int(r["clip_index"])): r
        for r in store.rows(store.clips, where=where_clips, columns=list(_CLIP_COLUMNS)).to_pylist()
    }
    return [{**rows[key], _SIGHT: closest[key]} for key in order if key in rows]


#: The key under which :func:`_by_frames` keeps a clip's closest-frame cosine similarity.
_SIGHT = "_sight"


def _sight(ranking: list[dict[str, Any]]) -> dict[tuple[str, int], float]:
    """The closest-frame similarity (0-1) of each clip of a :func:`_by_frames` ranking."""
    return {_key(row): min(1.0, max(0.0, float(row[_SIGHT]))) for row in ranking if _SIGHT in row}


def sight_relevance(similarity: float, min_relevance: float, min_visual_similarity: float) -> float:
    """A frame similarity on the relevance scale: ``min_visual_similarity`` lands on the relevance
    bar ``min_relevance`` and 1 on 1, linearly (clipped to 0-1). Image–text cosines live on
    another scale than text–text ones (CLIP's matching pairs are near 0.3), so the visual bar is
    its own setting, ``[search] moment_min_visual_similarity``; this puts both on one bar."""
    if min_visual_similarity >= 1.0:
        return 0.0
    slope = (1.0 - min_relevance) / (1.0 - min_visual_similarity)
    return min(1.0, max(0.0, min_relevance + (similarity - min_visual_similarity) * slope))


def _fill_texts(store: Store, rows: dict[tuple[str, int], dict[str, Any]]) -> None:
    """Give the clips found by the video encoder alone their texts (read in one query)."""
    missing = [key for key, row in rows.items() if "transcript_text" not in row]
    if not missing:
        return
    by_video: dict[str, list[int]] = {}
    for video_id, clip_index in missing:
        by_video.setdefault(video_id, []).append(clip_index)
    where = " OR ".join(
        f"(video_id = {sql_quote(v)} AND clip_index IN ({', '.join(map(str, sorted(c)))}))"
        for v, c in sorted(by_video.items())
    )
    for row in store.rows(store.clips, where=where, columns=list(_CLIP_COLUMNS)).to_pylist():
        key = (str(row["video_id"]), int(row["clip_index"]))
        if key in rows:
            rows[key] = {**rows[key], **row}


def _merge(
    fused: dict[tuple[str, int], float], rows: dict[tuple[str, int], dict[str, Any]]
) -> list[tuple[float, dict[str, Any]]]:
    """Hits grouped into (best score, moment) pairs, strongest hits first.

    A hit touching a moment of its video joins it when it scores at least :data:`JOIN_RATIO` of
    the moment's best clip and the moment is shorter than :data:`MAX_CLIPS`, and is left out
    otherwise (a clip found by meaning alone next to one found by meaning and words is context,
    not a second moment); any other hit starts a moment.
    """
    moments: list[tuple[float, dict[str, Any]]] = []
    by_video: dict[str, list[dict[str, Any]]] = {}
    for key in sorted(fused, key=lambda key: (-fused[key], key)):
        row = rows[key]
        start, end = float(row["start"]), float(row["end"])
        near = next(
            (m for m in by_video.get(key[0], []) if start <= m["end"] + TOUCH and end >= m["start"] - TOUCH),
            None,
        )
        if near is None:
            moment: dict[str, Any] = {
                "video_id": key[0],
                "start": start,
                "end": end,
                "clips": [row],
                "best": fused[key],
            }
            by_video.setdefault(key[0], []).append(moment)
            moments.append((fused[key], moment))
        elif fused[key] >= JOIN_RATIO * near["best"] and len(near["clips"]) < MAX_CLIPS:
            near["start"], near["end"] = min(near["start"], start), max(near["end"], end)
            near["clips"].append(row)
    for _, moment in moments:
        moment["clips"].sort(key=lambda clip: float(clip["start"]))
    return moments


def _text(clips: Sequence[dict[str, Any]]) -> str:
    """Speech and on-screen text of ``clips`` in time order (their captions when they hold neither)."""
    parts: list[str] = []
    for field in (("transcript_text", "ocr_text"), ("caption",)):
        for clip in clips:
            for name in field:
                text = " ".join(str(clip.get(name) or "").split())
                if text and text not in parts:
                    parts.append(text)
        if parts:
            break
    joined = " · ".join(parts)
    return joined if len(joined) <= TEXT_LIMIT else joined[: TEXT_LIMIT - 1] + "…"


def _file_names(store: Store, video_ids: Sequence[str]) -> dict[str, str]:
    if not video_ids:
        return {}
    table = store.rows_of_videos(store.videos, video_ids, columns=["video_id", "file_name"])
    return dict(zip(table.column("video_id").to_pylist(), table.column("file_name").to_pylist(), strict=True))


def _done(result: MomentSearch, started: float) -> MomentSearch:
    result.seconds = round(time.perf_counter() - started, 4)
    return result
