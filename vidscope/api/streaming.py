"""A question answered as it happens, in NDJSON: what ``/api/ask/stream`` and ``/api/compare/stream``
share.

One ``{"step": TraceStep}`` line per agent step, then ``{"result": …}`` or ``{"error": {"status",
"type", "message"}}`` (404: no such video; 422: bad question; 500: the question failed). The
question holds one of the ``[api] max_questions`` slots while it runs; a question whose client
leaves stops at its next step (a model call already made finishes; no further one is made) and
frees its slot.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from fastapi import Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from vidscope.api.routes import POLL_SECONDS, QuestionAbandoned, stop_when, take_question_slot
from vidscope.api.state import ApiState

log = logging.getLogger(__name__)


#: Receives each agent step (a ``TraceStep``) as the agent takes it.
OnStep = Callable[[Any], None]


def _error_line(exc: Exception) -> dict[str, Any]:
    """The stream's last line for a question that failed with ``exc`` (503: the model server)."""
    from vidscope.api.routes import model_failure
    from vidscope.storage.videos import VideoNotFound

    failure = model_failure(exc)
    shown: BaseException = exc if failure is None else failure
    if failure is not None:
        status = 503
    else:
        status = 404 if isinstance(exc, VideoNotFound) else 422 if isinstance(exc, ValueError) else 500
    message = (str(shown).strip().splitlines() or [""])[0]
    return {"error": {"status": status, "type": type(shown).__name__, "message": message}}


def stream_question(
    state: ApiState, request: Request, answer: Callable[[OnStep], BaseModel], kind: str, what: str
) -> StreamingResponse:
    """Run ``answer(on_step)`` beside the response and stream its steps, then its result.

    Takes a question slot first (429 when none is free). The work runs in a thread named
    ``vidscope-<kind>-stream``; ``what`` names the question in logs.
    """
    events: queue.Queue[dict[str, Any] | None] = queue.Queue()
    abandoned = threading.Event()
    take_question_slot(state)

    def work() -> None:
        def put_step(step: Any) -> None:
            events.put({"step": step.model_dump(mode="json")})

        try:
            events.put({"result": answer(stop_when(abandoned, put_step)).model_dump(mode="json")})
        except QuestionAbandoned:
            log.info("%s: the client left, the question stopped", what)
        except Exception as exc:  # noqa: BLE001 - the client gets one line for any failure
            line = _error_line(exc)
            if line["error"]["status"] == 500:
                log.error("%s failed", what, exc_info=exc)
            elif line["error"]["status"] == 503:
                log.warning("%s: the model server failed: %s", what, line["error"]["message"])
            events.put(line)
        finally:
            state.questions.give_back()
            events.put(None)

    # The answer runs beside the response, so each step goes out as soon as the agent takes it.
    try:
        threading.Thread(target=work, name=f"vidscope-{kind}-stream", daemon=True).start()
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


def stream_responses(result: str) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI answers of a streamed question route whose result is a ``result`` model."""
    from vidscope.api.routes import BUSY

    return {
        200: {
            "description": f'NDJSON: a {{"step": TraceStep}} line per agent step, then {{"result": '
            f'{result}}} or {{"error": {{"status", "type", "message"}}}} (404: no such video; '
            "422: bad question; 503: the model server failed; 500: the question failed).",
            "content": {"application/x-ndjson": {}},
        },
        **BUSY,
    }
