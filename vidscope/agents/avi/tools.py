"""Agentic-Video-Intelligence tools: Retrieve (find where) and Perceive (look closely).

Retrieve: clip_retrieve, clip_merge, global_explore, graph_retrieve — over the clip database and
the entity graph built at ingestion. Perceive: object_detect, text_extract, boundary_detect,
frame_analysis — run a model on frames of one time range, read from the video file when it is
still where it was ingested (denser, sharper) and from the stored 2 fps frames otherwise.

Every tool takes the id of the video it looks at (tool results are cached per video version) and
returns a typed result recording the time ranges it showed the model. Perception backends come
from the model registry; :class:`PerceptionContext` lets a caller hand them in directly instead.
"""

from __future__ import annotations

from vidscope.agents.avi.tools_perceive import (
    boundary_detect,
    frame_analysis,
    object_detect,
    text_extract,
)
from vidscope.agents.avi.tools_retrieve import (
    clip_merge,
    clip_retrieve,
    global_explore,
    graph_retrieve,
)
from vidscope.agents.perception import PerceptionContext, perception_backend, range_frames
from vidscope.agents.tools import ToolRegistry

__all__ = [
    "PERCEIVE_TOOLS",
    "RETRIEVE_TOOLS",
    "PerceptionContext",
    "avi_registry",
    "boundary_detect",
    "clip_merge",
    "clip_retrieve",
    "frame_analysis",
    "global_explore",
    "graph_retrieve",
    "object_detect",
    "perception_backend",
    "range_frames",
    "text_extract",
]

# ============================================================================ registries

#: The AVI Retrieve phase's tools, in the order the model sees them.
RETRIEVE_TOOLS = (clip_retrieve, clip_merge, global_explore, graph_retrieve)
#: The AVI Perceive phase's tools.
PERCEIVE_TOOLS = (object_detect, text_extract, boundary_detect, frame_analysis)


def avi_registry() -> ToolRegistry:
    """The AVI strategy's allow-list: both phases (the agent splits it,
    :func:`~vidscope.agents.avi.agent.phases`)."""
    return ToolRegistry((*RETRIEVE_TOOLS, *PERCEIVE_TOOLS))
