"""What AgentCVR's perception actions return: what is seen, or heard, in [t0, t1] of a video.

The real actions (:mod:`vidscope.agents.cvr.actions`) and the simulated ones
(:mod:`vidscope.agents.simulator.tools`) return these models, so the master agent reads the same
shapes in both environments. Kept apart from the actions so the simulator can use them without
loading the perception models' libraries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import BaseModel, Field

from vidscope.agents.answers import Support
from vidscope.agents.looks import look_support, read_look, times_inside
from vidscope.agents.tools import ToolError, ToolResult
from vidscope.core.timecodes import fmt_span
from vidscope.models.protocols.chat import Usage


class SeenEvent(BaseModel):
    """An event seen (or text shown) in the queried interval."""

    start: float
    end: float
    kind: str
    label: str
    subject: str | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)


class HeardLine(BaseModel):
    """Words heard in the queried interval."""

    start: float
    end: float
    text: str
    speaker: str | None = None


#: The most frames one ``visual_query`` may look at, summed over its targets (AgentCVR's master
#: prompts: "the total number of frames ... in a single operation must not exceed 128").
FRAME_BUDGET = 128


class VisualTarget(BaseModel):
    """One range a ``visual_query`` looks at: a video, an interval, and how many frames to take."""

    video_id: Annotated[str, Field(description="Id of the video.")]
    t0: Annotated[float, Field(description="Start of the interval, in seconds.")]
    t1: Annotated[float, Field(description="End of the interval, in seconds.")]
    frames: Annotated[
        int | None,
        Field(default=None, ge=1, description="Frames to sample from it (default: [agent] cvr_frames)."),
    ] = None


class LookedRange(BaseModel):
    """A range the visual sub-agent looked at, as checked against the video, and its frame count."""

    video_id: str
    t0: float
    t1: float
    frames: int


def frame_plan(
    targets: Sequence[VisualTarget | dict[str, Any]], default: int, budget: int = FRAME_BUDGET
) -> tuple[list[VisualTarget], list[int], str]:
    """The targets (as models: a tool receives its validated arguments as JSON), frames per target,
    and a note ("" when nothing changed).

    Over ``budget`` in sum the counts are scaled down in proportion (at least one frame each) and
    the note says so: the look still happens, as the master asked but thinner, rather than a turn
    lost to a refusal; more targets than ``budget`` frames can hold is refused.
    """
    if not targets:
        raise ToolError("visual_query needs at least one target {video_id, t0, t1, frames}")
    if len(targets) > budget:
        raise ToolError(f"visual_query looks at most {budget} targets at once ({len(targets)} given)")
    models = [VisualTarget.model_validate(t) for t in targets]
    asked = [t.frames or default for t in models]
    total = sum(asked)
    if total <= budget:
        return models, asked, ""
    scaled = [max(1, n * budget // total) for n in asked]
    return (
        models,
        scaled,
        f"{total} frames asked, over the {budget}-frame budget: scaled to {sum(scaled)} ({scaled})",
    )


class VisualQueryResult(ToolResult):
    """What is seen in one look at one or more ranges (side by side): an answer for the focus, and
    the events behind it."""

    targets: list[LookedRange]
    focus: str
    answer: str
    events: list[SeenEvent] = Field(default_factory=list)
    usage: Usage | None = None
    note: str = ""
    #: Whether the look saw what the focus asks (the model's structured reply); ``None``: read
    #: from ``answer`` (:func:`~vidscope.agents.looks.read_look`).
    found: bool | None = None
    #: The frame times the model said show it (empty: it did not say).
    seen_at: list[float] = Field(default_factory=list)

    def support(self) -> list[Support]:
        # Events seen support their spans; else the look supports where it saw something, and a
        # look that found nothing ("no evidence") only echoes its ranges.
        if self.events:
            return [
                Support(
                    video_id=t.video_id,
                    start=e.start,
                    end=e.end,
                    level="perceived",
                    found=f"{e.kind}: {e.label}",
                )
                for e in self.events
                # the event's video: the first target whose range holds it
                for t in [next((t for t in self.targets if t.t0 <= e.start <= t.t1), None)]
                if t is not None
            ]
        found = self.found if self.found is not None else read_look(self.answer).found
        single = len(self.targets) == 1
        return [
            s
            for t in self.targets
            for s in look_support(
                t.video_id,
                [[t.t0, t.t1]],
                found=found,
                what=self.answer,
                seen_at=times_inside(self.seen_at, [[t.t0, t.t1]]) if single else (),
            )
        ]

    def summary(self) -> str:
        spans = ", ".join(fmt_span(t.t0, t.t1) for t in self.targets)
        return f"{len(self.events)} events in {spans}: {self.answer[:80]}"

    def model_usage(self) -> Usage | None:
        return self.usage

    def for_model(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"usage"})


class AudioQueryResult(ToolResult):
    """What is heard in [t0, t1] of a video."""

    video_id: str
    t0: float
    t1: float
    answer: str
    lines: list[HeardLine] = Field(default_factory=list)

    def support(self) -> list[Support]:
        # Each line heard supports when it is said; hearing nothing only echoes the interval.
        if not self.lines:
            return [
                Support(video_id=self.video_id, start=self.t0, end=self.t1, level="echoed", found=self.answer)
            ]
        return [
            Support(
                video_id=self.video_id, start=h.start, end=h.end, level="retrieved", found=f"said {h.text!r}"
            )
            for h in self.lines
        ]

    def summary(self) -> str:
        return f"{len(self.lines)} lines in {fmt_span(self.t0, self.t1)}: {self.answer[:80]}"
