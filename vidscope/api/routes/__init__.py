"""The API's routes, one module per resource; :func:`~vidscope.api.app.create_app` includes them.

Every resource but the session lives behind the bearer token: its router comes from
:func:`guarded_router`, so the dependency and the documented error responses are the same on all.

Questions (ask, ask/stream, compare) share three things here: a bounded number of slots
(:func:`take_question_slot`, 429 past it), one way to stop a question whose client left
(:func:`stop_when`): its agent stops at its next step, so no further model call is made, and its
slot is given back when its work has really ended (:func:`answer_while_connected` runs a plain,
non-streamed question that way), and one answer when the model server is down, closes the
connection, times out or fails (:func:`model_failure`, :func:`model_unavailable`): 503 with
``Retry-After`` and one log line, not a 500 and a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Request, Response

from vidscope.api.state import ApiState, require_token

T = TypeVar("T")
log = logging.getLogger(__name__)

#: How often a question waiting for its answer checks whether its client is still there.
POLL_SECONDS = 0.25
#: The status logged for a question whose client left before its answer (nginx's "client closed
#: request"); nobody receives it.
CLIENT_GONE = 499

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


#: Seconds a client is told to wait before asking again when the model server failed.
MODEL_RETRY_AFTER = 30
#: The answer the question routes give when the model server failed.
MODEL_DOWN: dict[int | str, dict[str, Any]] = {
    503: {"description": "The model server is down or failed mid-question; retry after Retry-After s."}
}


def model_failure(exc: BaseException) -> BaseException | None:
    """The model-server failure behind ``exc`` (itself or a cause): a server that cannot be
    reached or closed the connection, timed out, or answered an error retries did not fix."""
    from vidscope.core.errors import BackendUnavailable
    from vidscope.models.openai_compat import EndpointError

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, (BackendUnavailable, EndpointError)):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (its type when it has none)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def model_unavailable(failure: BaseException, what: str) -> HTTPException:
    """503 with ``Retry-After`` for a model-server failure, logged as one line (no traceback)."""
    message = first_line(failure)
    log.warning("%s: the model server failed: %s", what, message)
    return HTTPException(503, message, headers={"Retry-After": str(MODEL_RETRY_AFTER)})


class QuestionAbandoned(Exception):
    """The client of a question left: its work stops at the next step."""


#: What an agent calls with each step it takes (a ``TraceStep``).
StepCallback = Callable[[Any], None]


def stop_when(abandoned: threading.Event, on_step: StepCallback | None = None) -> StepCallback:
    """A step callback that stops the agent (:class:`QuestionAbandoned`) once ``abandoned`` is
    set, and otherwise passes the step on to ``on_step``."""

    def step(value: Any) -> None:
        if abandoned.is_set():
            raise QuestionAbandoned("the client left")
        if on_step is not None:
            on_step(value)

    return step


async def answer_while_connected(
    request: Request, state: ApiState, work: Callable[[StepCallback], T], name: str
) -> T | Response:
    """Run ``work(on_step)`` on a thread of its own (named ``name``) while watching the client.

    The caller has taken a question slot; it is given back when ``work`` ends, however it ends.
    When the client leaves first, ``work`` is told to stop at its next step and a bare
    :data:`CLIENT_GONE` response is returned (nobody reads it); ``work``'s own exceptions are
    raised here, for the route to turn into its answer.
    """
    abandoned = threading.Event()
    done: Future[T] = Future()

    def run() -> None:
        try:
            done.set_result(work(stop_when(abandoned)))
        except BaseException as exc:  # handed to the waiting request (or logged when it left)
            done.set_exception(exc)
        finally:
            state.questions.give_back()

    try:
        threading.Thread(target=run, name=name, daemon=True).start()
    except RuntimeError:  # no thread to be had: the slot goes back
        state.questions.give_back()
        raise
    waiting = asyncio.wrap_future(done)
    try:
        while True:
            finished, _ = await asyncio.wait({waiting}, timeout=POLL_SECONDS)
            if finished:
                return waiting.result()
            if await request.is_disconnected():
                log.info("%s: the client left, the question stops at its next step", name)
                waiting.add_done_callback(_quietly)
                return Response(status_code=CLIENT_GONE)
    finally:
        # However the wait ends (answer, client gone, server stopping), nobody waits any more.
        abandoned.set()


def _quietly(waiting: asyncio.Future[Any]) -> None:
    """Consume an abandoned question's outcome (its stop is expected; anything else is logged)."""
    error = None if waiting.cancelled() else waiting.exception()
    if error is not None and not isinstance(error, QuestionAbandoned):
        log.warning("an abandoned question failed: %s", error)
