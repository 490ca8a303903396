"""``GET /api/search``: the videos across the library that match a description."""

from __future__ import annotations

from typing import Annotated

from fastapi import HTTPException, Query

from vidscope.api.models import NOT_BLANK, SearchResponse, search_response
from vidscope.api.routes import guarded_router
from vidscope.api.state import State

router = guarded_router()


@router.get(
    "/search",
    response_model=SearchResponse,
    responses={
        409: {"description": "The search library is empty (nothing parsed yet)."},
        422: {"description": "Bad query or options."},
        501: {"description": "Library search is not available in this build."},
        503: {"description": "A model search needs is not available."},
    },
    tags=["questions"],
)
def search(
    q: Annotated[
        str, Query(min_length=1, max_length=2000, pattern=NOT_BLANK, description="What to look for.")
    ],
    state: State,
    k: Annotated[int | None, Query(ge=1, le=100, description="Videos to return.")] = None,
) -> SearchResponse:
    """Videos across the library that match ``q``, with their best moments."""
    if not q.strip():
        raise HTTPException(422, "the query is empty")
    try:
        from vidscope.flows.search import LibraryEmpty, run_search
    except ImportError as exc:
        raise HTTPException(501, f"library search is not available: {exc}") from exc
    from vidscope.core.errors import BackendUnavailable

    try:
        return search_response(run_search(state.settings, q.strip(), k=k))
    except LibraryEmpty as exc:
        raise HTTPException(409, str(exc)) from exc
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from exc
    except BackendUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc
