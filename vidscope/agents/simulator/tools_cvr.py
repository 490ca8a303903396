"""AgentCVR's master-agent actions, simulated: the real ``cvr_registry()``'s names, arguments and
result models, answered from a script.

``visual_query`` is :mod:`vidscope.agents.simulator.tools`' (it simulates the real action); the
simulated ``audio_query`` here returns the real :class:`~vidscope.agents.cvr.actions.HeardResult`,
with the language fields the real one fills (the script video's ``language``). ``answer`` is the
real terminal tool.
"""

from __future__ import annotations

from typing import Annotated

from vidscope.agents.cvr import actions as real
from vidscope.agents.cvr.master import cvr_registry
from vidscope.agents.multi_video import answer
from vidscope.agents.simulator import tools as sim
from vidscope.agents.simulator.simulator import simulator_of
from vidscope.agents.tools import ToolContext, ToolRegistry, simulates


@simulates(real.audio_query, version=1)
def audio_query(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    t0: Annotated[float, "Start of the interval, in seconds."],
    t1: Annotated[float, "End of the interval, in seconds."],
) -> real.HeardResult:
    """Simulated audio_query (the script's lines in the interval), with the language fields the
    real one fills when it hears something (the video's spoken language, certain)."""
    heard = sim.audio_query(ctx, video_id=video_id, t0=t0, t1=t1)
    language = simulator_of(ctx).video(video_id).language if heard.lines else None
    return real.HeardResult(
        **heard.model_dump(),
        language=language,
        language_probability=1.0 if language else None,
        source="script",
    )


visual_query = sim.visual_query

#: The master agent's actions, simulated, in the real registry's order.
SIM_CVR_AGENT_TOOLS = (visual_query, audio_query, answer)


def sim_cvr_agent_registry() -> ToolRegistry:
    """``cvr_registry()`` answered by the simulator (checked to offer the same tools)."""
    registry = ToolRegistry(SIM_CVR_AGENT_TOOLS)
    if registry.names != cvr_registry().names:
        raise TypeError("the simulated AgentCVR actions differ from the real ones")
    return registry
