"""Answering questions about videos: the ``ask`` and ``ask-library`` queries, their work, their
Prefect flows and their entry points, in one module.

With a chat model configured, a strategy of scope ``video`` answers (tool results cached by
:mod:`vidscope.agents.tool_cache`; the strategies and their help are in
:mod:`vidscope.agents.strategies`), by default the first registered. Without a chat model, the
extractive answerer returns the best evidence; asked for another strategy than the default, the
result says so in its ``note``. The flow is built for latency: no heartbeat thread per run, models
loaded once per process by the backend registry, and tool results and model replies cached, so
asking the same question again costs no model or tool work.

``ask-library`` answers a question about every ingested video: the default ``library`` strategy
(the DVD agent) with the ``library_search`` tool (moments across videos) beside the per-video
tools, or, without a chat model, the library's best moments, extractively; citations name their
video.

One route per question: ``run_ask`` (and ``run_ask_library``), which :class:`vidscope.Library`
calls for the CLI, the HTTP API and the MCP server, check the request and hand it to
:func:`~vidscope.flows.runs.run_query`, which runs :func:`answer_video` / :func:`answer_library`
either in-process (no Prefect server: Prefect is not imported, no temporary server starts) or as
the ``ask`` / ``ask-library`` flow wrapping that same function (:data:`ASK`, :data:`ASK_LIBRARY`),
so the question, its tool calls and its trace appear in the UI. The flows are this module's
attributes ``ask`` and ``ask_library`` (the deployment ``ask/on-demand`` names
``vidscope.flows.ask.ask``), built on first access, so importing this module imports no Prefect
and a cold ``vidscope ask`` does not pay for it. Either way the answer comes from
:func:`vidscope.agents.strategies.answer`, which the evaluation calls too
(:func:`vidscope.flows.eval_agents.answer_item`).
"""

from __future__ import annotations

import contextvars
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from vidscope.agents import prompts, strategies
from vidscope.agents.answers import Answer, AskResult, TraceStep
from vidscope.agents.environment import is_simulated, tool_context
from vidscope.agents.strategies import Strategy, StrategyRequest
from vidscope.agents.tools import AgentConfig, ToolContext
from vidscope.core.settings import Settings, disable_telemetry
from vidscope.core.timecodes import fmt_time
from vidscope.flows.runs import QueryFlow, module_flow, publish_markdown, run_query
from vidscope.models import registry
from vidscope.models.open_store import open_store
from vidscope.storage.videos import VideoNotFound, VideoRecord, find_video

__all__ = [
    "ASK",
    "ASK_LIBRARY",
    "AskResult",
    "VideoNotFound",
    "answer_library",
    "answer_video",
    "run_ask",
    "run_ask_library",
    "trace_markdown",
]


def needs_chat_note(strategy: Strategy) -> str:
    """The note on an extractive answer when ``strategy`` was asked for by name."""
    return (
        f"The {strategy.title} agent needs a chat model (models.chat); "
        "without one this is the extractive answer."
    )


# The live-step callback cannot travel as a flow parameter (Prefect serialises those), so it is
# handed to the flow through a context variable set by run_ask.
_on_step: contextvars.ContextVar[Callable[[TraceStep], None] | None] = contextvars.ContextVar(
    "vidscope_ask_on_step", default=None
)


# ============================================================================ the work


def answer_video(
    video_id: str,
    question: str,
    options: list[str] | None = None,
    settings: Settings | None = None,
    config: AgentConfig | None = None,
    agent: str | None = None,
) -> AskResult:
    """Answer ``question`` about ``video_id`` with the strategy ``agent`` (the default one when
    None) with a chat model, else extractively."""
    from vidscope.core.settings import get_settings

    settings = settings or get_settings()
    config = config or settings.agent
    started = time.perf_counter()
    simulated = is_simulated(config)
    chat = registry.planner_model(settings)  # the loop's model; frame tools use ctx.vision_model()
    if simulated and chat is None:
        raise ValueError("the simulated environment ([agent] environment = 'sim') needs a chat model")
    # The simulator answers from its script: no store is opened for it.
    ctx = tool_context(settings, None if simulated else open_store(settings), chat=chat, config=config)
    record = ctx.video(video_id)
    default = strategies.default("video")
    strategy = strategies.get(agent or default, "video")
    request = StrategyRequest(question, [video_id], "video", options, on_step=_on_step.get())
    answer = strategies.answer(strategy, ctx, request)
    result = _result(
        answer,
        record,
        question,
        options,
        chat.name if chat else None,
        time.perf_counter() - started,
    )
    result.agent = None if answer.extractive and not answer.fallback else strategy.name
    asked_for = strategy.name != default and strategy.needs_planner
    result.note = needs_chat_note(strategy) if answer.extractive and asked_for else None
    _publish(result)
    return result


def answer_library(
    question: str,
    settings: Settings | None = None,
    config: AgentConfig | None = None,
    agent: str | None = None,
) -> AskResult:
    """Answer ``question`` about the whole library: the strategy ``agent`` of scope ``library``
    (by default the DVD agent with library-wide search) when a chat model is configured, else
    extractively from the library's best moments."""
    from vidscope.core.settings import get_settings

    settings = settings or get_settings()
    config = config or settings.agent
    started = time.perf_counter()
    store = open_store(settings)
    chat = registry.planner_model(settings)
    ctx = ToolContext(settings, store, chat=chat, config=config)
    strategy = strategies.get(agent or strategies.default("library"), "library")
    request = StrategyRequest(question, [], "library", on_step=_on_step.get())
    answer = strategies.answer(strategy, ctx, request)
    files = {c.video_id: ctx.video(c.video_id).file_name for c in answer.citations if c.verified}
    result = AskResult(
        video_id="",
        file_name=f"the library ({store.count(store.videos)} videos)",
        question=question,
        answer=answer.answer,
        citations=answer.citations,
        extractive=answer.extractive,
        forced=answer.forced,
        fallback=answer.fallback,
        model=chat.name if chat else None,
        agent=None if answer.extractive and not answer.fallback else strategy.name,
        library=True,
        files=files,
        seconds=round(time.perf_counter() - started, 3),
        trace=answer.trace,
        usage=answer.usage,
    )
    _publish(result)
    return result


def _result(
    answer: Answer,
    record: VideoRecord,
    question: str,
    options: Sequence[str] | None,
    model: str | None,
    seconds: float,
) -> AskResult:
    choice_text = None
    if options and answer.choice:
        choice_text = options[prompts.option_letters(len(options)).index(answer.choice)]
    return AskResult(
        video_id=record.video_id,
        file_name=record.file_name,
        question=question,
        options=list(options) if options else None,
        answer=answer.answer,
        choice=answer.choice,
        choice_text=choice_text,
        citations=answer.citations,
        interval=answer.interval,
        unverified_citations=answer.unverified_citations,
        extractive=answer.extractive,
        forced=answer.forced,
        fallback=answer.fallback,
        perceived=answer.perceived,
        skipped=answer.skipped,
        model=model,
        seconds=round(seconds, 3),
        trace=answer.trace,
        usage=answer.usage,
    )


def trace_markdown(result: AskResult) -> str:
    """The answer and its trace as Markdown (the Prefect artifact; also useful in reports)."""
    lines = [f"## {result.question}", "", result.answer, ""]
    if result.choice:
        lines += [f"**Choice:** {result.choice} — {result.choice_text}", ""]
    if result.citations:
        lines.append(
            "**Citations:** "
            + ", ".join(
                f"{result.files.get(c.video_id, '') + ' ' if result.library else ''}"
                f"{fmt_time(c.start)}–{fmt_time(c.end)} {'✓' if c.verified else '✗ ' + c.note}"
                for c in result.citations
            )
        )
        lines.append("")
    if result.interval:
        i = result.interval
        mark = "✓" if i.verified else "✗ " + i.note
        lines += [f"**Interval:** {fmt_time(i.start)}–{fmt_time(i.end)} {mark}", ""]
    if result.note:
        lines += [f"*{result.note}*", ""]
    lines += [
        "| # | kind | tool | arguments | observation | tokens in/out | latency s | cached |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for step in result.trace:
        args = json.dumps(step.arguments, ensure_ascii=False)[:120].replace("|", "\\|")
        obs = step.observation[:160].replace("|", "\\|").replace("\n", " ")
        cached = "tool" if step.tool_cached else ("model" if step.model_cache_hit else "")
        kind = f"{step.phase}/{step.kind}" if step.phase else step.kind
        lines.append(
            f"| {step.index} | {kind} | {step.tool or ''} | {args} | {obs} | "
            f"{step.input_tokens}/{step.output_tokens} | {step.latency_s:.2f} | {cached} |"
        )
    u = result.usage
    lines += [
        "",
        f"Model calls {u.model_calls} (HTTP {u.model_http_calls}), tokens {u.input_tokens} in / "
        f"{u.output_tokens} out, tool calls {u.tool_calls} ({u.tool_cache_hits} cached).",
    ]
    return "\n".join(lines)


def _publish(result: AskResult) -> None:
    """Store the trace as a Prefect artifact of this flow run (shown in the UI)."""
    key = f"ask-{result.video_id[:12]}" if result.video_id else "ask-library"
    publish_markdown(key, trace_markdown(result), f"ask: {result.question[:80]}")


# ============================================================================ the flows

#: The ``ask`` flow: :func:`answer_video` as a flow run (the deployment ``ask/on-demand``).
ASK = QueryFlow(answer_video, "ask", "ask {video_id:.12}: {question:.60}", attribute="ask")
#: The ``ask-library`` flow: :func:`answer_library` as a flow run.
ASK_LIBRARY = QueryFlow(answer_library, "ask-library", "ask library: {question:.60}", attribute="ask_library")


def __getattr__(name: str) -> Any:
    """The flows ``ask`` and ``ask_library``, built (importing Prefect) on first access."""
    return module_flow(__name__, name, (ASK, ASK_LIBRARY))


# ============================================================================ entry points


def run_ask(
    settings: Settings,
    video_ref: str,
    question: str,
    options: list[str] | None = None,
    on_step: Callable[[TraceStep], None] | None = None,
    *,
    config: AgentConfig | None = None,
    agent: str | None = None,
) -> AskResult:
    """Resolve ``video_ref`` and answer with the strategy ``agent`` (one of scope ``video``; the
    default one when None) — as an ``ask`` flow run when a Prefect server is running, else
    in-process; ``on_step`` sees each trace step live."""
    disable_telemetry()
    agent = strategies.get(agent or strategies.default("video"), "video").name  # unknown: ValueError
    question = question.strip()
    if not question:
        raise ValueError("the question is empty")
    if options is not None:
        options = [o.strip() for o in options if o.strip()]
        if not 2 <= len(options) <= 26:
            raise ValueError(f"--options needs 2 to 26 options, got {len(options)}")
    if is_simulated(config or settings.agent):
        video_id = video_ref  # a video of the script: the store is not consulted
    else:
        video_id = find_video(open_store(settings), video_ref).video_id
    token = _on_step.set(on_step)
    try:
        args = (video_id, question, options, settings, config, agent)
        return run_query("ask", settings, ASK, *args)
    finally:
        _on_step.reset(token)


def run_ask_library(
    settings: Settings,
    question: str,
    on_step: Callable[[TraceStep], None] | None = None,
    *,
    config: AgentConfig | None = None,
    agent: str | None = None,
) -> AskResult:
    """Answer ``question`` about every ingested video with the strategy ``agent`` (one of scope
    ``library``; the default one when None) — an ``ask-library`` flow run when a Prefect server
    is running, else in-process; ``on_step`` sees each trace step live. Raises ``ValueError`` for
    an unknown strategy, an empty question or an empty library."""
    disable_telemetry()
    agent = strategies.get(agent or strategies.default("library"), "library").name
    question = question.strip()
    if not question:
        raise ValueError("the question is empty")
    store = open_store(settings)
    if store.count(store.clips) == 0:
        raise ValueError("the library has no clips yet: ingest videos first (vidscope ingest)")
    token = _on_step.set(on_step)
    try:
        return run_query("ask", settings, ASK_LIBRARY, question, settings, config, agent)
    finally:
        _on_step.reset(token)
