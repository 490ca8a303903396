"""The ``ask`` and ``ask-library`` query flows: a question about one video, or about the library.

Each flow is a thin Prefect wrapper around the work in :mod:`vidscope.flows.answer`, so a flow run
(with its tool calls as task runs and its trace as an artifact) is what the Prefect UI shows; the
deployment ``ask/on-demand`` points at :func:`ask`. The entry points :func:`run_ask` and
:func:`run_ask_library` (re-exported here) use these flows when a Prefect server is running and call
the work directly otherwise.
"""

from __future__ import annotations

from prefect import flow

from vidscope.agents.tools import AgentConfig
from vidscope.core.settings import Settings
from vidscope.flows.answer import (
    AskResult,
    VideoNotFound,
    answer_library,
    answer_video,
    run_ask,
    run_ask_library,
    trace_markdown,
)

__all__ = [
    "AskResult",
    "VideoNotFound",
    "ask",
    "ask_library",
    "run_ask",
    "run_ask_library",
    "trace_markdown",
]


@flow(
    name="ask",
    flow_run_name="ask {video_id:.12}: {question:.60}",
    validate_parameters=False,
    log_prints=False,
)
def ask(
    video_id: str,
    question: str,
    options: list[str] | None = None,
    settings: Settings | None = None,
    config: AgentConfig | None = None,
    agent: str | None = None,
) -> AskResult:
    """Answer ``question`` about ``video_id`` (the strategy ``agent`` with a chat model, else
    extractive)."""
    return answer_video(video_id, question, options, settings, config, agent)


@flow(
    name="ask-library",
    flow_run_name="ask library: {question:.60}",
    validate_parameters=False,
    log_prints=False,
)
def ask_library(
    question: str,
    settings: Settings | None = None,
    config: AgentConfig | None = None,
    agent: str | None = None,
) -> AskResult:
    """Answer ``question`` about the whole library: the strategy ``agent`` (by default the DVD
    agent with library-wide search) when a chat model is configured, else extractively from the
    library's best moments."""
    return answer_library(question, settings, config, agent)
