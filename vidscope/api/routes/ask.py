"""``POST /api/ask``: answer a question about one video; the answer is kept for ``/api/traces``.

``POST /api/ask/stream`` answers the same request as it happens, in NDJSON: one ``{"step": …}``
line per agent step, then ``{"result": …}`` (an :class:`AskResponse`) or ``{"error": …}``. It is
how ``vidscope ask`` hands a question to a running API (warm models and store, Prefect imported)
and still shows each step live.

At most ``[api] max_questions`` questions run at once; one more gets 429 with ``Retry-After``. A
question whose client leaves, streamed or not, stops at its next step (a model call already made
finishes; no further one is made), and frees its slot.
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import HTTPException, Request
from fastapi.responses import Response, StreamingResponse

from vidscope.api.models import AskRequest, AskResponse
from vidscope.api.routes import (
    BUSY,
    MODEL_DOWN,
    answer_while_connected,
    guarded_router,
    model_failure,
    model_unavailable,
    take_question_slot,
)
from vidscope.api.state import ApiState, State
from vidscope.api.streaming import stream_question, stream_responses

router = guarded_router()


def _answer(state: ApiState, body: AskRequest, on_step: Any = None) -> AskResponse:
    """Answer ``body`` and remember the answer for ``/api/traces``."""
    result = state.library().ask(
        body.video, body.question, options=body.options, agent=body.agent, on_step=on_step
    )
    answer = AskResponse(**result.model_dump(), query_id=uuid.uuid4().hex[:16])
    state.traces.put(answer)
    return answer


@router.post(
    "/ask",
    response_model=AskResponse,
    responses={
        404: {"description": "No such video."},
        422: {"description": "Bad question."},
        **BUSY,
        **MODEL_DOWN,
    },
    tags=["questions"],
)
async def ask(body: AskRequest, state: State, request: Request) -> AskResponse | Response:
    """Answer a question about one video, citing the moments that support the answer."""
    from vidscope.storage.videos import VideoNotFound

    take_question_slot(state)
    try:
        return await answer_while_connected(
            request, state, lambda on_step: _answer(state, body, on_step), "vidscope-ask"
        )
    except VideoNotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from exc
    except Exception as exc:
        failure = model_failure(exc)
        if failure is None:
            raise
        raise model_unavailable(failure, f"ask about {body.video!r}") from exc


@router.post(
    "/ask/stream",
    response_class=StreamingResponse,
    responses=stream_responses("AskResponse"),
    tags=["questions"],
)
def ask_stream(body: AskRequest, state: State, request: Request) -> StreamingResponse:
    """Answer a question about one video, streaming each agent step as it happens."""
    what = f"ask {body.question!r} about {body.video!r}"
    return stream_question(state, request, lambda on_step: _answer(state, body, on_step), "ask", what)
