"""AgentCVR: a master agent that answers by dispatching queries to a visual and an audio sub-agent.

Each turn the master replies with one JSON object: ``{"actions": [...]}`` where an action is
``{"action": "visual_query", "video_id", "t0", "t1", "focus"}``, ``{"action": "audio_query",
"video_id", "t0", "t1"}`` or ``{"action": "answer", "answer", "citations": [{video_id, start,
end}]}``. The format is checked; a malformed reply costs a turn and is answered with one line
saying what is wrong. The queries of one turn run concurrently (each through the tool cache in its
own thread; a task run inside a flow run) and their results come back in the order they were
asked. The turn limit is ``[agent] cvr_max_turns`` (T_max = 20, as in the paper) and the turn
tolerance ``[agent] cvr_turn_tolerance`` (T_tol = 10): App. B sets "a maximum turn limit T_max = 20
and a tolerance zone T_tol = 10 to prevent infinite looping". The paper gives the value, not the
mechanism, and the released code (wang-jh24/AgentCVR: ``agent_system/agent_executor.py``, verl's
``tool_agent_loop.py`` with ``max_assistant_turns: 15``) has no counter of its own beside its
turn limits and three format retries per turn; ours: T_tol bounds the turns *in a row without
progress* — a turn makes progress when one of its queries, not asked before in the run, returns
a result (the same call asked again, a refused query, an unusable reply or an answer set aside is
no progress). After T_tol such turns the run ends with the best guess, forced.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from vidscope.agents.cvr.actions import audio_query, visual_query
from vidscope.agents.cvr.master import SYSTEM, cvr_registry, opening_messages
from vidscope.agents.cvr.tasks import task_prompt
from vidscope.agents.multi_video import answer as answer_tool
from vidscope.agents.multi_video import json_object
from vidscope.agents.replies import Reply
from vidscope.agents.runtime import (
    Answer,
    LoopState,
    StepCallback,
    TraceStep,
    ask_model,
    end_run,
    finish_answer,
    format_observation,
    read_turn,
)
from vidscope.agents.strategies import StrategyRequest
from vidscope.agents.tools import ToolContext, ToolOutcome, execute_tool
from vidscope.models.json_tools import find_tool_call, offered_name
from vidscope.models.protocols.chat import ChatMessage

QUERIES = (visual_query.name, audio_query.name)
#: Every action of the master, by name (what its replies are read for).
MASTER_ACTIONS = (*QUERIES, answer_tool.name)
__all__ = ["SYSTEM", "cvr_registry", "parse_actions", "run", "run_cvr"]


def _as_action(call: dict[str, Any]) -> dict[str, Any] | None:
    """A tool call in the shapes models write (``{"name": ..., "arguments": {...}}``, also
    ``tool``/``function``/``parameters``) as a master action, or None."""
    name = call.get("action") or call.get("name") or call.get("tool") or call.get("function")
    args = call.get("arguments", call.get("parameters", call.get("args")))
    if isinstance(name, str) and isinstance(args, dict):
        return {**args, "action": name}
    return None


_VIDEO_KEYS = ("video_id", "video", "id", "vid")
_START_KEYS = ("t0", "start", "start_time", "from")
_END_KEYS = ("t1", "end", "end_time", "to")
_FRAME_KEYS = ("frames", "num_frames", "n_frames", "frame_count")


def _pick(item: dict[str, Any], keys: Sequence[str]) -> Any:
    return next((item[k] for k in keys if k in item), None)


def _target(item: Any, video_ids: Sequence[str], video: Any = None) -> Any:
    """One target as ``{video_id, t0, t1[, frames]}`` from the shapes models write; unknown shapes
    are returned as they are, for the tool's validation to name what is wrong."""
    if isinstance(item, list | tuple) and video is not None and 2 <= len(item) <= 3:
        item = dict(zip(("t0", "t1", "frames"), item, strict=False))
    if not isinstance(item, dict):
        return item
    video = _pick(item, _VIDEO_KEYS) if video is None else video
    index = item.get("video_index")
    if video is None and isinstance(index, int) and 1 <= index <= len(video_ids):
        video = video_ids[index - 1]  # the paper's prompts number the videos from 1
    span = item.get("time_range") or item.get("range")
    start, end = (span[0], span[1]) if isinstance(span, list | tuple) and len(span) == 2 else (None, None)
    start = _pick(item, _START_KEYS) if start is None else start
    end = _pick(item, _END_KEYS) if end is None else end
    if video is None or start is None or end is None:
        return item
    target = {"video_id": video, "t0": start, "t1": end}
    frames = _pick(item, _FRAME_KEYS)
    return {**target, "frames": frames} if frames is not None else target


def visual_arguments(args: dict[str, Any], video_ids: Sequence[str]) -> dict[str, Any]:
    """A master's ``visual_query`` arguments as the tool takes them: ``{targets: [...], focus}``.

    Read besides the protocol's list: targets as a dict keyed by video id (``{"<id>": {"t0", "t1",
    "frames"}}`` or ``{"<id>": [t0, t1, frames]}``), the paper's names (``observation_targets``,
    ``video_index`` from 1, ``start_time``/``end_time``, ``num_frames``, ``focus_prompt``), and one
    range written flat (``video_id, t0, t1``), as a single target.
    """
    rest = dict(args)
    raw = next((rest.pop(k) for k in ("targets", "observation_targets") if k in rest), None)
    focus = next((rest.pop(k) for k in ("focus", "focus_prompt") if k in rest), None)
    if raw is None:
        flat = _target(rest, video_ids)
        if flat is rest:
            return args  # nothing recognisable: the tool's validation says what is missing
        rest = {
            k: v for k, v in rest.items() if k not in (*_VIDEO_KEYS, *_START_KEYS, *_END_KEYS, *_FRAME_KEYS)
        }
        rest.pop("video_index", None), rest.pop("time_range", None)
        raw = [flat]
    if isinstance(raw, dict):
        shaped = [_target(spec, video_ids, video=key) for key, spec in raw.items()]
        # {"video_id": ..., "t0": ...} is one target written as a dict, not a dict keyed by video
        targets = [_target(raw, video_ids)] if _pick(raw, _VIDEO_KEYS) is not None else shaped
    elif isinstance(raw, list):
        targets = [_target(item, video_ids) for item in raw]
    else:
        targets = raw
    return {**rest, "targets": targets, **({"focus": focus} if focus is not None else {})}


def parse_actions(text: str | None) -> tuple[list[dict[str, Any]], str | None]:
    """The actions of a master reply, or an error line saying why the reply is unusable.

    Besides the protocol's ``{"actions": [...]}``, a single action object and a tool call written
    the way models write them (``{"name": "visual_query", "arguments": {...}}``, in a fence, in
    ``<tool_call>`` tags, with doubled braces) are read: a real Coder model wrote its calls so.
    """
    data = json_object(text)
    if data is None:
        found = find_tool_call(text, (*QUERIES, answer_tool.name))
        data = {"action": found.name, **found.arguments} if found is not None else None
    if data is None:
        return [], 'the reply is not one JSON object {"actions": [...]}'
    if "actions" not in data and "action" not in data:
        single = _as_action(data)
        data = single if single is not None else data
    actions = data.get("actions", [data] if "action" in data else None)
    if isinstance(actions, list):
        actions = [(_as_action(a) or a) if isinstance(a, dict) and "action" not in a else a for a in actions]
    if not isinstance(actions, list) or not actions:
        return [], '"actions" must be a non-empty list'
    for i, action in enumerate(actions):
        # The paper's spelling of an action ("VisualQuery") names the action, as it names a tool.
        name = action.get("action") if isinstance(action, dict) else None
        known = offered_name(name, MASTER_ACTIONS) if isinstance(name, str) else None
        if known is None:
            return [], f"action {i + 1} must be an object whose action is visual_query, audio_query or answer"
        actions[i] = {**action, "action": known}
    # An answer beside queries (a real 1.5B master did this every turn) is premature, not unusable:
    # run_cvr runs the queries and sets the answer aside until their results are read.
    return actions, None


def master_actions(reply: Reply, text: str | None) -> tuple[list[dict[str, Any]], str | None]:
    """The actions of the master's turn (:func:`parse_actions` of its ``text``), or, when the text
    holds none, its calls as :mod:`vidscope.agents.replies` read them (a call returned natively,
    or one written as code) as actions; else the error line of :func:`parse_actions`."""
    actions, problem = parse_actions(text)
    if problem is not None and reply.calls:
        return [{**call.arguments, "action": call.name} for call in reply.calls], None
    return actions, problem


#: Said to the master when its turn held queries and an answer: the answer was set aside.
ANSWER_WAITS = (
    "Your answer was set aside: answer alone, in a later turn, once you have read the results of "
    "your queries above."
)


def run_queries(ctx: ToolContext, calls: list[tuple[str, dict[str, Any]]]) -> list[ToolOutcome]:
    """Run the queries of one turn concurrently; outcomes in the order asked."""
    if len(calls) == 1:
        return [execute_tool(ctx, *calls[0])]
    with ThreadPoolExecutor(max_workers=len(calls), thread_name_prefix="cvr-query") as pool:
        # Each thread runs in a copy of this context, so its Prefect task belongs to this flow run.
        futures = [
            pool.submit(contextvars.copy_context().run, execute_tool, ctx, name, args) for name, args in calls
        ]
        return [f.result() for f in futures]


#: Why a run ended at the turn tolerance (the forced answer's "No answer was reached ..." note).
IDLE_END = "after {n} turns in a row without progress (the turn tolerance T_tol)"


def _query_key(name: str, arguments: dict[str, Any]) -> str:
    """A query's identity: its action and arguments (a repeat asks nothing new)."""
    return json.dumps([name, arguments], sort_keys=True, default=str)


#: The ablation part that allows one round of queries (``vidscope eval --ablation cvr:no-multi-turn``).
SINGLE_PASS = "multi_turn"

#: Said to the master of a single-pass run after its round of queries.
ANSWER_NOW = "This run allows one round of queries: answer now, from the results above."

#: Said to the master when a task's answer comes before its minimum of queries.
TOO_EARLY = (
    "Your answer was set aside: this task needs at least {n} answered queries before the answer "
    "({done} so far; refused queries do not count)."
)


def _fields(action: dict[str, Any]) -> dict[str, Any]:
    """An action's arguments: beside it, or inside ``params`` as the paper's prompts write them;
    the paper's ``thought`` dropped, its ``final_answer`` read as the answer (a letter string as
    the choice too)."""
    args = {k: v for k, v in action.items() if k not in ("action", "thought", "params")}
    params = action.get("params")
    if isinstance(params, dict):
        args = {**params, **args}
    if "final_answer" in args and "answer" not in args:
        final = args.pop("final_answer")
        letters = isinstance(final, str) and final.strip().isalpha() and final.strip().isupper()
        if letters and "choice" not in args:
            args["choice"] = final.strip()
        elif isinstance(final, list) and final and all(isinstance(f, str) for f in final):
            args.setdefault("choice", final)  # a multi-select answer written ["A", "C"]
        args["answer"] = final if isinstance(final, str) else json.dumps(final)
    return args


def _call(action: dict[str, Any], video_ids: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """A query action as a tool call (its name, its arguments in the tool's shape)."""
    args = _fields(action)
    if action["action"] == visual_query.name:
        args = visual_arguments(args, video_ids)
    return action["action"], args


def run(ctx: ToolContext, request: StrategyRequest) -> Answer:
    """The AgentCVR strategy's run: :func:`run_cvr`."""
    return run_cvr(
        ctx,
        request.prompt,
        request.video_ids,
        options=request.options,
        on_step=request.on_step,
        task=request.task,
        multi_select=request.multi_select,
        single_pass=SINGLE_PASS in request.ablations,
    )


def run_cvr(
    ctx: ToolContext,
    question: str,
    video_ids: Sequence[str],
    *,
    options: Sequence[str] | None = None,
    on_step: StepCallback | None = None,
    task: str | None = None,
    multi_select: bool = False,
    single_pass: bool = False,
) -> Answer:
    """Answer ``question`` about ``video_ids`` with the AgentCVR master agent (``ctx.chat``).

    ``task`` (a CrossVid task code, :mod:`.tasks`) puts that task's prompt before the question and
    holds back answers until ``[agent] cvr_min_queries`` queries have run (the paper's rule).
    ``multi_select`` (also implied by a multi-select task, BU) reads the answer's choice as the
    set of letters it names. ``single_pass`` (the single-pass ablation) runs one round of queries
    and then takes only an answer (the ≥4 rule then asks for nothing more)."""
    if ctx.chat is None:
        raise ValueError("AgentCVR needs a planner model; use the extractive answerer without one")
    ctx.registry = ctx.registry or cvr_registry()
    prompt = task_prompt(task) if task else None
    min_queries = ctx.config.cvr_min_queries if prompt is not None and not single_pass else 0
    rounds = 0  # turns whose queries ran (a single-pass run allows one)
    opening = opening_messages(ctx, question, video_ids, options, task=task, single_pass=single_pass)
    state = LoopState(messages=opening)
    state.multi_select = multi_select or (prompt is not None and prompt.multi_select)

    def record(step: TraceStep) -> None:
        state.trace.append(step)
        if on_step is not None:
            on_step(step)

    # Queries that returned something: the task's rule counts these, not refused ones (a frame
    # tool without eyes, a range outside the video).
    answered = 0
    asked: set[str] = set()  # queries that returned a result: asking one again is no progress
    idle = 0  # turns in a row without progress (T_tol bounds them)
    tolerance = ctx.config.cvr_turn_tolerance
    for _ in range(ctx.config.cvr_max_turns):
        if idle >= tolerance:
            record(
                TraceStep(
                    index=len(state.trace) + 1,
                    kind="answer",  # the forced end, as at the prose limit (not a malformed reply)
                    observation=f"ended {IDLE_END.format(n=idle)} (forced)",
                )
            )
            return end_run(state, options, why=f"({IDLE_END.format(n=idle)})")
        idle += 1  # until a query of this turn returns something new
        reply = ask_model(ctx, state, [], record)
        if reply is None:
            continue
        state.messages.append(ChatMessage(role="assistant", content=reply.text or ""))
        said = read_turn(state, reply, MASTER_ACTIONS)
        actions, problem = master_actions(said, reply.text)
        if problem is not None:
            # Not the protocol's JSON: its words, when it states an answer, are the forced fallback.
            state.stated_answer = said.stated or state.stated_answer
            state.messages.append(
                ChatMessage(role="user", content=f"Unusable reply: {problem}. Reply again.")
            )
            record(TraceStep(index=len(state.trace) + 1, kind="model-error", observation=problem, ok=False))
            continue
        queries = [a for a in actions if a["action"] != answer_tool.name]
        set_aside = [a for a in actions if a["action"] == answer_tool.name] if queries else []
        if not queries and answered < min_queries:  # the task's rule: not yet
            state.stated_answer = str(_fields(actions[0]).get("answer") or "").strip() or state.stated_answer
            line = TOO_EARLY.format(n=min_queries, done=answered)
            state.messages.append(ChatMessage(role="user", content=line))
            record(TraceStep(index=len(state.trace) + 1, kind="model-error", observation=line, ok=False))
            continue
        if not queries:
            fields = _fields(actions[0])
            cited = [c for c in fields.get("citations") or [] if isinstance(c, dict)]
            return finish_answer(
                ctx, state, answer_tool.name, fields, video_ids[0], options, record, citations=cited
            )
        if single_pass and rounds >= 1:  # queries after the one round are not run
            state.messages.append(ChatMessage(role="user", content=ANSWER_NOW))
            record(TraceStep(index=len(state.trace) + 1, kind="nudge", observation=ANSWER_NOW))
            continue
        rounds += 1
        calls = [_call(a, video_ids) for a in queries]
        outcomes = run_queries(ctx, calls)
        observations = []
        for outcome in outcomes:
            state.usage.tool_calls += 1
            state.usage.tool_cache_hits += int(outcome.cached)
            answered += int(outcome.ok)
            key = _query_key(outcome.tool, outcome.arguments)
            if outcome.ok and key not in asked:
                asked.add(key)
                idle = 0
            if outcome.result is not None:
                state.evidence.add(outcome.result, outcome.tool)
                inner = outcome.result.model_usage()
                if inner is not None and not outcome.cached:
                    state.usage.add_model(inner)
            observations.append(format_observation(outcome))
            record(
                TraceStep(
                    index=len(state.trace) + 1,
                    kind="tool",
                    tool=outcome.tool,
                    arguments=outcome.arguments,
                    observation=outcome.result.summary() if outcome.result else str(outcome.error),
                    ok=outcome.ok,
                    latency_s=outcome.latency_s,
                    tool_cached=outcome.cached,
                )
            )
        if set_aside:
            state.stated_answer = str(set_aside[0].get("answer") or "").strip() or state.stated_answer
            observations.append(ANSWER_WAITS)
        if single_pass:
            observations.append(ANSWER_NOW)
        state.messages.append(ChatMessage(role="user", content="\n\n".join(observations)))
    # Turn limit: the master's last stated answer as a best guess with its choice, forced.
    return end_run(state, options)
