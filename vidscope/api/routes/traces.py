"""``/api/traces/{query_id}``: a recent answer with its full agent trace, fetched after the answer."""

from __future__ import annotations

from typing import Annotated

from fastapi import HTTPException
from fastapi import Path as PathParam

from vidscope.api.models import AskResponse
from vidscope.api.routes import guarded_router
from vidscope.api.state import State

QueryId = Annotated[str, PathParam(pattern=r"^[0-9a-f]{16}$")]

router = guarded_router()


@router.get(
    "/traces/{query_id}",
    response_model=AskResponse,
    responses={404: {"description": "Unknown or forgotten query."}},
    tags=["questions"],
)
def get_trace(query_id: QueryId, state: State) -> AskResponse:
    """A recent answer with its full agent trace (kept in memory for the last 256 questions)."""
    found = state.traces.get(query_id)
    if found is None:
        raise HTTPException(404, f"no trace for query {query_id} (traces live in memory)")
    return found
