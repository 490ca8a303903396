"""``POST /api/ask``: answer a question about one video; the answer is kept for ``/api/traces``."""

from __future__ import annotations

import uuid

from fastapi import HTTPException

from vidscope.api.models import AskRequest, AskResponse
from vidscope.api.routes import guarded_router
from vidscope.api.state import State

router = guarded_router()


@router.post(
    "/ask",
    response_model=AskResponse,
    responses={404: {"description": "No such video."}, 422: {"description": "Bad question."}},
    tags=["questions"],
)
def ask(body: AskRequest, state: State) -> AskResponse:
    """Answer a question about one video, citing the moments that support the answer."""
    from vidscope.flows.ask import run_ask
    from vidscope.storage.videos import VideoNotFound

    try:
        result = run_ask(state.settings, body.video, body.question, body.options, agent=body.agent)
    except VideoNotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from exc
    answer = AskResponse(**result.model_dump(), query_id=uuid.uuid4().hex[:16])
    state.traces.put(answer)
    return answer
