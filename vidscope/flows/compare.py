"""The ``compare`` query, one question across several videos: its work, its Prefect flow and its
entry point, in one module.

With a planner model (``models.planner``, else ``models.chat``), a strategy of scope ``videos``
answers (:mod:`vidscope.agents.strategies`; by default the first registered, SAMA: skills,
conflict checks, evidence memory; or AgentCVR: a master agent with parallel visual and audio
sub-agents), their tool calls cached as in ``ask``. Without one, the answer is
extractive: the best evidence of each video side by side, with times, and the result says so.
With ``[agent] environment = "sim"`` the agents answer from a script's simulated tools (the video
ids are the script's). ``run_compare`` is the entry point of the CLI, the HTTP API and the MCP
server (through :class:`vidscope.Library`): like ``run_ask`` (:func:`~vidscope.flows.runs.run_query`)
it runs :func:`compare_videos` in-process, or, when a Prefect server is running, as the ``compare``
flow wrapping that same function (:data:`COMPARE`, the module's attribute ``compare``, built on
first access). Importing this module imports no Prefect.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from vidscope.agents import strategies
from vidscope.agents.environment import is_simulated, tool_context
from vidscope.agents.runtime import Citation, TraceStep, UsageTotals
from vidscope.agents.strategies import StrategyRequest
from vidscope.agents.tools import AgentConfig
from vidscope.core.settings import Settings, disable_telemetry
from vidscope.core.timecodes import fmt_time
from vidscope.flows.runs import QueryFlow, module_flow, publish_markdown, run_query
from vidscope.models import registry
from vidscope.models.open_store import open_store
from vidscope.storage.videos import find_video

EXTRACTIVE_NOTE = (
    "No planner model is configured (models.planner or models.chat): this is the best evidence of "
    "each video side by side, not a reasoned answer."
)

_on_step: contextvars.ContextVar[Callable[[TraceStep], None] | None] = contextvars.ContextVar(
    "vidscope_compare_on_step", default=None
)


class VideoRef(BaseModel):
    """One compared video."""

    video_id: str
    file_name: str


class CompareResult(BaseModel):
    """The answer to one question across videos (``--json`` prints this model)."""

    videos: list[VideoRef]
    question: str
    options: list[str] | None = None
    answer: str
    choice: str | None = None
    citations: list[Citation] = Field(default_factory=list)
    extractive: bool = False
    forced: bool = False
    #: The agent reached no answer in words: the extractive answer stands in (``Answer.fallback``).
    fallback: bool = False
    agent: str | None = None
    model: str | None = None
    note: str | None = None
    seconds: float = 0.0
    trace: list[TraceStep] = Field(default_factory=list)
    usage: UsageTotals = Field(default_factory=UsageTotals)


def compare_videos(
    video_ids: list[str],
    question: str,
    options: list[str] | None = None,
    settings: Settings | None = None,
    config: AgentConfig | None = None,
    agent: str | None = None,
    use_skills: bool = True,
    conflict_check: bool = True,
) -> CompareResult:
    """Answer ``question`` across ``video_ids`` (the strategy ``agent``, the default one when None,
    with a planner, else extractive; ``use_skills`` and ``conflict_check`` are SAMA's ablations)."""
    from vidscope.core.settings import get_settings

    settings = settings or get_settings()
    config = config or settings.agent
    started = time.perf_counter()
    chat = registry.planner_model(settings)
    simulated = is_simulated(config)
    if simulated and chat is None:
        raise ValueError("the simulated environment ([agent] environment = 'sim') needs a chat model")
    # The simulator answers from its script: no store is opened for it.
    ctx = tool_context(settings, None if simulated else open_store(settings), chat=chat, config=config)
    videos = [VideoRef(video_id=v, file_name=ctx.video(v).file_name) for v in video_ids]
    strategy = strategies.get(agent or strategies.default("videos"), "videos")
    ablations = frozenset(
        name for name, on in (("skills", use_skills), ("conflict_check", conflict_check)) if not on
    )
    request = StrategyRequest(
        question, video_ids, "videos", options, ablations=ablations, on_step=_on_step.get()
    )
    answer = strategies.answer(strategy, ctx, request)
    result = CompareResult(
        videos=videos,
        question=question,
        options=options,
        answer=answer.answer,
        choice=answer.choice,
        citations=answer.citations,
        extractive=answer.extractive,
        forced=answer.forced,
        fallback=answer.fallback,
        agent=None if answer.extractive and not answer.fallback else strategy.name,
        model=chat.name if chat else None,
        note=EXTRACTIVE_NOTE if answer.extractive and not answer.fallback else None,
        seconds=round(time.perf_counter() - started, 3),
        trace=answer.trace,
        usage=answer.usage,
    )
    publish_markdown("compare", _markdown(result), f"compare: {question[:80]}")
    return result


def _markdown(result: CompareResult) -> str:
    lines = [f"## {result.question}", "", result.answer, ""]
    for c in result.citations:
        mark = "✓" if c.verified else f"✗ {c.note}"
        lines.append(f"- {c.video_id[:12]} {fmt_time(c.start)}–{fmt_time(c.end)} {mark}")
    if result.note:
        lines += ["", f"*{result.note}*"]
    return "\n".join(lines)


#: The ``compare`` flow: :func:`compare_videos` as a flow run.
COMPARE = QueryFlow(compare_videos, "compare", "compare {question:.60}", attribute="compare")


def __getattr__(name: str) -> Any:
    """The flow ``compare``, built (importing Prefect) on first access."""
    return module_flow(__name__, name, (COMPARE,))


def run_compare(
    settings: Settings,
    video_refs: Sequence[str],
    question: str,
    *,
    options: list[str] | None = None,
    agent: str | None = None,
    use_skills: bool = True,
    conflict_check: bool = True,
    config: AgentConfig | None = None,
    on_step: Callable[[TraceStep], None] | None = None,
) -> CompareResult:
    """Resolve the videos and answer with the strategy ``agent`` (one of scope ``videos``; the
    default one when None) — the ``compare`` flow when a Prefect server is running, else
    in-process; ``on_step`` sees each trace step live."""
    disable_telemetry()
    agent = strategies.get(agent or strategies.default("videos"), "videos").name  # unknown: ValueError
    question = question.strip()
    if not question:
        raise ValueError("the question is empty")
    if len(video_refs) < 1:
        raise ValueError("compare needs at least one video")
    if options is not None:  # as ask checks them: SAMA and AgentCVR letter them A, B, ...
        options = [o.strip() for o in options if o.strip()]
        if not 2 <= len(options) <= 26:
            raise ValueError(f"--options needs 2 to 26 options, got {len(options)}")
    if is_simulated(config or settings.agent):
        video_ids = list(dict.fromkeys(video_refs))  # videos of the script: the store is not consulted
    else:
        store = open_store(settings)
        video_ids = list(dict.fromkeys(find_video(store, ref).video_id for ref in video_refs))
    token = _on_step.set(on_step)
    try:
        args = (video_ids, question, options, settings, config, agent, use_skills, conflict_check)
        return run_query("compare", settings, COMPARE, *args)
    finally:
        _on_step.reset(token)
