"""``/api/health`` and ``/api/login``: the only routes served without the token."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response

from vidscope.api.models import Health, Login
from vidscope.api.routes import MALFORMED
from vidscope.api.security import SESSION_COOKIE, session_value
from vidscope.api.state import State

router = APIRouter(prefix="/api", tags=["session"], responses=dict(MALFORMED))


@router.get("/health", response_model=Health)
def health(state: State) -> Health:
    """Liveness, and whether the other endpoints need a token."""
    return Health(auth_required=state.auth.token is not None)


@router.post("/login", status_code=204, responses={401: {"description": "Wrong token."}})
def login(body: Login, response: Response, state: State) -> Response:
    """Exchange the bearer token for an HttpOnly session cookie (used by the web page)."""
    auth = state.auth
    if auth.token is None:
        return Response(status_code=204)
    if not auth.check_token(body.token):
        raise HTTPException(401, "wrong token")
    reply = Response(status_code=204)
    reply.set_cookie(SESSION_COOKIE, session_value(auth.token), httponly=True, samesite="strict", path="/")
    return reply
