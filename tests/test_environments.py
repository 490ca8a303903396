"""Real and simulated tools are one interface: ``@simulates(real_tool)``.

A simulated tool must take exactly the real tool's arguments and is offered under the real tool's
name and description, so a model cannot tell the environments apart; the real tools never load
the simulator.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Annotated

import pytest
from pydantic import Field

from vidscope.agents.cvr import actions
from vidscope.agents.dvd.tools import clip_search as real_clip_search
from vidscope.agents.evidence import ClipSearchResult
from vidscope.agents.simulator import tools as sim_tools
from vidscope.agents.tools import ToolContext, simulates


def test_a_simulated_tool_is_offered_as_the_real_one() -> None:
    @simulates(real_clip_search)
    def clip_search(
        ctx: ToolContext,
        video_id: Annotated[str, "Id of the video to search."],
        query: Annotated[str, "What to look for: words spoken or shown, objects, actions, scenes."],
        top_k: Annotated[int, Field(description="How many clips to return (1-50).", ge=1, le=50)] = 16,
    ) -> ClipSearchResult:
        """Always nothing (a test double)."""
        return ClipSearchResult(video_id=video_id, query=query, clips=[], searched_clips=0)

    assert clip_search.spec() == real_clip_search.spec()
    assert clip_search.description == real_clip_search.description != "Always nothing (a test double)."
    assert clip_search.func is not real_clip_search.func


def _other_default(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video to search."],
    query: Annotated[str, "What to look for: words spoken or shown, objects, actions, scenes."],
    top_k: Annotated[int, Field(description="How many clips to return (1-50).", ge=1, le=50)] = 8,
) -> ClipSearchResult:
    """A double whose ``top_k`` defaults otherwise."""
    raise AssertionError


def _other_description(
    ctx: ToolContext,
    video_id: Annotated[str, "Which video."],
    query: Annotated[str, "What to look for: words spoken or shown, objects, actions, scenes."],
    top_k: Annotated[int, Field(description="How many clips to return (1-50).", ge=1, le=50)] = 16,
) -> ClipSearchResult:
    """A double describing ``video_id`` otherwise."""
    raise AssertionError


def _no_top_k(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video to search."],
    query: Annotated[str, "What to look for: words spoken or shown, objects, actions, scenes."],
) -> ClipSearchResult:
    """A double without ``top_k``."""
    raise AssertionError


@pytest.mark.parametrize("double", [_other_default, _other_description, _no_top_k])
def test_a_simulated_tool_with_other_arguments_is_refused(double: Callable[..., ClipSearchResult]) -> None:
    with pytest.raises(TypeError, match="does not take the arguments of the real clip_search"):
        simulates(real_clip_search)(double)


def test_agentcvr_actions_are_offered_alike_in_both_environments() -> None:
    for real, simulated in (
        (actions.visual_query, sim_tools.visual_query),
        (actions.audio_query, sim_tools.audio_query),
    ):
        assert simulated.spec() == real.spec()


def test_the_real_strategies_never_load_the_simulator() -> None:
    code = (
        "import sys\n"
        "from vidscope.agents import strategies\n"
        "for s in strategies.STRATEGIES.values():\n"
        "    if s.tools is not None:\n"
        "        s.tool_registry(simulated=False)\n"
        "    strategies.load(s.run)\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('vidscope.agents.simulator'))\n"
        "assert not loaded, loaded\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
