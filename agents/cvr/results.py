"""What AgentCVR's perception actions return: what is seen, or heard, in [t0, t1] of a video.

The real actions (:mod:`vidscope.agents.cvr.actions`) and the simulated ones
(:mod:`vidscope.agents.simulator.tools`) return these models, so the master agent reads the same
shapes in both environments. Kept apart from the actions so the simulator can use them without
loading the perception models' libraries.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

from vidscope.agents.tools import ToolResult
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


#: A visual answer that saw nothing: it verifies no range (AgentCVR's sub-agent answering "no evidence").
SAW_NOTHING = re.compile(
    r"\bno (?:visual )?evidence\b|\bnot (?:visible|shown|seen)\b|\bnothing (?:is )?(?:visible|shown|seen)\b"
    r"|\bcannot (?:see|tell|determine)\b|\bno vision model\b",
    re.IGNORECASE,
)


class VisualQueryResult(ToolResult):
    """What is seen in [t0, t1] of a video: an answer for the focus, and the events behind it."""

    video_id: str
    t0: float
    t1: float
    focus: str
    answer: str
    events: list[SeenEvent] = Field(default_factory=list)
    usage: Usage | None = None

    def evidence_level(self) -> str:
        # Perceived when the look found something; a look that found nothing only echoes the range.
        return (
            "perceived"
            if self.events or (self.answer.strip() and not SAW_NOTHING.search(self.answer))
            else "echoed"
        )

    def evidence_ranges(self) -> list[tuple[str, float, float]]:
        return [(self.video_id, self.t0, self.t1)]

    def summary(self) -> str:
        return f"{len(self.events)} events in {fmt_span(self.t0, self.t1)}: {self.answer[:80]}"

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

    def evidence_ranges(self) -> list[tuple[str, float, float]]:
        return [(self.video_id, self.t0, self.t1)]

    def summary(self) -> str:
        return f"{len(self.lines)} lines in {fmt_span(self.t0, self.t1)}: {self.answer[:80]}"
