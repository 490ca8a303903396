"""The queries over the whole library, ``search`` (videos, MAVIS) and ``search-moments``: their work,
their Prefect flows and their entry points, in one module.

``search`` ranks whole videos with the MAVIS pipeline (planner, per-dimension agents, fusion with a
veto, fine rerank: :mod:`vidscope.agents.mavis.search`); when its fine stage compared window captions, its
hits' moments are then placed at clip precision by a moment search inside each hit video.
``search-moments`` ranks moments from every video: clip-level hybrid search
(:mod:`vidscope.agents.moments`). Both load their models once per process through the backend
registry and publish their result as a Prefect artifact when they run as a flow.

``run_search`` and ``run_search_moments`` are the entry points of the CLI, the HTTP API and the MCP
server (through :class:`vidscope.Library`). Like ``run_ask`` (:func:`~vidscope.flows.runs.run_query`),
they run :func:`search_videos` / :func:`find_moments` in-process, or, when a Prefect server is
running, as the flows wrapping those same functions (:data:`SEARCH`, :data:`SEARCH_MOMENTS`; the
module's attributes ``search`` and ``search_moments_flow``, built on first access, the first the
deployment ``search/on-demand``). Importing this module imports no Prefect.
"""

from __future__ import annotations

import time
from typing import Any

from vidscope.agents.languages import plan_query
from vidscope.agents.mavis.search import (
    EXPLICIT,
    FUSIONS,
    DroppedVideo,
    LibraryEmpty,
    SearchHit,
    SearchResult,
    ensure_library,
    search_library,
    thresholds_for,
)
from vidscope.agents.moments import (
    MomentFilters,
    MomentSearch,
    best_moments,
    search_moments,
    search_moments_by_image,
)
from vidscope.core.errors import BackendUnavailable
from vidscope.core.settings import SearchSettings, Settings, disable_telemetry
from vidscope.core.timecodes import fmt_time
from vidscope.flows.runs import QueryFlow, module_flow, publish_markdown, run_query
from vidscope.flows.summarize import chapter_moments
from vidscope.models import registry
from vidscope.models.open_store import open_store
from vidscope.models.protocols.chat import ChatModel
from vidscope.models.protocols.image import Image
from vidscope.models.protocols.image_text import ImageTextEmbedder
from vidscope.models.protocols.text_embedder import TextEmbedder
from vidscope.models.protocols.video_text import VideoTextEmbedder
from vidscope.storage.store import Store

__all__ = [
    "DroppedVideo",
    "LibraryEmpty",
    "MomentFilters",
    "MomentSearch",
    "SearchHit",
    "SearchResult",
    "VisualSearchOff",
    "find_moments",
    "find_moments_by_image",
    "moments_markdown",
    "result_markdown",
    "run_search",
    "run_search_moments",
    "run_search_moments_by_image",
    "search_videos",
]


def search_videos(
    query: str, settings: Settings | None = None, options: SearchSettings | None = None
) -> SearchResult:
    """Search the library for ``query`` with the MAVIS pipeline and publish the result."""
    from vidscope.core.settings import get_settings

    settings = settings or get_settings()
    spec = settings.models.text_embedder
    # The thresholds and where they came from (calibrated, explicit, defaulted with a warning).
    calibrated, thresholds = thresholds_for(settings.search, spec)
    if options is not None and (options.tau_soft, options.tau_hard) != (
        thresholds.tau_soft,
        thresholds.tau_hard,
    ):
        thresholds = thresholds.model_copy(
            update={
                "tau_soft": options.tau_soft,
                "tau_hard": options.tau_hard,
                "source": EXPLICIT,
                "warning": None,
            }
        )
    options = options or calibrated
    started = time.perf_counter()
    store = open_store(settings)
    embedder = _embedder(settings)
    notes: list[str] = []
    try:
        chat = registry.planner_model(settings)
    except BackendUnavailable as exc:
        chat = None
        notes.append(f"the chat model is unavailable ({exc}); the rule-based planner was used")
    try:
        image_text = registry.image_text(settings)
    except BackendUnavailable as exc:
        image_text = None
        notes.append(f"visual search is off: {exc.brief}. Captions were compared instead")
    video_text = _video_text(settings, notes)
    result = search_library(
        store,
        query,
        embedder=embedder,
        options=options,
        chat=chat,
        image_text=image_text,
        video_text=video_text,
        frame_seconds=1.0 / settings.ingest.frame_fps,
        thresholds=thresholds,
    )
    result.notes = notes + result.notes
    if result.rerank == "caption":
        _clip_moments(store, embedder, result, video_text, image_text)
    result.seconds = round(time.perf_counter() - started, 4)
    _publish(result)
    return result


def _embedder(settings: Settings) -> TextEmbedder:
    embedder = registry.text_embedder(settings)
    if embedder is None:
        raise BackendUnavailable(
            "text_embedder",
            "none",
            "the settings",
            "search needs a text embedder: set [models] text_embedder",
        )
    return embedder


def _video_text(settings: Settings, notes: list[str]) -> VideoTextEmbedder | None:
    """The configured video–text model, or ``None`` (with a note when it cannot be loaded)."""
    try:
        return registry.video_text(settings)
    except BackendUnavailable as exc:
        notes.append(f"the video-text model is unavailable ({exc}); clips were not scored with it")
        return None


def _planner(settings: Settings, notes: list[str]) -> ChatModel | None:
    """The planner model (to translate a query), or ``None`` with a note when it cannot be loaded."""
    try:
        return registry.planner_model(settings)
    except BackendUnavailable as exc:
        notes.append(f"the planner is unavailable ({exc.brief}); the query was not translated")
        return None


def _image_text(settings: Settings, notes: list[str]) -> ImageTextEmbedder | None:
    """The configured image–text model, or ``None`` (with a note saying visual search is off)."""
    try:
        return registry.image_text(settings)
    except BackendUnavailable as exc:
        notes.append(f"visual search is off: {exc.brief}")
        return None


class VisualSearchOff(RuntimeError):
    """Search by image needs the image–text model, which is not configured or cannot be had."""


def find_moments_by_image(
    image: Image,
    settings: Settings | None = None,
    k: int = 10,
    filters: MomentFilters | None = None,
    label: str = "image",
) -> MomentSearch:
    """The ``k`` moments whose frames look most like ``image`` (raises :class:`VisualSearchOff`)."""
    from vidscope.core.settings import get_settings

    settings = settings or get_settings()
    store = open_store(settings)
    try:
        model = registry.image_text(settings)
    except BackendUnavailable as exc:
        raise VisualSearchOff(f"visual search is off: {exc.brief}") from exc
    if model is None:
        raise VisualSearchOff("visual search is off: no image-text model is configured (models.image_text)")
    result = search_moments_by_image(store, image, image_text=model, k=k, filters=filters, label=label)
    publish_markdown("search-moments", moments_markdown(result), f"moments: {result.query[:80]}")
    return result


def run_search_moments_by_image(
    settings: Settings,
    image: Image,
    *,
    k: int = 10,
    filters: MomentFilters | None = None,
    label: str = "image",
) -> MomentSearch:
    """Moments across the library that look like ``image`` (search by image), in this process.

    Raises ``ValueError`` for bad filters, :class:`LibraryEmpty` when nothing is ingested and
    :class:`VisualSearchOff` without a usable image–text model.
    """
    disable_telemetry()
    if not 1 <= k <= 1000:
        raise ValueError(f"k must be between 1 and 1000, got {k}")
    if filters is not None:
        filters.check()
    store = open_store(settings)
    if store.count(store.clips) == 0:
        raise LibraryEmpty("the library is empty: no clips have been ingested yet (vidscope ingest)")
    return find_moments_by_image(image, settings, k, filters, label)


def _clip_moments(
    store: Store,
    embedder: TextEmbedder,
    result: SearchResult,
    video_text: VideoTextEmbedder | None,
    image_text: ImageTextEmbedder | None = None,
) -> None:
    """Replace the hits' window-caption moments (minutes long) by their best clip moments."""
    found = best_moments(
        store,
        result.query,
        [h.video_id for h in result.hits],
        embedder=embedder,
        video_text=video_text,
        image_text=image_text,
    )
    for hit in result.hits:
        if found.get(hit.video_id):
            hit.moments = [(m.start, m.end) for m in found[hit.video_id]]


def find_moments(
    query: str,
    settings: Settings | None = None,
    k: int = 10,
    filters: MomentFilters | None = None,
    show_all: bool = False,
) -> MomentSearch:
    """The ``k`` best moments across the library for ``query`` (clip-level hybrid search); those
    under ``[search] moment_min_relevance`` (calibrated per text embedder) only with ``show_all``."""
    from vidscope.core.settings import get_settings

    settings = settings or get_settings()
    store = open_store(settings)
    notes: list[str] = []
    video_text = _video_text(settings, notes)
    bar = settings.search.for_embedder(settings.models.text_embedder).moment_min_relevance
    image_text = _image_text(settings, notes)
    embedder = _embedder(settings)
    # A query in another language than the videos' speech: translated by the planner, or said.
    plan = plan_query(
        query,
        store,
        embedder_spec=settings.models.text_embedder,
        planner=lambda: _planner(settings, notes),
        video_ids=filters.videos if filters is not None else None,
    )
    result = search_moments(
        store,
        plan.query,
        embedder=embedder,
        k=k,
        filters=filters,
        video_text=video_text,
        min_relevance=bar,
        min_visual_similarity=settings.search.moment_min_visual_similarity,
        show_all=show_all,
        image_text=image_text,
    )
    result.notes = notes + plan.notes + result.notes
    # Chapters whose title and summary match, as moments of kind "chapter" after the clip moments
    # (a third of the k places at most).
    chapters = chapter_moments(
        store,
        result.query,
        embedder.embed,
        near=result.moments[: k - k // 3],  # the clip moments that will be shown
        filters=filters,
        min_relevance=0 if show_all else bar,
        k=k // 3,
    )
    result.moments = result.moments[: k - len(chapters)] + chapters
    result.query = query.strip()  # what was asked; a translation searched is in the notes
    publish_markdown("search-moments", moments_markdown(result), f"moments: {result.query[:80]}")
    return result


def moments_markdown(result: MomentSearch) -> str:
    """The ranked moments as Markdown (the Prefect artifact)."""
    lines = [f"## moments: {result.query}", "", f"{len(result.moments)} moments, {result.seconds:.3f} s.", ""]
    lines += ["| # | video | from | to | relevance | text |", "|---|---|---|---|---|---|"]
    for rank, m in enumerate(result.moments, 1):
        text = m.text[:160].replace("\n", " ")
        shown = "–" if m.relevance is None else f"{m.relevance:.2f}"
        lines.append(
            f"| {rank} | {_cell(m.file)} | {fmt_time(m.start)} | {fmt_time(m.end)} | {shown} | "
            f"{_cell(text)} |"
        )
    lines += [f"> {n}" for n in result.notes]
    return "\n".join(lines)


#: The ``search`` flow: :func:`search_videos` as a flow run (the deployment ``search/on-demand``).
SEARCH = QueryFlow(search_videos, "search", "search {query:.40}", attribute="search")
#: The ``search-moments`` flow: :func:`find_moments` as a flow run.
SEARCH_MOMENTS = QueryFlow(
    find_moments, "search-moments", "moments {query:.40}", attribute="search_moments_flow"
)


def __getattr__(name: str) -> Any:
    """The flows ``search`` and ``search_moments_flow``, built (importing Prefect) on first access."""
    return module_flow(__name__, name, (SEARCH, SEARCH_MOMENTS))


def run_search_moments(
    settings: Settings,
    query: str,
    *,
    k: int = 10,
    filters: MomentFilters | None = None,
    show_all: bool = False,
) -> MomentSearch:
    """Moments across the library for ``query`` (the ``search-moments`` flow when a server runs).

    Raises ``ValueError`` for an empty query or bad filters and :class:`LibraryEmpty` when no clip
    has been ingested yet.
    """
    disable_telemetry()
    if not query.strip():
        raise ValueError("the query is empty")
    if not 1 <= k <= 1000:
        raise ValueError(f"k must be between 1 and 1000, got {k}")
    if filters is not None:
        filters.check()
    store = open_store(settings)
    if store.count(store.clips) == 0:  # before a flow run is made for nothing
        raise LibraryEmpty("the library is empty: no clips have been ingested yet (vidscope ingest)")
    return run_query("search", settings, SEARCH_MOMENTS, query.strip(), settings, k, filters, show_all)


def result_markdown(result: SearchResult) -> str:
    """The plan, the ranked hits and the dropped videos as Markdown (the Prefect artifact)."""
    dims = list(result.plan)
    lines = [f"## search: {result.query}", ""]
    lines.append(
        "**Plan** (" + result.planner + "): " + "; ".join(f"{d} = {i!r}" for d, i in result.plan.items())
    )
    lines += [
        "",
        f"Fusion **{result.fusion}**, pool {result.pool_size} videos, fine stage {result.fine_comparisons} "
        f"videos ({result.rerank}), {result.seconds:.2f} s.",
        "",
        "| # | video | score | " + " | ".join(dims) + " | caption | moments |",
        "|---|---|---|" + "---|" * len(dims) + "---|---|",
    ]
    for rank, hit in enumerate(result.hits, 1):
        moments = ", ".join(f"{fmt_time(a)}–{fmt_time(b)}" for a, b in hit.moments)
        phis = " | ".join(f"{hit.scores.get(d, 0.0):.2f}" for d in dims)
        caption = hit.caption[:100].replace("|", "\\|")
        lines.append(
            f"| {rank} | {_cell(hit.file_name)} | {hit.score:.3f} | {phis} | {caption} | {moments} |"
        )
    if result.dropped:
        lines += ["", "**Dropped**", ""]
        lines += [f"- {_cell(d.file_name)}: {d.reason}" for d in result.dropped[:50]]
    if result.notes:
        lines += ["", *[f"> {n}" for n in result.notes]]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _publish(result: SearchResult) -> None:
    """Store the result as a Markdown artifact of this flow run (shown in the Prefect UI)."""
    publish_markdown("search-result", result_markdown(result), f"search: {result.query[:80]}")


def run_search(
    settings: Settings,
    query: str,
    *,
    k: int | None = None,
    fusion: str | None = None,
    tau_soft: float | None = None,
    tau_hard: float | None = None,
) -> SearchResult:
    """Search the library for ``query``; arguments left ``None`` come from ``settings.search``.

    Raises ``ValueError`` for an empty query or bad options and
    :class:`~vidscope.agents.mavis.search.LibraryEmpty` when nothing has been parsed into the library.
    """
    disable_telemetry()
    if not query.strip():
        raise ValueError("the query is empty")
    if fusion is not None and fusion not in FUSIONS:
        raise ValueError(f"unknown fusion {fusion!r}; choose one of {', '.join(FUSIONS)}")
    updates = {"k": k, "fusion": fusion, "tau_soft": tau_soft, "tau_hard": tau_hard}
    base = settings.search.for_embedder(settings.models.text_embedder)
    options = SearchSettings.model_validate(
        {**base.model_dump(), **{key: v for key, v in updates.items() if v is not None}}
    )
    ensure_library(open_store(settings))  # before a flow run is made for nothing
    return run_query("search", settings, SEARCH, query.strip(), settings, options)
