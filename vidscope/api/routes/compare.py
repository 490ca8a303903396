"""``POST /api/compare``: answer one question across several videos (SAMA or AgentCVR).

``POST /api/compare/stream`` answers the same request as it happens, in NDJSON, as
``/api/ask/stream`` does (:mod:`vidscope.api.streaming`): the page shows each step live.
As on ``/api/ask``, a question whose client leaves stops at its next step and frees its slot.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import HTTPException, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import Field

from vidscope.api.models import NonBlank, RequestBody, strategy_field, strategy_of
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
from vidscope.api.streaming import OnStep, stream_question, stream_responses
from vidscope.flows.compare import CompareResult

router = guarded_router()


class CompareRequest(RequestBody):
    """Videos (ids, id prefixes or file names), the question and the agent."""

    videos: list[NonBlank] = Field(min_length=1, max_length=16)
    question: NonBlank  # as ask's: a question that strip() empties is refused by the schema itself
    options: list[NonBlank] | None = Field(
        None, min_length=2, max_length=26, description="Multiple-choice options, if any (as ask's)."
    )
    agent: Annotated[str, strategy_of("videos")] = strategy_field("videos")
    use_skills: bool = True
    conflict_check: bool = True


def _compare(state: ApiState, body: CompareRequest, on_step: OnStep | None = None) -> CompareResult:
    """Answer ``body`` with the settings of ``state``; ``on_step`` sees each agent step."""
    return state.library().compare(
        body.videos,
        body.question,
        options=body.options,
        agent=body.agent,
        use_skills=body.use_skills,
        conflict_check=body.conflict_check,
        on_step=on_step,
    )


@router.post(
    "/compare",
    response_model=CompareResult,
    responses={
        404: {"description": "No such video."},
        422: {"description": "Bad question."},
        **BUSY,
        **MODEL_DOWN,
    },
    tags=["questions"],
)
async def compare(body: CompareRequest, state: State, request: Request) -> CompareResult | Response:
    """Answer a question across several videos, citing (video, start, end)."""
    from vidscope.storage.videos import VideoNotFound

    def work(on_step: Callable[[Any], None]) -> CompareResult:
        return _compare(state, body, on_step)

    take_question_slot(state)
    try:
        return await answer_while_connected(request, state, work, "vidscope-compare")
    except VideoNotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from exc
    except Exception as exc:
        failure = model_failure(exc)
        if failure is None:
            raise
        raise model_unavailable(failure, f"compare across {len(body.videos)} videos") from exc


@router.post(
    "/compare/stream",
    response_class=StreamingResponse,
    responses=stream_responses("CompareResult"),
    tags=["questions"],
)
def compare_stream(body: CompareRequest, state: State, request: Request) -> StreamingResponse:
    """Answer a question across several videos, streaming each agent step as it happens."""
    what = f"compare {body.question!r} across {len(body.videos)} videos"
    return stream_question(state, request, lambda on_step: _compare(state, body, on_step), "compare", what)
