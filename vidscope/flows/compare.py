"""The ``compare`` query flow: answer one question across several ingested videos.

A thin Prefect wrapper around the work in :mod:`vidscope.flows.compare_work`, so a flow run (with
its tool calls as task runs and its answer as an artifact) is what the Prefect UI shows. The entry
point :func:`run_compare` (re-exported here) uses this flow when a Prefect server is running and
calls the work directly otherwise.
"""

from __future__ import annotations

from prefect import flow

from vidscope.agents.tools import AgentConfig
from vidscope.core.settings import Settings
from vidscope.flows.compare_work import (
    EXTRACTIVE_NOTE,
    CompareResult,
    VideoRef,
    compare_videos,
    run_compare,
)

__all__ = [
    "EXTRACTIVE_NOTE",
    "CompareResult",
    "VideoRef",
    "compare",
    "run_compare",
]


@flow(
    name="compare",
    flow_run_name="compare {question:.60}",
    validate_parameters=False,
    log_prints=False,
)
def compare(
    video_ids: list[str],
    question: str,
    options: list[str] | None = None,
    settings: Settings | None = None,
    config: AgentConfig | None = None,
    agent: str | None = None,
    use_skills: bool = True,
    conflict_check: bool = True,
) -> CompareResult:
    """Answer ``question`` across ``video_ids`` (the strategy ``agent`` with a planner, else
    extractive)."""
    return compare_videos(video_ids, question, options, settings, config, agent, use_skills, conflict_check)
