"""Tools for questions about the whole library (``vidscope ask --library``).

``library_search`` finds moments across every video (clip-level hybrid search,
:mod:`vidscope.agents.moments`) and returns (video, start, end) hits; the Deep-Video-Discovery
tools then look inside the videos it found, each by its id (``global_browse``, ``clip_search``,
``frame_inspect``), and ``finish`` cites ``{video_id, start, end}`` moments.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from vidscope.agents.answers import Support
from vidscope.agents.dvd.tools import clip_search, finish, frame_inspect, global_browse
from vidscope.agents.moments import Moment, search_moments
from vidscope.agents.tools import ToolContext, ToolRegistry, ToolResult, tool
from vidscope.core.errors import BackendUnavailable
from vidscope.core.timecodes import fmt_time
from vidscope.models import registry


class LibrarySearchResult(ToolResult):
    """Moments from any video of the library, best first."""

    query: str
    moments: list[Moment]

    def support(self) -> list[Support]:
        return [
            Support(video_id=m.video_id, start=m.start, end=m.end, level="retrieved", found=m.text[:160])
            for m in self.moments
        ]

    def summary(self) -> str:
        best = ", ".join(f"{m.file} {fmt_time(m.start)}-{fmt_time(m.end)}" for m in self.moments[:3])
        return f"{len(self.moments)} moments; best: {best or 'none'}"


@tool(version=2, uses_embedder=True, uses_library=True, uses_models=("image_text",))
def library_search(
    ctx: ToolContext,
    query: Annotated[str, "What to look for: words spoken or shown, objects, actions, scenes."],
    top_k: Annotated[int, Field(description="How many moments to return (1-30).", ge=1, le=30)] = 10,
) -> LibrarySearchResult:
    """Find the moments of ALL videos in the library most relevant to a query, by meaning (caption
    embeddings) fused with keyword matches in speech, on-screen text and captions, and with what
    the frames show (where visual search is on). Returns, best first, each moment's video_id, file
    name, start/end (seconds) and what was said or shown."""
    try:
        image_text = registry.image_text(ctx.settings)
    except BackendUnavailable:  # visual search is off (offline): words and meaning still rank
        image_text = None
    found = search_moments(ctx.store, query, embedder=ctx.embedder(), k=top_k, image_text=image_text)
    return LibrarySearchResult(query=query, moments=found.moments)


#: The tools of the library agent, in the order the model sees them.
LIBRARY_TOOLS = (library_search, global_browse, clip_search, frame_inspect, finish)


def library_registry() -> ToolRegistry:
    """The allow-list of the library question-answering agent (read-only tools plus finish)."""
    return ToolRegistry(LIBRARY_TOOLS)
