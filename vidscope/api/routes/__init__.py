"""The API's routes, one module per resource; :func:`~vidscope.api.app.create_app` includes them.

Every resource but the session lives behind the bearer token: its router comes from
:func:`guarded_router`, so the dependency and the documented error responses are the same on all.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from vidscope.api.state import require_token

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
