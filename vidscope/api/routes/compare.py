"""``POST /api/compare``: answer one question across several videos (SAMA or AgentCVR).

As on ``/api/ask``, a question whose client leaves stops at its next step and frees its slot.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import HTTPException, Request, Response
from pydantic import Field

from vidscope.api.models import NonBlank, RequestBody, strategy_field, strategy_of
from vidscope.api.routes import BUSY, answer_while_connected, guarded_router, take_question_slot
from vidscope.api.state import State
from vidscope.flows.compare import CompareResult

router = guarded_router()


class CompareRequest(RequestBody):
    """Videos (ids, id prefixes or file names), the question and the agent."""

    videos: list[str] = Field(min_length=1, max_length=16)
    question: str = Field(min_length=1, max_length=2000)
    options: list[NonBlank] | None = Field(
        None, min_length=2, max_length=26, description="Multiple-choice options, if any (as ask's)."
    )
    agent: Annotated[str, strategy_of("videos")] = strategy_field("videos")
    use_skills: bool = True
    conflict_check: bool = True


@router.post(
    "/compare",
    response_model=CompareResult,
    responses={404: {"description": "No such video."}, 422: {"description": "Bad question."}, **BUSY},
    tags=["questions"],
)
async def compare(body: CompareRequest, state: State, request: Request) -> CompareResult | Response:
    """Answer a question across several videos, citing (video, start, end)."""
    from vidscope.flows.compare import run_compare
    from vidscope.storage.videos import VideoNotFound

    def work(on_step: Callable[[Any], None]) -> CompareResult:
        return run_compare(
            state.settings,
            body.videos,
            body.question,
            options=body.options,
            agent=body.agent,
            use_skills=body.use_skills,
            conflict_check=body.conflict_check,
            on_step=on_step,
        )

    take_question_slot(state)
    try:
        return await answer_while_connected(request, state, work, "vidscope-compare")
    except VideoNotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from exc
