"""Pieces shared by the multi-video strategies (SAMA, AgentCVR): the vision model, frames of a
segment put in front of it, replies read as JSON, and the terminal ``answer`` tool whose citations
name their video.

The vision model is the ``vlm`` role when one is set and the chat model otherwise, never a separately
configured planner (see :mod:`vidscope.agents.vision`). Without one, or when it refused images, the
visual tools fail with the "no vision model" note (in full once per question).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from string import ascii_uppercase
from typing import Annotated, Any

from pydantic import BaseModel, Field

from vidscope.agents.perception import RangeFrames, checked_range, range_frames
from vidscope.agents.tools import ToolContext, ToolError, ToolResult, tool
from vidscope.agents.vision import no_vision_note
from vidscope.core.errors import ImagesNotSupported
from vidscope.core.images import encode_jpeg
from vidscope.models.protocols.chat import ChatMessage, ChatModel, ChatReply

#: Frames a segment is read from at most, and their sampling rate (per second).
READ_FPS = 2.0


def vision_model(ctx: ToolContext, tool_name: str, *, instead: str = "") -> ChatModel:
    """The model that looks at frames (``ctx.vision_model()``: the vlm, else the chat model); a
    :class:`ToolError` with the "no vision model" note when there is none, followed by ``instead``
    (which of the agent's tools still work without one)."""
    model = ctx.vision_model()
    if model is None:
        raise ToolError(no_vision_error(ctx, tool_name, instead))
    return model


def no_vision_error(ctx: ToolContext, tool_name: str, instead: str = "") -> str:
    """A frame tool's error when nothing can look at frames: the note (in full the first time in a
    question), then what still works instead."""
    return f"{tool_name}: {no_vision_note(ctx, tool_name)}" + (f" {instead}" if instead else "")


def segment_frames(
    ctx: ToolContext, video_id: str, t0: float, t1: float, *, budget: int, max_side: int | None = None
) -> tuple[float, float, RangeFrames]:
    """(start, end, frames) of [t0, t1] of ``video_id``: the range checked against the duration, up
    to ``budget`` frames from the file (or the stored frames when the file is gone)."""
    record = ctx.video(video_id)
    start, end = checked_range(record, [t0, t1])
    frames = range_frames(
        ctx, record, start, end, budget=budget, fps=READ_FPS, prefer_file=True, max_side=max_side
    )
    return start, end, frames


def look(
    model: ChatModel,
    ctx: ToolContext,
    system: str,
    prompt: str,
    frames: RangeFrames,
    *,
    max_side: int | None = None,
) -> ChatReply:
    """Ask ``model`` about ``frames`` (JPEG, times listed in the prompt)."""
    quality = ctx.settings.ingest.jpeg_quality
    jpegs = [encode_jpeg(image, quality, max_side=max_side) for image in frames.images]
    times = [round(t, 2) for t in frames.times]
    try:
        return _look(model, ctx, system, prompt, jpegs, times)
    except ImagesNotSupported:  # learned on this call; the backend remembers it for the process
        raise ToolError(no_vision_note(ctx, "look")) from None


def _look(
    model: ChatModel, ctx: ToolContext, system: str, prompt: str, jpegs: list[bytes], times: list[float]
) -> ChatReply:
    return model.chat(
        [
            ChatMessage(role="system", content=system),
            ChatMessage(
                role="user",
                images=jpegs,
                content=f"{prompt}\nThe {len(jpegs)} images are frames at these times (seconds): {times}",
            ),
        ],
        max_tokens=ctx.config.max_tokens,
        temperature=ctx.config.temperature,
    )


_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def json_object(text: str | None) -> dict[str, Any] | None:
    """The JSON object in a model reply (bare or inside a code fence); ``None`` if there is none."""
    if not text:
        return None
    match = _OBJECT.search(text)
    if match is None:
        return None
    try:
        value = json.loads(match.group(0))
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def name_option_videos(options: Sequence[str], videos: Mapping[str, tuple[int, str]]) -> list[str]:
    """``options`` with the video each one names spelled out: the option lettered L that names a
    candidate video ("Video A") becomes "Video A (video 2, video_id=…)" when ``videos`` maps L to
    (its place among the request's videos, its id). SAMA's Meta Planner gives every video an
    identifier before planning; this is that mapping, shown to every multi-video agent."""
    return [
        f"{text} (video {videos[letter][0]}, video_id={videos[letter][1]})" if letter in videos else text
        for letter, text in zip(ascii_uppercase, options, strict=False)
    ]


# ============================================================================ the answer


class CitedRange(BaseModel):
    """A moment of one video that supports the answer."""

    video_id: str = Field(description="Id of the video.")
    start: float = Field(description="Start, in seconds.")
    end: float = Field(description="End, in seconds.")


class AnswerResult(ToolResult):
    """Never produced: ``answer`` ends the conversation (declared for its schema)."""


@tool(terminal=True)
def answer(
    answer: Annotated[str, "The final answer to the question, in plain words."],
    citations: Annotated[
        list[CitedRange],
        Field(description="The moments (video_id, start, end) that support the answer."),
    ] = [],  # noqa: B006 - pydantic copies defaults
    choice: Annotated[
        str | list[str] | None,
        "For multiple-choice questions: the letter of the chosen option (all the right letters, "
        'e.g. "AC", when several may be right).',
    ] = None,
) -> AnswerResult:
    """Give the final answer about the videos with the moments that support it, each naming its
    video. Cite only moments your tools returned. This ends the conversation."""
    return AnswerResult()
