"""``GET /api/search`` and ``GET /api/moments``: the videos, or the moments, across the library
that match a description; ``POST /api/search/image``: the moments that look like a picture."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import File, HTTPException, Query, UploadFile
from pydantic import BeforeValidator

from vidscope.api.models import NOT_BLANK, MomentsResponse, SearchResponse, search_response
from vidscope.api.routes import guarded_router
from vidscope.api.state import State
from vidscope.core.images import MAX_IMAGE_BYTES  # the CLI's and MCP's cap too

router = guarded_router()


def _not_a_number(value: object) -> object:
    """Refuse a number where the schema promises an ISO 8601 date-time: pydantic would read
    ``since=-1.2e-132`` as seconds since 1970, which the published schema does not allow."""
    if isinstance(value, int | float) or (isinstance(value, str) and _is_number(value)):
        raise ValueError("give a date-time such as 2026-01-31T12:00:00Z, not a number")
    return value


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


#: A date-time as the schema publishes it (``format: date-time``), and nothing else.
IsoDateTime = Annotated[datetime, BeforeValidator(_not_a_number)]


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
        import vidscope.flows.search  # noqa: F401 (what Library.search runs)
    except ImportError as exc:
        raise HTTPException(501, f"library search is not available: {exc}") from exc
    from vidscope.agents.mavis.search import LibraryEmpty
    from vidscope.core.errors import BackendUnavailable

    try:
        return search_response(state.library().search(q.strip(), k=k))
    except LibraryEmpty as exc:
        raise HTTPException(409, str(exc)) from exc
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from exc
    except BackendUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc


@router.get(
    "/moments",
    response_model=MomentsResponse,
    responses={
        404: {"description": "A video filter names no ingested video."},
        409: {"description": "The library is empty (no clips ingested yet)."},
        422: {"description": "Bad query or filters."},
        503: {"description": "The text embedder is not available."},
    },
    tags=["questions"],
)
def moments(
    q: Annotated[
        str, Query(min_length=1, max_length=2000, pattern=NOT_BLANK, description="What to look for.")
    ],
    state: State,
    k: Annotated[int, Query(ge=1, le=100, description="Moments to return.")] = 10,
    video: Annotated[
        list[str] | None, Query(description="Only in these videos (id, 6+ character prefix or file name).")
    ] = None,
    start: Annotated[float | None, Query(ge=0, description="Only moments ending after this second.")] = None,
    end: Annotated[float | None, Query(ge=0, description="Only moments starting before this second.")] = None,
    since: Annotated[IsoDateTime | None, Query(description="Only videos ingested at or after this.")] = None,
    until: Annotated[IsoDateTime | None, Query(description="Only videos ingested before this.")] = None,
    show_all: Annotated[
        bool,
        Query(
            alias="all", description="Also moments under the relevance bar ([search] moment_min_relevance)."
        ),
    ] = False,
) -> MomentsResponse:
    """Moments of every video that match ``q``: clips found by meaning and by the words said or
    shown in them, adjacent ones merged; each with its video, file, start, end, score and text."""
    from vidscope.agents.mavis.search import LibraryEmpty
    from vidscope.agents.moments import MomentFilters
    from vidscope.core.errors import BackendUnavailable
    from vidscope.storage.videos import VideoNotFound

    library = state.library()
    try:
        # Resolved before the ranges are looked at: a filter naming no video is a 404 whatever
        # the ranges (CI's random fuzz run found ``video=true`` answered 200 beside an empty range).
        ids = [library.video(ref).video_id for ref in video] if video else None
    except VideoNotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    ranges = MomentFilters(start=start, end=end, added_after=since, added_before=until)
    try:
        ranges.check()
    except ValueError as exc:
        # Schema-valid, so not a client error: no moment can fall in an empty time or date range
        # (the CLI, where it is likely a typo, refuses it instead).
        return MomentsResponse(query=q.strip(), notes=[str(exc)])
    try:
        filters = MomentFilters(videos=ids, start=start, end=end, added_after=since, added_before=until)
        found = library.search(q.strip(), moments=True, k=k, filters=filters, show_all=show_all)
    except VideoNotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    except LibraryEmpty as exc:
        raise HTTPException(409, str(exc)) from exc
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from exc
    except BackendUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc
    return MomentsResponse(**found.model_dump())


@router.post(
    "/search/image",
    response_model=MomentsResponse,
    responses={
        409: {"description": "The library is empty (no clips ingested yet)."},
        413: {"description": "The picture is larger than 20 MB."},
        422: {"description": "The upload is not an image, or has more pixels than search decodes."},
        503: {"description": "Visual search is off (no image-text model, or it cannot be had)."},
    },
    tags=["questions"],
)
def search_image(
    state: State,
    image: Annotated[UploadFile, File(description="The picture to find (JPEG, PNG, WebP, …).")],
    k: Annotated[int, Query(ge=1, le=100, description="Moments to return.")] = 10,
) -> MomentsResponse:
    """Moments of every video whose frames look like the uploaded picture (visual search), in the
    same shape as ``GET /api/moments``."""
    from vidscope.agents.mavis.search import LibraryEmpty
    from vidscope.flows.search import VisualSearchOff

    data = image.file.read(MAX_IMAGE_BYTES + 1)
    if len(data) > MAX_IMAGE_BYTES:
        raise HTTPException(413, "the picture is larger than 20 MB")
    label = (image.filename or "image").rsplit("/", 1)[-1][:200]
    try:
        # Not a picture, or too many pixels: ValueError (422), before any model is loaded.
        found = state.library().search_image(data, k=k, label=label)
    except LibraryEmpty as exc:
        raise HTTPException(409, str(exc)) from exc
    except VisualSearchOff as exc:
        raise HTTPException(503, str(exc)) from exc
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from exc
    return MomentsResponse(**found.model_dump())
