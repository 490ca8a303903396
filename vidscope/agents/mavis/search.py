"""MAVIS corpus search: a planner, one agent per library dimension, fusion with a veto, fine rerank.

The semantic library (``storage/semantic.py``) holds, per video window, a caption with its
embedding and scene/object/action tags mapped to canonical concepts. A query runs in four steps:

1. **Plan** — which dimensions the query uses and the sub-intent of each (``{"object": "dog",
   "action": "running"}``): a chat model when one is configured, else :func:`plan_with_rules`.
2. **Propose** — each active dimension agent maps its sub-intent to its nearest canonical concepts
   (at most ``concepts_per_intent``; after the first, only those at least
   ``concept_min_similarity`` alike), takes the videos indexed under them and scores each one
   ``φ_r = cos(E(sub-intent), E(caption))`` (best window); videos scoring at least ``tau_soft`` are
   its proposals. A video indexed under the exact concept its sub-intent names scores at least
   ``tau_hard`` from that agent (:func:`count_membership`): membership is evidence against the
   veto even where the window's short caption omits the word. The candidates of all agents are
   read in one query (the BTree-indexed ``concept_index.concept`` and ``video_parses.video_id``)
   and scored by every agent at once.
3. **Fuse** — the proposals are pooled and every agent's score of every pooled video (from that
   same read) cross-validates them. ``veto`` drops a
   video some agent scores below ``tau_hard``; ``union`` keeps the pool; ``intersection`` keeps
   videos every agent proposed; ``average`` keeps videos whose mean score reaches ``tau_hard``.
4. **Rerank** — the survivors are ranked by the first of these that every survivor has (MAVIS
   scores whole clips with a video encoder where one is configured):

   a. video–text similarity of the query and the clips that matched (``models.video_text``, e.g.
      X-CLIP; the clip vectors the ``clip_embed`` ingestion stage stored with the same model);
   b. image–text similarity of the query and sampled frames (``models.image_text``, CLIP/SigLIP;
      the frame vectors of the ``frame_embed`` stage);
   c. the similarity of the query and the window captions (text embedder).

   ``SearchResult.rerank`` says which was used, a note says why a higher one was not; the top
   ``k`` are returned.

Everything here is pure over a :class:`~vidscope.storage.Store` and the model backends handed in;
``flows/search.py`` wraps it in a Prefect flow.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from vidscope.agents.mavis.plan import (
    PLANNER_SYSTEM,
    ConceptSnapshot,
    Plan,
    make_plan,
    parse_plan,
    plan_with_chat,
    plan_with_rules,
)
from vidscope.core.lexicon import DIMENSIONS, canonical_form
from vidscope.core.settings import SearchSettings
from vidscope.models.protocols.chat import ChatModel
from vidscope.models.protocols.image_text import ImageTextEmbedder
from vidscope.models.protocols.text_embedder import TextEmbedder
from vidscope.models.protocols.video_text import VideoTextEmbedder
from vidscope.storage.ledger import STATUS_DONE
from vidscope.storage.schema import sql_quote
from vidscope.storage.store import Store
from vidscope.tasks.clip_embed import CLIP_EMBED
from vidscope.tasks.frame_embed import FRAME_EMBED

log = logging.getLogger(__name__)

__all__ = [
    "FUSIONS",
    "PLANNER_SYSTEM",
    "ConceptSnapshot",
    "DroppedVideo",
    "Library",
    "LibraryEmpty",
    "Plan",
    "SearchHit",
    "SearchResult",
    "Thresholds",
    "ensure_library",
    "fuse",
    "make_plan",
    "parse_plan",
    "plan_with_chat",
    "plan_with_rules",
    "search_library",
    "thresholds_for",
]

FUSIONS: tuple[str, ...] = ("veto", "union", "intersection", "average")

#: Moments reported per hit (best windows or frames, for thumbnails).
MOMENTS_PER_HIT = 3


class LibraryEmpty(LookupError):
    """The semantic library has no parsed videos yet, so there is nothing to search."""


# ============================================================================ result models


class SearchHit(BaseModel):
    """A video returned by a search, with its per-dimension and fine scores."""

    video_id: str
    file_name: str
    score: float = Field(description="The fine-stage score the hits are ranked by.")
    scores: dict[str, float] = Field(
        description="φ per active dimension (scene/object/action), 'mean' and 'fine'."
    )
    caption: str = Field(description="Caption of the best-matching window.")
    moments: list[tuple[float, float]] = Field(
        default_factory=list, description="Windows or frames (start, end seconds) that matched."
    )


class DroppedVideo(BaseModel):
    """A pooled video the fusion removed, and why."""

    video_id: str
    file_name: str
    reason: str
    scores: dict[str, float]


#: Where a search's thresholds came from (:func:`thresholds_for`).
CALIBRATED, EXPLICIT, DEFAULTED = "calibrated", "explicit", "defaulted"


class Thresholds(BaseModel):
    """The cosines a search proposed and vetoed with, and where they came from: ``calibrated`` for
    the text embedder in use, ``explicit`` (set in ``[search]`` or on the command line), or
    ``defaulted`` (the shipped defaults, calibrated for another embedder: a warning says so)."""

    tau_soft: float
    tau_hard: float
    concept_min_similarity: float
    source: str
    embedder: str | None = None
    warning: str | None = None


def thresholds_for(search: SearchSettings, embedder: str | None) -> tuple[SearchSettings, Thresholds]:
    """``search`` with the thresholds calibrated for the text embedder ``embedder``
    (:meth:`SearchSettings.for_embedder`), and their provenance.

    An embedder without a calibration (the paper's text-embedding-3-large) silently got MiniLM's
    0.3 / 0.15 before issue 37; now that is ``defaulted`` with a warning: its cosines sit on
    another scale (MAVIS uses 0.5 / 0.3 with it), so recall and |V_contro| are not comparable."""
    options = search.for_embedder(embedder)
    explicit = {"tau_soft", "tau_hard"} <= search.model_fields_set
    warning = None
    if explicit:
        source = EXPLICIT
    elif search.calibrated(embedder):
        source = CALIBRATED
    else:
        source = DEFAULTED
        known = ", ".join(sorted(search.thresholds)) or "none"
        warning = (
            f"the text embedder {embedder or '(none)'} has no calibrated thresholds: the defaults "
            f"tau_soft {options.tau_soft:g} / tau_hard {options.tau_hard:g} (calibrated for {known}) "
            "were used; calibrate it (python benchmarks/search_scale.py --calibrate --embedder "
            f"'{embedder}') and set "
            f'[search.thresholds."{embedder}"], or give --tau-soft/--tau-hard (MAVIS: 0.5 / 0.3 '
            "with text-embedding-3-large)"
        )
    return options, Thresholds(
        tau_soft=options.tau_soft,
        tau_hard=options.tau_hard,
        concept_min_similarity=options.concept_min_similarity,
        source=source,
        embedder=embedder,
        warning=warning,
    )


class SearchResult(BaseModel):
    """The outcome of one corpus search (``vidscope search --json`` prints this model)."""

    query: str
    plan: dict[str, str] = Field(description="Active dimension -> its sub-intent.")
    hits: list[SearchHit] = Field(default_factory=list)
    dropped: list[DroppedVideo] = Field(default_factory=list)
    pool_size: int = Field(0, description="Videos proposed by at least one agent.")
    fine_comparisons: int = Field(0, description="Videos compared in the fine rerank stage.")
    fusion: str = "veto"
    seconds: float = 0.0
    planner: str = Field("rules", description="'rules' or the chat model that planned.")
    rerank: str = Field("caption", description="'image-text:<model>' or 'caption' (fallback).")
    proposals: dict[str, int] = Field(
        default_factory=dict, description="Videos each agent proposed (φ ≥ tau_soft)."
    )
    concepts: dict[str, list[str]] = Field(
        default_factory=dict, description="Canonical concepts each agent looked up."
    )
    members: dict[str, int] = Field(
        default_factory=dict,
        description="Videos each agent scored τ_hard because they are indexed under the exact "
        "concept of its sub-intent although their caption scored lower (not vetoed by it).",
    )
    notes: list[str] = Field(default_factory=list)
    stages: dict[str, float] = Field(
        default_factory=dict, description="Seconds spent planning, proposing, fusing, reranking."
    )
    v_contro: int = Field(
        0,
        description="|V_contro|: the candidates that survived the fusion (the veto), the videos the "
        "fine stage compares; the key column of MAVIS Tab. 2 and 4.",
    )
    rerank_wanted: str | None = Field(
        None,
        description="The fine stage the models configured asked for when another was used (the "
        "video-text or image-text model could not score these videos); None when it was used.",
    )
    thresholds: Thresholds | None = Field(None, description="τ_soft, τ_hard and where they came from.")
    gallery: int | None = Field(
        None, description="Videos the search was restricted to (a benchmark's gallery); None: all."
    )


# ============================================================================ the library


@dataclass
class WindowMatrix:
    """Caption embeddings of many videos' windows, rows grouped by video (sorted by video, window).

    Scoring a sub-intent against every candidate is one matrix product and a per-video maximum.
    """

    videos: list[str]
    starts: np.ndarray  # first row of each video
    window_index: np.ndarray  # per row
    vectors: np.ndarray  # unit rows
    position: dict[str, int]  # video -> its position in ``videos``

    def phi(self, vectors: np.ndarray) -> np.ndarray:
        """``φ`` of every video for each of ``vectors`` (unit rows): a (videos x vectors) matrix of
        the best cosine of the vector and one of the video's captions (one product for all)."""
        queries = np.atleast_2d(vectors).astype(np.float32, copy=False)
        if not self.videos:
            return np.zeros((0, len(queries)), dtype=np.float32)
        scores: np.ndarray = np.maximum.reduceat(self.vectors @ queries.T, self.starts, axis=0)
        return scores

    def rows(self, video_id: str) -> slice:
        """The rows of one video."""
        i = self.position[video_id]
        end = self.starts[i + 1] if i + 1 < len(self.starts) else len(self.window_index)
        return slice(int(self.starts[i]), int(end))

    def ranked_windows(self, video_id: str, vector: np.ndarray) -> list[tuple[int, float]]:
        """The video's (window index, cosine) with ``vector``, best first."""
        rows = self.rows(video_id)
        sims = self.vectors[rows] @ vector
        order = np.argsort(-sims, kind="stable")
        return [(int(self.window_index[rows][i]), float(sims[i])) for i in order]


class Library:
    """Read access to the semantic library for one query."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def videos_for(self, wanted: dict[str, Sequence[str]]) -> dict[str, dict[str, set[int]]]:
        """Per dimension: video id -> windows indexed under any of its ``wanted`` concepts (one read)."""
        found: dict[str, dict[str, set[int]]] = {d: {} for d in wanted}
        names = sorted({c for concepts in wanted.values() for c in concepts})
        if not names:
            return found
        # A filter on the concept alone can use a scalar index on it; dimensions are checked below.
        table = self.store.rows(
            self.store.concept_index,
            where=f"concept IN ({', '.join(sql_quote(c) for c in names)})",
            columns=["dimension", "concept", "video_id", "window_index"],
            order_by=(),
        )
        columns = [table.column(c).to_pylist() for c in ("dimension", "concept", "video_id", "window_index")]
        allowed = {(d, c) for d, concepts in wanted.items() for c in concepts}
        for dimension, concept, vid, win in zip(*columns, strict=True):
            if (dimension, concept) in allowed:
                found[dimension].setdefault(vid, set()).add(int(win))
        return found

    def window_matrix(self, video_ids: Iterable[str]) -> WindowMatrix:
        """The caption embeddings of every parsed window of ``video_ids``, shared by every agent.

        One projected read (:meth:`~vidscope.storage.store.Store.rows_of_videos`).
        """
        table = self.store.rows_of_videos(
            self.store.video_parses,
            video_ids,
            columns=["video_id", "window_index", "caption_embedding"],
            not_null="caption_embedding",
            order_by=("video_id", "window_index"),
        )
        if not table.num_rows:
            empty = np.zeros(0, dtype=np.int64)
            return WindowMatrix([], empty, empty, np.zeros((0, 1), dtype=np.float32), {})
        ids = np.asarray(table.column("video_id").to_pylist(), dtype=object)
        first = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        videos = [str(v) for v in ids[first]]
        return WindowMatrix(
            videos=videos,
            starts=first,
            window_index=table.column("window_index").to_numpy(),
            vectors=_unit(_vectors(table.column("caption_embedding"))),
            position={v: i for i, v in enumerate(videos)},
        )

    def window_details(self, video_ids: Sequence[str]) -> dict[tuple[str, int], tuple[float, float, str]]:
        """(video, window) -> (start, end, caption) of every window of ``video_ids``."""
        details: dict[tuple[str, int], tuple[float, float, str]] = {}
        columns = ["video_id", "window_index", "start", "end", "caption"]
        table = self.store.rows_of_videos(self.store.video_parses, video_ids, columns=columns)
        for row in table.to_pylist():
            key = (row["video_id"], int(row["window_index"]))
            details[key] = (float(row["start"]), float(row["end"]), str(row["caption"]))
        return details

    def file_names(self, video_ids: Sequence[str]) -> dict[str, str]:
        """Video id -> file name (the id's prefix when the video row is missing)."""
        table = self.store.rows_of_videos(self.store.videos, video_ids, columns=["video_id", "file_name"])
        ids, files = table.column("video_id").to_pylist(), table.column("file_name").to_pylist()
        names = dict(zip(ids, files, strict=True))
        return {v: names.get(v, v[:12]) for v in video_ids}


def _vectors(column: Any) -> np.ndarray:
    """A fixed-size-list Arrow column as a float32 matrix."""
    combined = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    width = combined.type.list_size
    values = combined.values.to_numpy(zero_copy_only=False)
    return np.asarray(values, dtype=np.float32).reshape(-1, width)


def _unit(matrix: Any) -> np.ndarray:
    array = np.atleast_2d(np.asarray(matrix, dtype=np.float32))
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    unit: np.ndarray = array / np.where(norms == 0, 1.0, norms)
    return unit


# ============================================================================ dimension agents


class MemoEmbedder:
    """A text embedder that remembers the vectors of one query's texts (each is embedded once)."""

    def __init__(self, inner: TextEmbedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self._seen: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Like the wrapped embedder; texts seen before are not sent to the model again."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._seen))
        if missing:
            for text_, vector in zip(missing, np.asarray(self.inner.embed(missing)), strict=True):
                self._seen[text_] = vector
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._seen[t] for t in texts])


@dataclass
class DimensionAgent:
    """One sub-library's agent: a dimension, its sub-intent, the intent's unit embedding and the
    canonical concepts it looks up."""

    dimension: str
    intent: str
    vector: np.ndarray
    concepts: list[tuple[str, float]] = field(default_factory=list)


def build_agents(
    plan: Plan,
    *,
    vocabulary: ConceptSnapshot,
    embedder: TextEmbedder,
    concepts_per_intent: int,
    concept_min_similarity: float | None = None,
) -> list[DimensionAgent]:
    """One agent per active dimension of ``plan``, with its nearest canonical concepts."""
    dims = [d for d in DIMENSIONS if d in plan.intents]
    if isinstance(embedder, MemoEmbedder):  # one model call: the query, the intents, their forms
        forms = [canonical_form(plan.intents[d], d) for d in dims]
        embedder.embed([plan.query, *(plan.intents[d] for d in dims), *(f for f in forms if f)])
    vectors = _unit(embedder.embed([plan.intents[d] for d in dims]))
    agents = []
    for dimension, vector in zip(dims, vectors, strict=True):
        agent = DimensionAgent(dimension, plan.intents[dimension], vector)
        agent.concepts = vocabulary.nearest(
            dimension,
            plan.intents[dimension],
            concepts_per_intent,
            embedder,
            min_similarity=concept_min_similarity,
        )
        agents.append(agent)
    return agents


def count_membership(
    library: Library,
    agents: Sequence[DimensionAgent],
    candidates: dict[str, dict[str, set[int]]],
    phi_all: dict[str, dict[str, float]],
    tau_hard: float,
) -> dict[str, int]:
    """Count concept membership as evidence: a video indexed under the exact concept of an agent's
    sub-intent (a concept or alias the sub-intent names, score 1.0) gets ``φ = max(φ, τ_hard)``
    from that agent, so that dimension does not veto it because its short caption omits the word.
    Updates ``phi_all`` in place; returns how many videos each agent raised.

    MAVIS scores a candidate by its caption alone; a window caption of ≤ 20 words cannot name every
    object and action its tags hold (the tags come from the whole window's speech, text and
    detections), and the veto then drops true matches. The raise is to τ_hard, not τ_soft or 1.0:
    membership alone proposes nothing (another agent's caption score must), and the caption still
    ranks members below videos whose caption says the words too. The exact concepts' videos are
    read only when some candidate scored under τ_hard (one indexed read for all agents).
    """
    exact: dict[str, Sequence[str]] = {}
    for agent in agents:
        scores = phi_all[agent.dimension]
        low = any(scores.get(v, tau_hard) < tau_hard for v in candidates[agent.dimension])
        names = [c for c, score in agent.concepts if score >= 1.0]
        if low and names:
            exact[agent.dimension] = names
    members = library.videos_for(exact) if exact else {}
    raised: dict[str, int] = {}
    for dimension, videos in members.items():
        scores = phi_all[dimension]
        # Only videos with caption rows (in the matrix): the rerank and the hits read them.
        lifted = [v for v in videos if v in scores and scores[v] < tau_hard]
        for vid in lifted:
            scores[vid] = tau_hard
        raised[dimension] = len(lifted)
    return raised


# ============================================================================ fusion


@dataclass
class Fused:
    """What fusion keeps and drops (video id -> reason)."""

    survivors: list[str]
    dropped: dict[str, str]


def fuse(
    proposals: dict[str, set[str]],
    scores: dict[str, dict[str, float]],
    *,
    fusion: str,
    tau_hard: float,
    intents: dict[str, str] | None = None,
) -> Fused:
    """Combine the agents' proposals.

    ``proposals`` maps a dimension to the videos its agent proposed; ``scores`` maps a pooled video
    to ``{dimension: φ}`` from every agent (cross-validation). Survivors keep the pool's order
    (by mean φ, best first). A dropped video's reason is in plain words, naming each part of the
    query (``intents``: dimension -> sub-intent) it matched too weakly.
    """
    if fusion not in FUSIONS:
        raise ValueError(f"unknown fusion {fusion!r}; choose one of {', '.join(FUSIONS)}")
    pool = set().union(*proposals.values()) if proposals else set()
    order = sorted(pool, key=lambda v: (-_mean(scores[v]), v))
    survivors: list[str] = []
    dropped: dict[str, str] = {}
    for vid in order:
        phi = scores[vid]
        reason = None
        if fusion == "veto":
            low = [(d, s) for d, s in phi.items() if s < tau_hard]
            if low:
                reason = "vetoed: " + ", ".join(
                    f"{_part(d, intents)} matched {s:.2f}, under the veto bar {tau_hard:.2f} (--tau-hard)"
                    for d, s in low
                )
        elif fusion == "intersection":
            missing = [d for d in proposals if vid not in proposals[d]]
            if missing:
                reason = "did not pass the relevance bar for " + ", ".join(_part(d, intents) for d in missing)
        elif fusion == "average" and _mean(phi) < tau_hard:
            reason = f"its average match {_mean(phi):.2f} is under the veto bar {tau_hard:.2f} (--tau-hard)"
        if reason:
            dropped[vid] = reason
        else:
            survivors.append(vid)
    return Fused(survivors, dropped)


def _part(dimension: str, intents: dict[str, str] | None) -> str:
    """A part of the query as the user reads it: ``'scene: kitchen'`` (the dimension alone without
    its sub-intent)."""
    intent = (intents or {}).get(dimension)
    return f"'{dimension}: {intent}'" if intent else f"the {dimension} part"


def _mean(phi: dict[str, float]) -> float:
    return sum(phi.values()) / len(phi) if phi else 0.0


# ============================================================================ fine rerank


@dataclass
class Fine:
    """Fine-stage scores and matching moments per video, and the method used."""

    scores: dict[str, float]
    moments: dict[str, list[tuple[float, float]]]
    method: str
    note: str | None = None


def rerank_captions(
    query_vector: np.ndarray,
    survivors: Sequence[str],
    matrix: WindowMatrix,
    details: dict[tuple[str, int], tuple[float, float, str]],
) -> Fine:
    """Fine scores from the query and every window caption of each survivor (the fallback)."""
    scores: dict[str, float] = {}
    moments: dict[str, list[tuple[float, float]]] = {}
    for vid in survivors:
        ranked = matrix.ranked_windows(vid, query_vector)
        scores[vid] = ranked[0][1]
        moments[vid] = [details[(vid, w)][:2] for w, _ in ranked[:MOMENTS_PER_HIT] if (vid, w) in details]
    return Fine(scores, moments, "caption")


def rerank_frames(
    store: Store,
    image_text: ImageTextEmbedder,
    query: str,
    survivors: Sequence[str],
    focus: dict[str, list[tuple[float, float]]],
    frames_per_video: int,
    frame_seconds: float,
) -> Fine:
    """Fine scores from image–text similarity of the query and sampled frames of each survivor.

    The frame vectors are those the ``frame_embed`` ingestion stage stored; a video counts as
    embedded only when that stage's ledger row says it finished with this same model (vectors of
    another model live in another space). Frames are sampled evenly from the spans that matched
    (``focus``), else from the whole video. When some survivor has no usable frame embeddings the
    result has no scores and a ``note`` saying which and why: the caller falls back to captions
    for all, so every hit is ranked on the same scale.
    """
    method = f"image-text:{image_text.name}"
    if not survivors:
        return Fine({}, {}, method)
    embedded_by = embedding_models(store, survivors, FRAME_EMBED.name)
    other = sorted({m for m in embedded_by.values() if m != image_text.name})
    usable = [v for v in survivors if embedded_by.get(v) == image_text.name]
    frames: dict[str, list[tuple[float, np.ndarray]]] = {}
    table = store.rows_of_videos(
        store.frames,
        usable,
        columns=["video_id", "t", "image_embedding"],
        not_null="image_embedding",
        order_by=("video_id", "t"),
    )
    if table.num_rows:
        matrix = _unit(_vectors(table.column("image_embedding")))
        times = table.column("t").to_pylist()
        for row, vid in enumerate(table.column("video_id").to_pylist()):
            frames.setdefault(vid, []).append((float(times[row]), matrix[row]))
    lacking = [v for v in survivors if v not in frames]
    if lacking:
        note = (
            f"{len(lacking)} of {len(survivors)} candidates have no frame embeddings of "
            f"{image_text.name} (the frame_embed stage has not run for them"
            + (f"; it ran with {', '.join(other)}" if other else "")
            + "); the fine stage compared captions instead"
        )
        return Fine({}, {}, "caption", note=note)
    query_vector = _unit(image_text.embed_texts([query]))[0]
    scores: dict[str, float] = {}
    moments: dict[str, list[tuple[float, float]]] = {}
    for vid in survivors:
        spans = focus.get(vid, [])
        inside = [f for f in frames[vid] if any(a <= f[0] <= b for a, b in spans)]
        pool = inside or frames[vid]
        count = min(frames_per_video, len(pool))
        picks = sorted({int(round(x)) for x in np.linspace(0, len(pool) - 1, num=count)})
        sims = np.stack([pool[i][1] for i in picks]) @ query_vector
        order = np.argsort(-sims, kind="stable")[:MOMENTS_PER_HIT]
        scores[vid] = float(sims[order[0]])
        moments[vid] = [(pool[picks[i]][0], pool[picks[i]][0] + frame_seconds) for i in order]
    return Fine(scores, moments, method)


def rerank_clips(
    store: Store,
    video_text: VideoTextEmbedder,
    query: str,
    survivors: Sequence[str],
    focus: dict[str, list[tuple[float, float]]],
) -> Fine:
    """Fine scores from video–text similarity of the query and whole clips of each survivor.

    The clip vectors are those the ``clip_embed`` ingestion stage stored; as with frames, a video
    counts only when that stage finished with this same model. Every clip overlapping the spans
    that matched (``focus``; all clips when none) is compared: the vectors are stored, so unlike
    frames there is nothing to sample. A video's score is its best clip's, its moments the spans
    of its best clips. With some survivor lacking vectors the result has no scores and a ``note``.
    """
    method = f"video-text:{video_text.name}"
    if not survivors:
        return Fine({}, {}, method)
    embedded_by = embedding_models(store, survivors, CLIP_EMBED.name)
    other = sorted({m for m in embedded_by.values() if m != video_text.name})
    usable = [v for v in survivors if embedded_by.get(v) == video_text.name]
    clips: dict[str, list[tuple[float, float, np.ndarray]]] = {}
    table = store.rows_of_videos(
        store.clip_videos,
        usable,
        columns=["video_id", "start", "end", "video_embedding"],
        not_null="video_embedding",
        order_by=("video_id", "start"),
    )
    if table.num_rows:
        matrix = _unit(_vectors(table.column("video_embedding")))
        starts, ends = table.column("start").to_pylist(), table.column("end").to_pylist()
        for row, vid in enumerate(table.column("video_id").to_pylist()):
            clips.setdefault(vid, []).append((float(starts[row]), float(ends[row]), matrix[row]))
    lacking = [v for v in survivors if v not in clips]
    if lacking:
        note = (
            f"{len(lacking)} of {len(survivors)} candidates have no clip embeddings of "
            f"{video_text.name} (the clip_embed stage has not run for them"
            + (f"; it ran with {', '.join(other)}" if other else "")
            + "); the fine stage did not use the video encoder"
        )
        return Fine({}, {}, "caption", note=note)
    query_vector = _unit(video_text.embed_texts([query]))[0]
    scores: dict[str, float] = {}
    moments: dict[str, list[tuple[float, float]]] = {}
    for vid in survivors:
        spans = focus.get(vid, [])
        inside = [c for c in clips[vid] if any(c[0] < b and c[1] > a for a, b in spans)]
        pool = inside or clips[vid]
        sims = np.stack([c[2] for c in pool]) @ query_vector
        order = np.argsort(-sims, kind="stable")[:MOMENTS_PER_HIT]
        scores[vid] = float(sims[order[0]])
        moments[vid] = [(pool[i][0], pool[i][1]) for i in order]
    return Fine(scores, moments, method)


def embedding_models(store: Any, video_ids: Sequence[str], stage: str) -> dict[str, str]:
    """Video id -> the model ``stage`` (``frame_embed``, ``clip_embed``) embedded it with, for the
    videos whose stage finished (ledger status ``done``)."""
    table = store.rows_of_videos(
        store.ledger, video_ids, columns=["video_id", "stage", "status", "details_json"]
    )
    models: dict[str, str] = {}
    for row in table.to_pylist():
        if row["stage"] == stage and row["status"] == STATUS_DONE and row["details_json"]:
            model = json.loads(row["details_json"]).get("model")
            if isinstance(model, str):
                models[row["video_id"]] = model
    return models


# ============================================================================ the pipeline


def ensure_library(store: Store) -> None:
    """Raise :class:`LibraryEmpty` when no video window has been parsed into the library."""
    if int(store.count(store.video_parses)) == 0:
        raise LibraryEmpty(
            "the search library is empty: no video has been parsed yet (ingest videos first; the "
            "parse and tags stages build the library)"
        )


def search_library(
    store: Store,
    query: str,
    *,
    embedder: TextEmbedder,
    options: SearchSettings,
    chat: ChatModel | None = None,
    image_text: ImageTextEmbedder | None = None,
    video_text: VideoTextEmbedder | None = None,
    frame_seconds: float = 0.5,
    thresholds: Thresholds | None = None,
    gallery: Collection[str] | None = None,
) -> SearchResult:
    """Run the MAVIS pipeline for ``query`` over the library in ``store``.

    ``thresholds`` is where ``options``' thresholds came from (:func:`thresholds_for`; recorded in
    the result, its warning among the notes); ``gallery`` restricts the search to these video ids
    (a benchmark's own videos, whatever else the store holds). Raises :class:`LibraryEmpty` when
    no video has been parsed into the library yet and ``ValueError`` for an empty query or an
    unknown fusion mode.
    """
    started = time.perf_counter()
    query = query.strip()
    if not query:
        raise ValueError("the query is empty")
    if options.fusion not in FUSIONS:
        raise ValueError(f"unknown fusion {options.fusion!r}; choose one of {', '.join(FUSIONS)}")
    ensure_library(store)
    library = Library(store)
    embedder = MemoEmbedder(embedder)
    vocabulary = ConceptSnapshot.from_store(store)
    plan = make_plan(query, vocabulary=vocabulary, embedder=embedder, chat=chat)
    plan.query = query
    notes = list(plan.notes)
    agents = build_agents(
        plan,
        vocabulary=vocabulary,
        embedder=embedder,
        concepts_per_intent=options.concepts_per_intent,
        concept_min_similarity=options.concept_min_similarity,
    )
    stages = {"plan": time.perf_counter() - started}
    intents = {a.dimension: a.intent for a in agents}

    # Proposals: each agent's concept candidates, scored against its sub-intent. The candidates of
    # all agents are read once and every agent scores all of them in one matrix product, so the
    # cross-validation below needs no further read.
    candidates = library.videos_for({a.dimension: [c for c, _ in a.concepts] for a in agents})
    if gallery is not None:  # the benchmark's videos only: others in the store are not candidates
        allowed = set(gallery)
        candidates = {d: {v: w for v, w in c.items() if v in allowed} for d, c in candidates.items()}
    matrix = library.window_matrix(set().union(*(c.keys() for c in candidates.values())))
    scored = matrix.phi(np.stack([a.vector for a in agents])).T.tolist()
    phi_all = {
        a.dimension: dict(zip(matrix.videos, row, strict=True)) for a, row in zip(agents, scored, strict=True)
    }
    members = count_membership(library, agents, candidates, phi_all, options.tau_hard)
    proposals = {
        a.dimension: {
            v for v in candidates[a.dimension] if phi_all[a.dimension].get(v, -1.0) >= options.tau_soft
        }
        for a in agents
    }
    stages["propose"] = time.perf_counter() - started - sum(stages.values())
    if not any(proposals.values()):
        best = {d: max((phi_all[d].get(v, -1.0) for v in candidates[d]), default=None) for d in phi_all}
        shown = ", ".join(
            f"{_part(d, intents)} (best {b:.2f})" if b is not None else f"{_part(d, intents)} (no candidate)"
            for d, b in best.items()
        )
        notes.append(
            f"no video passed the relevance bar {options.tau_soft:.2f} for {shown}; "
            "a lower --tau-soft may suit this text embedder"
        )

    # Cross-validation: every agent scores every pooled video (all candidates were scored above).
    pool = sorted(set().union(*proposals.values())) if proposals else []
    phi = {v: {d: round(phi_all[d][v], 4) for d in phi_all} for v in pool}
    fused = fuse(proposals, phi, fusion=options.fusion, tau_hard=options.tau_hard, intents=intents)
    stages["fuse"] = time.perf_counter() - started - sum(stages.values())

    # Fine rerank of the survivors.
    details = library.window_details(fused.survivors)
    query_vector = _unit(embedder.embed([query]))[0]
    fine: Fine | None = None
    focus = (
        _focus(fused.survivors, agents, candidates, matrix, details)
        if video_text is not None or image_text is not None
        else {}
    )
    wanted = (
        f"video-text:{video_text.name}"
        if video_text is not None
        else f"image-text:{image_text.name}"
        if image_text is not None
        else None
    )
    if video_text is not None:  # whole clips first, as MAVIS does with a video encoder
        fine = rerank_clips(store, video_text, query, fused.survivors, focus)
        if fine.note:
            notes.append(fine.note)
            fine = None
    if fine is None and image_text is not None:
        fine = rerank_frames(
            store, image_text, query, fused.survivors, focus, options.frames_per_video, frame_seconds
        )
        if fine.note:
            notes.append(fine.note)
            fine = None
    if fine is None:
        fine = rerank_captions(query_vector, fused.survivors, matrix, details)
    ranked = sorted(fused.survivors, key=lambda v: (-fine.scores[v], v))[: options.k]
    stages["rerank"] = time.perf_counter() - started - sum(stages.values())

    names = library.file_names([*ranked, *fused.dropped])
    hits = []
    for vid in ranked:
        best_window = matrix.ranked_windows(vid, query_vector)[0][0]
        hits.append(
            SearchHit(
                video_id=vid,
                file_name=names[vid],
                score=round(fine.scores[vid], 4),
                scores={**phi[vid], "mean": round(_mean(phi[vid]), 4), "fine": round(fine.scores[vid], 4)},
                caption=details.get((vid, best_window), (0.0, 0.0, ""))[2],
                moments=fine.moments[vid],
            )
        )
    # Built without re-validation: the fields are typed values from above, and a veto can drop
    # ~1,000 pooled videos per query (validation took ~35 µs each).
    dropped = [
        DroppedVideo.model_construct(video_id=vid, file_name=names[vid], reason=reason, scores=phi[vid])
        for vid, reason in fused.dropped.items()
    ]
    return SearchResult(
        query=query,
        plan=plan.intents,
        hits=hits,
        dropped=dropped,
        pool_size=len(pool),
        fine_comparisons=len(fused.survivors),
        fusion=options.fusion,
        seconds=round(time.perf_counter() - started, 4),
        planner=plan.planner,
        rerank=fine.method,
        proposals={d: len(v) for d, v in proposals.items()},
        members={d: n for d, n in members.items() if n},
        concepts={a.dimension: [c for c, _ in a.concepts] for a in agents},
        notes=[*notes, *([thresholds.warning] if thresholds is not None and thresholds.warning else [])],
        stages={name: round(value, 4) for name, value in stages.items()},
        v_contro=len(fused.survivors),
        rerank_wanted=wanted if wanted is not None and not fine.method.startswith(wanted) else None,
        thresholds=thresholds,
        gallery=len(set(gallery)) if gallery is not None else None,
    )


def _focus(
    survivors: Sequence[str],
    agents: Sequence[DimensionAgent],
    candidates: dict[str, dict[str, set[int]]],
    matrix: WindowMatrix,
    details: dict[tuple[str, int], tuple[float, float, str]],
) -> dict[str, list[tuple[float, float]]]:
    """Per survivor, the spans of the windows that matched: indexed under an agent's concepts, or
    each agent's best-scoring window."""
    focus: dict[str, list[tuple[float, float]]] = {}
    for vid in survivors:
        windows: set[int] = set()
        for agent in agents:
            windows |= candidates[agent.dimension].get(vid, set())
            windows.add(matrix.ranked_windows(vid, agent.vector)[0][0])
        focus[vid] = [details[(vid, w)][:2] for w in sorted(windows) if (vid, w) in details]
    return focus
