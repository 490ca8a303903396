"""The ``search`` query flow: find the videos of the library that match a description (MAVIS).

The pipeline itself (planner, per-dimension agents, fusion with a veto, fine rerank) lives in
:mod:`vidscope.agents.mavis`; this flow loads the models it uses (once per process, through the
backend registry), runs it, and publishes the ranked videos as a Prefect artifact. ``run_search`` is
the entry point of the CLI and the HTTP API; like ``run_ask`` it skips the flow's heartbeat thread,
which would add ~1.1 s to every query.
"""

from __future__ import annotations

import time

from prefect import flow

from vidscope.agents.mavis import (
    FUSIONS,
    DroppedVideo,
    LibraryEmpty,
    SearchHit,
    SearchResult,
    ensure_library,
    search_library,
)
from vidscope.core.errors import BackendUnavailable
from vidscope.core.settings import SearchSettings, Settings, disable_telemetry
from vidscope.core.timecodes import fmt_time
from vidscope.flows.runs import publish_markdown, query_run
from vidscope.models import registry
from vidscope.models.open_store import open_store

__all__ = [
    "DroppedVideo",
    "LibraryEmpty",
    "SearchHit",
    "SearchResult",
    "result_markdown",
    "run_search",
    "search",
]


@flow(name="search", flow_run_name="search {query:.40}", validate_parameters=False, log_prints=False)
def search(
    query: str, settings: Settings | None = None, options: SearchSettings | None = None
) -> SearchResult:
    """Search the library for ``query`` with the MAVIS pipeline and publish the result."""
    from vidscope.core.settings import get_settings

    settings = settings or get_settings()
    options = options or settings.search
    started = time.perf_counter()
    store = open_store(settings)
    embedder = registry.text_embedder(settings)
    if embedder is None:
        raise BackendUnavailable(
            "text_embedder",
            "none",
            "the settings",
            "search needs a text embedder: set [models] text_embedder",
        )
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
        notes.append(f"the image-text model is unavailable ({exc}); captions were compared instead")
    result = search_library(
        store,
        query,
        embedder=embedder,
        options=options,
        chat=chat,
        image_text=image_text,
        frame_seconds=1.0 / settings.ingest.frame_fps,
    )
    result.notes = notes + result.notes
    result.seconds = round(time.perf_counter() - started, 4)
    _publish(result)
    return result


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
    :class:`~vidscope.agents.mavis.LibraryEmpty` when nothing has been parsed into the library.
    """
    disable_telemetry()
    if not query.strip():
        raise ValueError("the query is empty")
    if fusion is not None and fusion not in FUSIONS:
        raise ValueError(f"unknown fusion {fusion!r}; choose one of {', '.join(FUSIONS)}")
    updates = {"k": k, "fusion": fusion, "tau_soft": tau_soft, "tau_hard": tau_hard}
    options = SearchSettings.model_validate(
        {**settings.search.model_dump(), **{key: v for key, v in updates.items() if v is not None}}
    )
    ensure_library(open_store(settings))  # before a flow run is made for nothing
    with query_run("search"):
        return search(query.strip(), settings, options)
