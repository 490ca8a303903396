"""The query flows over the whole library: ``search`` (videos, MAVIS) and ``search-moments``.

Each is a thin Prefect wrapper around the work in :mod:`vidscope.flows.search_work`, so a flow run
(with its result as an artifact) is what the Prefect UI shows; the deployment ``search/on-demand``
points at :func:`search`. The entry points :func:`run_search` and :func:`run_search_moments`
(re-exported here) use these flows when a Prefect server is running and call the work directly
otherwise.
"""

from __future__ import annotations

from prefect import flow

from vidscope.core.settings import SearchSettings, Settings
from vidscope.flows.search_work import (
    DroppedVideo,
    LibraryEmpty,
    MomentFilters,
    MomentSearch,
    SearchHit,
    SearchResult,
    find_moments,
    moments_markdown,
    result_markdown,
    run_search,
    run_search_moments,
    search_videos,
)

__all__ = [
    "DroppedVideo",
    "LibraryEmpty",
    "MomentFilters",
    "MomentSearch",
    "SearchHit",
    "SearchResult",
    "moments_markdown",
    "result_markdown",
    "run_search",
    "run_search_moments",
    "search",
    "search_moments_flow",
]


@flow(name="search", flow_run_name="search {query:.40}", validate_parameters=False, log_prints=False)
def search(
    query: str, settings: Settings | None = None, options: SearchSettings | None = None
) -> SearchResult:
    """Search the library for ``query`` with the MAVIS pipeline and publish the result."""
    return search_videos(query, settings, options)


@flow(
    name="search-moments",
    flow_run_name="moments {query:.40}",
    validate_parameters=False,
    log_prints=False,
)
def search_moments_flow(
    query: str,
    settings: Settings | None = None,
    k: int = 10,
    filters: MomentFilters | None = None,
    show_all: bool = False,
) -> MomentSearch:
    """The ``k`` best moments across the library for ``query`` (clip-level hybrid search)."""
    return find_moments(query, settings, k, filters, show_all)
