"""The API's routes, one module per resource; :func:`~vidscope.api.app.create_app` includes them.

Every resource but the session lives behind the bearer token: its router comes from
:func:`guarded_router`, so the dependency and the documented error responses are the same on all.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException

from vidscope.api.state import ApiState, require_token

#: Answers any route may give before it runs (the body-limit middleware's).
MALFORMED: dict[int | str, dict[str, Any]] = {
    400: {"description": "Malformed request (e.g. a body that is not JSON)."},
    413: {"description": "Request body over [api] max_request_bytes."},
}

#: Answers any token-guarded route may give before it runs.
GUARDED: dict[int | str, dict[str, Any]] = {
    **MALFORMED,
    401: {"description": "Missing or wrong bearer token."},
    403: {
        "description": "No token is configured and the client is not on loopback, or the request "
        "is addressed to a host name that is not loopback nor in [api] allowed_hosts."
    },
}


def guarded_router() -> APIRouter:
    """A router under ``/api`` whose every route requires the configured token."""
    return APIRouter(prefix="/api", dependencies=[Depends(require_token)], responses=dict(GUARDED))


#: Seconds a client refused for lack of a free question slot is told to wait before asking again.
RETRY_AFTER = 5
#: The answer the question routes (ask, ask/stream, compare) give when every slot is taken.
BUSY: dict[int | str, dict[str, Any]] = {
    429: {"description": "[api] max_questions questions are being answered; retry after Retry-After s."}
}


def take_question_slot(state: ApiState) -> None:
    """Take one of the ``[api] max_questions`` slots, or refuse the request (429, Retry-After);
    the caller gives it back (``state.questions.give_back()``) when the question ends."""
    if not state.questions.take():
        raise HTTPException(
            429,
            f"{state.questions.limit} questions are being answered, the most this API takes at once "
            f"([api] max_questions); ask again in a few seconds",
            headers={"Retry-After": str(RETRY_AFTER)},
        )
