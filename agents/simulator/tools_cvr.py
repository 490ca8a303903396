"""AgentCVR's master-agent actions, simulated: the real ``cvr_registry()``'s names, arguments and
result models, answered from a script.

``visual_query`` and ``audio_query`` are the simulator's own (the real actions in
:mod:`vidscope.agents.cvr.actions` return the same result models); the audio result is the real
:class:`~vidscope.agents.cvr.actions.HeardResult`, with no detected language (a script has none).
``answer`` is the real terminal tool. Kept apart from :mod:`vidscope.agents.simulator.tools`
because the real actions import that module.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

from vidscope.agents.cvr import actions as real
from vidscope.agents.cvr.agent import cvr_registry
from vidscope.agents.multi_video import answer
from vidscope.agents.simulator import tools as sim
from vidscope.agents.tools import Tool, ToolContext, ToolRegistry, tool


@tool(version=1)
def _sim_audio_query(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    t0: Annotated[float, "Start of the interval, in seconds."],
    t1: Annotated[float, "End of the interval, in seconds."],
) -> real.HeardResult:
    """Simulated audio_query (the script's lines in the interval)."""
    heard = sim.audio_query(ctx, video_id=video_id, t0=t0, t1=t1)
    return real.HeardResult(**heard.model_dump(), source="script")


def _named(simulated: Tool, actual: Tool) -> Tool:
    return sim.mirror(actual, dataclasses.replace(simulated, name=actual.name))


visual_query = sim.mirror(real.visual_query, sim.visual_query)
audio_query = _named(_sim_audio_query, real.audio_query)

#: The master agent's actions, simulated, in the real registry's order.
SIM_CVR_AGENT_TOOLS = (visual_query, audio_query, answer)


def sim_cvr_agent_registry() -> ToolRegistry:
    """``cvr_registry()`` answered by the simulator (checked to offer the same tools)."""
    registry = ToolRegistry(SIM_CVR_AGENT_TOOLS)
    if registry.names != cvr_registry().names:
        raise TypeError("the simulated AgentCVR actions differ from the real ones")
    return registry
