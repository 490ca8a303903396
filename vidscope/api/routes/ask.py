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

import json
import logging
import queue
import threading
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import HTTPException, Request
from fastapi.responses import Response, StreamingResponse

from vidscope.api.models import AskRequest, AskResponse
from vidscope.api.routes import (
    BUSY,
    POLL_SECONDS,
    QuestionAbandoned,
    answer_while_connected,
    guarded_router,
    stop_when,
    take_question_slot,
)
from vidscope.api.state import ApiState, State

router = guarded_router()
log = logging.getLogger(__name__)


def _answer(state: ApiState, body: AskRequest, on_step: Any = None) -> AskResponse:
    """Answer ``body`` and remember the answer for ``/api/traces``."""
    from vidscope.flows.ask import run_ask

    result = run_ask(state.settings, body.video, body.question, body.options, on_step, agent=body.agent)
    answer = AskResponse(**result.model_dump(), query_id=uuid.uuid4().hex[:16])
    state.traces.put(answer)
    return answer


@router.post(
    "/ask",
    response_model=AskResponse,
    responses={404: {"description": "No such video."}, 422: {"description": "Bad question."}, **BUSY},
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


@router.post(
    "/ask/stream",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": 'NDJSON: a {"step": TraceStep} line per agent step, then {"result": '
            'AskResponse} or {"error": {"status", "type", "message"}} (404: no such video; '
            "422: bad question; 500: the question failed).",
            "content": {"application/x-ndjson": {}},
        },
        **BUSY,
    },
    tags=["questions"],
)
def ask_stream(body: AskRequest, state: State, request: Request) -> StreamingResponse:
    """Answer a question about one video, streaming each agent step as it happens."""
    events: queue.Queue[dict[str, Any] | None] = queue.Queue()
    abandoned = threading.Event()
    take_question_slot(state)

    def work() -> None:
        from vidscope.storage.videos import VideoNotFound

        def on_step(step: Any) -> None:
            events.put({"step": step.model_dump(mode="json")})

        try:
            answer = _answer(state, body, stop_when(abandoned, on_step))
            events.put({"result": answer.model_dump(mode="json")})
        except QuestionAbandoned:
            log.info("ask %r about %r: the client left, the question stopped", body.question, body.video)
        except Exception as exc:  # noqa: BLE001 - the client gets one line for any failure
            status = 404 if isinstance(exc, VideoNotFound) else 422 if isinstance(exc, ValueError) else 500
            if status == 500:
                log.error("ask %r about %r failed", body.question, body.video, exc_info=exc)
            message = (str(exc).strip().splitlines() or [""])[0]
            events.put({"error": {"status": status, "type": type(exc).__name__, "message": message}})
        finally:
            state.questions.give_back()
            events.put(None)

    # The answer runs beside the response, so each step goes out as soon as the agent takes it.
    try:
        threading.Thread(target=work, name="vidscope-ask-stream", daemon=True).start()
    except RuntimeError:  # no thread to be had: the slot goes back
        state.questions.give_back()
        raise

    def next_event() -> dict[str, Any] | None | bool:
        try:
            return events.get(timeout=POLL_SECONDS)
        except queue.Empty:
            return False

    async def lines() -> AsyncIterator[str]:
        # However the stream ends (answer sent, client gone, server stopping), a question still
        # running is told to stop: nobody would read what it finds.
        try:
            while (event := await anyio.to_thread.run_sync(next_event)) is not None:
                if event is False:
                    if await request.is_disconnected():
                        return
                    continue
                yield json.dumps(event, ensure_ascii=False) + "\n"
        finally:
            abandoned.set()

    return StreamingResponse(lines(), media_type="application/x-ndjson")
