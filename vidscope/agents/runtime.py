"""The agent runtime: the observe–reason–act loop, its trace and the checking of citations.

:func:`run_agent` offers the tools (see :mod:`vidscope.agents.tools`) to the chat model, runs the
calls its backend returns (natively or read from JSON text, the backend's job), limits steps
(forcing a final answer at the limit), nudges the model out of repetitive calls, records a trace of
every step and checks the citations of the final answer against the video and against what the
tools returned in this conversation.

The answer comes from the terminal ``finish`` tool. A reply without a tool call is a thought, as in
DVD's code: the loop records it, reminds the model to call a tool or ``finish`` (or, when the reply
announces a tool under any spelling, "FrameInspect" included, to call that tool) and goes on. It
asks for the finish call before the step limit only when a thought gives its final answer in so
many words ("**Final Answer**: C") after the tools returned evidence: DVD's last turn, brought
forward (a deviation, said at the loop). Only the step limit (or, when set,
``agent.prose_replies`` such replies in a row) makes the last stated answer the answer, always
marked ``forced``; a plan ("I should confirm it with frame_inspect") is never taken as one.
Citations are read in the shapes models write them (``{start, end}`` objects, ``"0:10-0:15"``);
the same invalid call made twice gets the exact expected shape back, once. A conversation that no
longer fits the model's context loses its oldest observations first, then ends in a forced
answer. Citations are checked by :mod:`vidscope.agents.citations`; a run that ends with no answer
in words is marked ``no_answer`` (the strategies put the extractive answer in its place).

The four loops (this one, SAMA's, AgentCVR's and AVI's) read a reply one way,
:func:`read_turn` (:mod:`vidscope.agents.replies`: a call, prose, a data echo, a cut-off or an
empty reply, and the answer it states), and end one way: :func:`final_answer` builds every
run's answer, :func:`end_run` every forced end. Each loop keeps only its paper's protocol.
"""

from __future__ import annotations

import difflib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from vidscope.agents import prompts
from vidscope.agents.answers import Answer, Citation, TraceStep, UsageTotals
from vidscope.agents.citations import Evidence, parse_citations
from vidscope.agents.replies import ANSWER_TOOLS as ANSWER_TOOLS
from vidscope.agents.replies import Reply, read_reply
from vidscope.agents.replies import announced_tool as announced_tool
from vidscope.agents.replies import statement as statement
from vidscope.agents.replies import tool_name_pattern as tool_name_pattern
from vidscope.agents.strategies import StrategyRequest
from vidscope.agents.tools import (
    Tool,
    ToolContext,
    ToolOutcome,
    execute_tool,
    validation_message,
)
from vidscope.core.errors import ContextLengthExceeded, ModelOutputError
from vidscope.models.json_tools import quote_data
from vidscope.models.protocols.chat import ChatMessage, ChatReply, ToolCall, ToolSpec


def pick_choice(
    choice: str | Sequence[str] | None,
    answer: str,
    options: Sequence[str] | None,
    *,
    multi_select: bool = False,
) -> str | None:
    """The option letter: an explicit ``choice`` argument, else the answer's text, each read by the
    evaluation's own rules (:func:`~vidscope.evaluation.answers.extract_choice`), so an agent's
    choice and a benchmark's score never disagree.

    Only explicit letter forms ("(B)", "B.", "Answer: B", a bare "B") or exactly one option's text
    as whole words name a choice: a leading article is never a letter ("A purple elephant is the
    code." chose nothing), and anything ambiguous is no choice (counted as unparsed by ``eval``).

    For a multi-select question (CrossVid's BU: one to three options are right) the choice is the
    set of letters, sorted and joined (``"AC"`` from ``"AC"``, ``"A, C"``, ``"C and A"``, or a
    list ``["C", "A"]``), read by the evaluation's own rule
    (:func:`~vidscope.evaluation.metrics.letter_set`); an answer that is not letters alone falls
    back to the single-letter reading."""
    if not options:
        return None
    # The evaluation's readers, imported for questions with options only (its benchmark item
    # models cost a cold open question ~4 ms to build; issue 44).
    from vidscope.evaluation.answers import extract_choice
    from vidscope.evaluation.metrics import letter_set

    if multi_select:
        for text in (_joined(choice), answer):
            chosen = letter_set(text, len(options))
            if chosen:
                return "".join(sorted(chosen))
    for text in (_joined(choice), answer):
        letter = extract_choice(text, options)
        if letter:
            return letter
    return None


def picked_choice(
    choice: str | Sequence[str] | None,
    answer: str,
    options: Sequence[str] | None,
    *,
    multi_select: bool = False,
) -> tuple[str | None, Literal["given", "read"] | None]:
    """:func:`pick_choice` and where its letter came from: ``"given"`` when the ``choice``
    argument alone names it (the agent's answer action chose it), ``"read"`` when only the
    answer's words did (our lenient extraction rules, which a strict score must not take as the
    reply; ``Answer.choice_source``)."""
    letter = pick_choice(choice, answer, options, multi_select=multi_select)
    if letter is None:
        return None, None
    given = choice is not None and pick_choice(choice, "", options, multi_select=multi_select) == letter
    return letter, "given" if given else "read"


def _joined(choice: str | Sequence[str] | None) -> str | None:
    """A choice given as a list of letters (a model's JSON ``["A", "C"]``) as one string."""
    if choice is None or isinstance(choice, str):
        return choice
    return ", ".join(str(c) for c in choice)


# ============================================================================ the loop


StepCallback = Callable[[TraceStep], None]


@dataclass
class LoopState:
    """What one conversation accumulates: messages, trace, usage, the evidence shown to the model."""

    messages: list[ChatMessage]
    trace: list[TraceStep] = field(default_factory=list)
    usage: UsageTotals = field(default_factory=UsageTotals)
    evidence: Evidence = field(default_factory=Evidence)
    recent_calls: list[tuple[str, str]] = field(default_factory=list)
    #: Replies in a row without a tool call (thoughts).
    prose_replies: int = 0
    #: The last answer the model stated without a usable finish call (a thought that was not a
    #: plan, or the answer of a finish call whose other arguments were invalid): what a forced end
    #: returns instead of "no answer".
    stated_answer: str | None = None
    #: Invalid calls already told their exact expected shape (tool name, normalised arguments).
    shown_shapes: set[tuple[str, str]] = field(default_factory=set)
    #: The last invalid call (to tell the same one made again).
    last_invalid: tuple[str, str] | None = None
    #: The conversation no longer fits the model's context, even with observations trimmed.
    out_of_context: bool = False
    #: Why the last turn gave no reply (the backend's error), None after a reply.
    problem: ModelOutputError | None = None
    #: The question takes several option letters (CrossVid BU): the choice is their set.
    multi_select: bool = False
    #: The model gave its final answer in words after the tools returned evidence: the next turn
    #: is DVD's last one, asking for the finish call (:func:`run_agent`).
    concluded: bool = False


def format_observation(outcome: ToolOutcome) -> str:
    """The text a tool message carries: a note, then the result as JSON inside ``<video_data>``."""
    if not outcome.ok:
        return prompts.ERROR_NOTE.format(tool=outcome.tool, error=outcome.error)
    assert outcome.result is not None
    return f"{prompts.DATA_NOTE.format(tool=outcome.tool)}\n{quote_data(outcome.result.for_model())}"


def normalise_args(arguments: dict[str, Any], *, digits: int = 0) -> str:
    """``arguments`` as one comparable string: text without case or extra spaces, numbers rounded
    to ``digits`` decimals (whole seconds for the loop detector)."""

    def norm(value: Any) -> Any:
        if isinstance(value, str):
            return " ".join(value.lower().split())
        if isinstance(value, float):
            return round(value, digits)
        if isinstance(value, list):
            return [norm(v) for v in value]
        if isinstance(value, dict):
            return {k: norm(v) for k, v in sorted(value.items())}
        return value

    return json.dumps(norm(arguments), sort_keys=True, default=str)


def _near_identical(a: tuple[str, str], b: tuple[str, str]) -> bool:
    return a[0] == b[0] and (a[1] == b[1] or difflib.SequenceMatcher(None, a[1], b[1]).ratio() >= 0.9)


def run_agent(
    ctx: ToolContext,
    question: str,
    video_ids: Sequence[str],
    *,
    options: Sequence[str] | None = None,
    on_step: StepCallback | None = None,
    system: str = prompts.SYSTEM,
    opening: str | None = None,
    multi_select: bool = False,
) -> Answer:
    """Answer ``question`` about ``video_ids`` with the chat model and ``ctx.registry``'s tools.

    ``system`` and ``opening`` (the first user turn; by default the question and the videos) let a
    strategy frame the conversation differently, e.g. over the whole library with no video listed.
    ``multi_select``: the choice is the set of letters the answer names (:func:`pick_choice`).
    """
    if ctx.chat is None:
        raise ValueError("run_agent needs a chat model; use the extractive answerer without one")
    if ctx.registry is None:
        raise ValueError("run_agent needs a tool registry")
    finish = next((t for t in (ctx.registry.get(n) for n in ctx.registry.names) if t.terminal), None)
    if finish is None:
        raise ValueError("the tool registry has no terminal (finish) tool")
    if system == prompts.SYSTEM and not ctx.may_see():
        system = prompts.SYSTEM_TEXT_ONLY  # DVD's prompt without the look it cannot make
    state = LoopState(
        messages=[
            ChatMessage(role="system", content=system),
            ChatMessage(
                role="user",
                content=opening
                or prompts.question_prompt(question, describe_videos(ctx, video_ids), list(options or [])),
            ),
        ],
        multi_select=multi_select,
    )
    specs = offered_specs(ctx)
    default_video = video_ids[0] if video_ids else ""

    def record(step: TraceStep) -> None:
        state.trace.append(step)
        if on_step is not None:
            on_step(step)

    # DVD's loop (dvd/dvd_core.py, DVDCoreAgent.run): ``max_iterations`` model turns in all, the
    # last of them asked to call finish ("Please call the `finish` function to finish the task.")
    # with the same tools on offer as every other turn. Offering only finish there would change
    # the tools a chat template renders first, and a local server would re-read the whole
    # conversation for that turn (35 s of the real 1.5B model's 124-s question, RESULTS.md).
    #
    # Deviation: a reply that gives its final answer in words after the tools returned evidence
    # ("**Final Answer**: C") brings that last turn forward. DVD's loop would go on, and a model
    # that answers in words instead of calling finish restates its answer turn after turn (the
    # real 1.5B model: three more turns, 36 s, then the same answer at the step limit;
    # benchmarks/RESULTS.md, 2026-11-29); asked for the finish call now, it keeps its one chance
    # to cite the clips.
    for _ in range(ctx.config.max_steps - 1):
        reply = ask_model(ctx, state, specs, record)
        if state.out_of_context:
            break
        if reply is None:
            continue
        answer = _handle_reply(ctx, state, reply, finish, default_video, options, record)
        if answer is not None:
            return answer
        if state.concluded:
            break

    # The last turn (or no room left): only a finish call is taken; any other call is not run,
    # as its result would never be read (DVD's loop ends after this turn whatever it called).
    why = "the conversation no longer fits the context" if state.out_of_context else "step limit reached"
    state.out_of_context = False
    shape = prompts.finish_shape(finish.name, one_video=len(video_ids) == 1)
    if state.concluded:
        why = "the answer was given in words"
        state.messages.append(ChatMessage(role="user", content=prompts.CONCLUDED_FINISH.format(call=shape)))
    else:
        state.messages.append(ChatMessage(role="user", content=prompts.FORCED_FINISH.format(call=shape)))
        record(TraceStep(index=len(state.trace) + 1, kind="nudge", observation=why))
    reply = ask_model(ctx, state, specs, record)
    last = read_turn(state, reply, ctx.registry.names)
    for call in last.calls:
        if reply is not None and call.name == finish.name:
            answer = _finish(ctx, state, call, reply, finish, default_video, options, record)
            if answer is not None:
                # The model's own finish after its conclusion is not forced; at a limit it is.
                answer.forced = not state.concluded
                return answer
    # The model stated an answer but never finished properly: it is the answer, forced; without
    # one, no answer (the extractive answer stands in: strategies.answer).
    return end_run(state, options, last=last, why=f"({why})")


def offered_specs(ctx: ToolContext) -> list[ToolSpec]:
    """The registry's tools the model is offered: all of them, except the tools that send frames
    to a vision model (``uses_models`` names ``vlm``) when no model can look at frames. A text-only
    setup that offered them would pay a turn (and the tools' schemas in every prompt) for a note
    that nothing can look."""
    assert ctx.registry is not None
    if ctx.may_see():
        return ctx.registry.specs()
    blind = {name for name in ctx.registry.names if "vlm" in (ctx.registry.get(name).uses_models or ())}
    return [spec for spec in ctx.registry.specs() if spec.name not in blind]


def run_tool_loop(ctx: ToolContext, request: StrategyRequest) -> Answer:
    """A strategy's run (:data:`~vidscope.agents.strategies.StrategyRun`): :func:`run_agent` over
    ``ctx.registry`` (DVD's tools, or GRPO's action space); a library question is framed over the
    whole library, no video listed."""
    if request.scope == "library":
        store = ctx.store
        opening = prompts.library_prompt(request.prompt, store.count(store.videos), store.count(store.clips))
        return run_agent(
            ctx, request.prompt, [], on_step=request.on_step, system=prompts.LIBRARY_SYSTEM, opening=opening
        )
    return run_agent(
        ctx,
        request.prompt,
        request.video_ids,
        options=request.options,
        on_step=request.on_step,
        multi_select=request.multi_select,
    )


def describe_videos(ctx: ToolContext, video_ids: Sequence[str]) -> list[dict[str, object]]:
    """Id, file name, duration and clip count of each video (what the opening prompt lists)."""
    videos: list[dict[str, object]] = []
    for video_id in video_ids:
        video = ctx.video(video_id)
        videos.append(
            {
                "video_id": video_id,
                "file_name": video.file_name,
                "duration": video.duration,
                "clips": ctx.clip_count(video_id),
            }
        )
    return videos


def ask_model(
    ctx: ToolContext,
    state: LoopState,
    specs: list[ToolSpec],
    record: StepCallback,
    *,
    json_output: bool = False,
    bad_reply: str = prompts.BAD_REPLY,
    phase: str | None = None,
) -> ChatReply | None:
    """One model turn over ``state.messages`` offering ``specs``, counted in ``state.usage``.

    A reply the backend could not use (even after re-asking) becomes a ``model-error`` step and a
    ``bad_reply`` message telling the model what went wrong; the result is then ``None``. A request
    that does not fit the model's context is retried with the oldest observations trimmed
    (:func:`trim_observations`); when nothing is left to trim, ``state.out_of_context`` is set and
    the result is ``None``, so the caller forces an answer.
    """
    assert ctx.chat is not None
    started = time.perf_counter()
    extra: dict[str, Any] = {"json_output": True} if json_output else {}
    while True:
        try:
            reply = ctx.chat.chat(
                state.messages,
                tools=specs,
                max_tokens=ctx.config.max_tokens,
                temperature=ctx.config.temperature,
                **extra,
            )
            break
        except ContextLengthExceeded as exc:
            state.usage.model_calls += 1
            trimmed = trim_observations(state.messages)
            what = f"trimmed the {trimmed} oldest observations" if trimmed else "nothing left to trim"
            record(
                TraceStep(
                    index=len(state.trace) + 1,
                    kind="context",
                    phase=phase,
                    observation=f"context exceeded, {what}: {str(exc)[:200]}",
                    ok=False,
                    latency_s=time.perf_counter() - started,
                )
            )
            if not trimmed:
                state.out_of_context = True
                return None
        except ModelOutputError as exc:
            state.usage.model_calls += 1
            state.problem = exc
            state.messages.append(ChatMessage(role="user", content=bad_reply.format(error=exc)))
            record(
                TraceStep(
                    index=len(state.trace) + 1,
                    kind="model-error",
                    phase=phase,
                    observation=str(exc)[:300],
                    ok=False,
                    latency_s=time.perf_counter() - started,
                )
            )
            return None
    state.usage.add_model(reply.usage)
    state.problem = None
    return reply


def read_turn(state: LoopState, reply: ChatReply | None, tools: Sequence[str]) -> Reply:
    """:func:`~vidscope.agents.replies.read_reply` of a turn's ``reply`` (None: why there was
    none, as :func:`ask_model` noted it), for a loop whose tools are ``tools``."""
    return read_reply(reply, tools, problem=state.problem)


def note_thought(ctx: ToolContext, state: LoopState, reply: Reply) -> bool:
    """Count ``reply``, a reply without a call, in the replies in a row without one and keep the
    answer it states (a plan states none); True when ``agent.prose_replies`` such replies in a
    row end the run with the stated answer (DVD's and SAMA's thoughts)."""
    state.prose_replies += 1
    state.stated_answer = reply.stated or state.stated_answer
    limit = ctx.config.prose_replies
    return (
        reply.announced is None
        and limit is not None
        and state.prose_replies >= limit
        and bool(state.stated_answer)
    )


#: What an observation trimmed to fit the context is replaced with.
TRIMMED = "[observation removed: the conversation no longer fit the model's context]"


def trim_observations(messages: list[ChatMessage]) -> int:
    """Replace the oldest half of the untrimmed tool observations (at least one) with a short note;
    how many were trimmed (0: nothing left to trim).

    Tool messages stay in place, so every tool call keeps its answer and the conversation stays
    valid for the server; the newest observations, which the next step most likely builds on, go
    last. Results written out for models without native tool calls are user turns that start
    with the data note.
    """
    data_note = prompts.DATA_NOTE.split("{tool}")[0]
    candidates = [
        i
        for i, m in enumerate(messages)
        if m.content != TRIMMED
        and (m.role == "tool" or (m.role == "user" and (m.content or "").startswith(data_note)))
    ]
    chosen = candidates[: max(1, len(candidates) // 2)] if candidates else []
    for i in chosen:
        messages[i] = messages[i].model_copy(update={"content": TRIMMED, "images": []})
    return len(chosen)


def reply_cost(reply: ChatReply, *, first: bool = True) -> dict[str, Any]:
    """The :class:`TraceStep` fields saying what ``reply`` cost. A turn's tokens belong to its
    first step only, so totals over a trace count each reply once."""
    # getattr: ChatReply gains ``reasoning`` with the reasoning-model support of the backends.
    thinking = getattr(reply, "reasoning", None)
    return {
        "input_tokens": reply.usage.input_tokens if first else 0,
        "output_tokens": reply.usage.output_tokens if first else 0,
        "model_cache_hit": reply.usage.cache_hit,
        "thinking": thinking if first and thinking else None,
    }


def tool_step(
    index: int,
    call: ToolCall,
    outcome: ToolOutcome,
    reply: ChatReply,
    *,
    first: bool,
    phase: str | None = None,
) -> TraceStep:
    """The trace step of one executed tool call (``first``: the first call of the model's turn)."""
    return TraceStep(
        index=index,
        kind="tool",
        phase=phase,
        reasoning=reply.text if first else None,
        tool=call.name,
        arguments=outcome.arguments,
        observation=outcome.result.summary() if outcome.result is not None else str(outcome.error),
        ok=outcome.ok,
        latency_s=outcome.latency_s + (reply.usage.latency_s if first else 0),
        tool_cached=outcome.cached,
        follows=not first,
        **reply_cost(reply, first=first),
    )


def run_tool(ctx: ToolContext, state: LoopState, call: ToolCall) -> ToolOutcome:
    """Execute ``call`` with ``ctx.registry`` and account for it: tool and model usage, evidence."""
    outcome = execute_tool(ctx, call.name, call.arguments)
    state.usage.tool_calls += 1
    state.usage.tool_cache_hits += int(outcome.cached)
    if outcome.result is not None:
        state.evidence.add(outcome.result, call.name)
        inner = outcome.result.model_usage()
        if inner is not None and not outcome.cached:
            state.usage.add_model(inner)
    return outcome


def _handle_reply(
    ctx: ToolContext,
    state: LoopState,
    reply: ChatReply,
    finish: Tool,
    default_video: str,
    options: Sequence[str] | None,
    record: StepCallback,
) -> Answer | None:
    assert ctx.registry is not None
    said = read_turn(state, reply, ctx.registry.names)
    calls = list(said.calls)
    if not calls:
        # Prose, data, a cut-off or an empty reply: a thought, as in DVD's code.
        text = said.text
        state.messages.append(ChatMessage(role="assistant", content=text))
        if note_thought(ctx, state, said):
            record(
                TraceStep(
                    index=len(state.trace) + 1,
                    kind="answer",
                    reasoning=text or None,
                    observation=f"{state.prose_replies} replies in a row without a tool call (forced)",
                    latency_s=reply.usage.latency_s,
                    **reply_cost(reply),
                )
            )
            return end_run(state, options)
        if said.concludes and state.evidence.supports:
            # A final answer in words, after evidence: the last turn asks for its finish call.
            state.concluded = True
            record(
                TraceStep(
                    index=len(state.trace) + 1,
                    kind="nudge",
                    reasoning=text or None,
                    observation="a final answer in words: asked to call finish with it (the last turn)",
                    latency_s=reply.usage.latency_s,
                    **reply_cost(reply),
                )
            )
            return None
        if said.announced is not None:
            # "I should confirm it with FrameInspect": a plan, not an answer; ask for the call.
            nudge, observation = prompts.TOOL_NUDGE.format(tool=said.announced), f"announced {said.announced}"
        else:
            # A thought: the loop goes on. Each reminder names the turn, so no request repeats the
            # last one word for word (a response cache would otherwise replay the same thought).
            nudge = prompts.CONTINUE_NUDGE.format(
                count=state.prose_replies, limit=ctx.config.prose_replies or ctx.config.max_steps
            )
            observation = "no tool call: a thought; reminded to call a tool or finish"
        state.messages.append(ChatMessage(role="user", content=nudge))
        record(
            TraceStep(
                index=len(state.trace) + 1,
                kind="nudge",
                reasoning=text or None,
                tool=said.announced,
                observation=observation,
                latency_s=reply.usage.latency_s,
                **reply_cost(reply),
            )
        )
        return None

    state.prose_replies = 0
    state.messages.append(ChatMessage(role="assistant", content=reply.text, tool_calls=calls))
    for position, call in enumerate(calls):
        if call.name == finish.name:
            answer = _finish(ctx, state, call, reply, finish, default_video, options, record)
            if answer is not None:
                return answer
            continue  # _finish appended the error observation
        outcome = run_tool(ctx, state, call)
        observation = format_observation(outcome)
        if not outcome.ok and call.name in ctx.registry.names:
            observation += shape_hint(state, call, ctx.registry.get(call.name).spec())
        state.messages.append(
            ChatMessage(role="tool", content=observation, tool_call_id=call.id, name=call.name)
        )
        record(tool_step(len(state.trace) + 1, call, outcome, reply, first=position == 0))
        remember_call(state, call)
    nudge_if_looping(ctx, state, record)
    return None


def remember_call(state: LoopState, call: ToolCall) -> None:
    """Note an executed ``call`` for the loop detector (:func:`nudge_if_looping`)."""
    state.recent_calls.append((call.name, normalise_args(call.arguments)))


def nudge_if_looping(
    ctx: ToolContext,
    state: LoopState,
    record: StepCallback,
    *,
    message: str = prompts.LOOP_NUDGE,
    phase: str | None = None,
) -> None:
    """After ``loop_repeats`` near-identical calls in a row, tell the model (``message`` with
    ``{tool}`` and ``{count}``) to try something else."""
    n = ctx.config.loop_repeats
    recent = state.recent_calls[-n:]
    if len(recent) == n and all(_near_identical(recent[0], other) for other in recent[1:]):
        state.messages.append(ChatMessage(role="user", content=message.format(tool=recent[0][0], count=n)))
        record(
            TraceStep(
                index=len(state.trace) + 1,
                kind="nudge",
                phase=phase,
                tool=recent[0][0],
                observation=f"loop detected: {n} near-identical {recent[0][0]} calls",
            )
        )
        state.recent_calls.clear()


def example_arguments(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """A valid example value for a JSON schema (the exact shape a repeated invalid call is shown)."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return example_arguments(defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), defs)
    if "anyOf" in schema:
        options = [o for o in schema["anyOf"] if o.get("type") != "null"]
        return example_arguments(options[0] if options else {}, defs)
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        required = schema.get("required", list(props))
        return {k: example_arguments(v, defs) for k, v in props.items() if k in required or k == "citations"}
    if kind == "array":
        items = schema.get("items", {})
        if items.get("type") == "number" or items.get("items", {}).get("type") == "number":
            return [10.0, 15.0] if items.get("type") == "number" else [[10.0, 15.0]]
        return [example_arguments(items, defs)]
    return {"string": "...", "number": 10.0, "integer": 1, "boolean": True}.get(str(kind), "...")


def shape_hint(state: LoopState, call: ToolCall, spec: ToolSpec) -> str:
    """For the same invalid call made a second time in a row: the call written in its exact expected
    shape (once per call); otherwise nothing."""
    key = (call.name, normalise_args(call.arguments))
    repeated = state.last_invalid == key
    state.last_invalid = key
    if not repeated or key in state.shown_shapes:
        return ""
    state.shown_shapes.add(key)
    example = {"name": call.name, "arguments": example_arguments(spec.parameters)}
    return f" The same call failed twice. Call it exactly in this shape: {json.dumps(example)}"


def _finish(
    ctx: ToolContext,
    state: LoopState,
    call: ToolCall,
    reply: ChatReply,
    finish: Tool,
    default_video: str,
    options: Sequence[str] | None,
    record: StepCallback,
) -> Answer | None:
    try:
        args = finish.validate(call.arguments)
    except ValidationError as exc:
        stated = call.arguments.get("answer")
        if isinstance(stated, str) and stated.strip():
            state.stated_answer = stated.strip()
        error = validation_message(exc) + shape_hint(state, call, finish.spec())
        state.messages.append(
            ChatMessage(
                role="tool",
                tool_call_id=call.id,
                name=call.name,
                content=prompts.ERROR_NOTE.format(tool=call.name, error=error),
            )
        )
        record(
            TraceStep(
                index=len(state.trace) + 1,
                kind="finish",
                tool=call.name,
                arguments=call.arguments,
                observation=error,
                ok=False,
                input_tokens=reply.usage.input_tokens,
                output_tokens=reply.usage.output_tokens,
                model_cache_hit=reply.usage.cache_hit,
            )
        )
        return None
    values = args.model_dump()
    if str(values.get("answer", "")).strip().rstrip(".").lower() == prompts.ANSWER_PLACEHOLDER:
        # The last turn's shown shape copied as it is: the answer stated before it, else none.
        values["answer"] = state.stated_answer or ""
    return finish_answer(ctx, state, call.name, values, default_video, options, record, reply)


def finish_answer(
    ctx: ToolContext,
    state: LoopState,
    tool: str,
    values: dict[str, Any],
    default_video: str,
    options: Sequence[str] | None,
    record: StepCallback,
    reply: ChatReply | None = None,
    *,
    citations: Sequence[object] | None = None,
) -> Answer:
    """The end of a run, the same for every strategy: the answer's citations (``values``', unless
    ``citations`` are given) checked against the video and this conversation's evidence, a
    ``finish`` step recorded (with the reply's cost when the answer came in its own model turn),
    and the :class:`Answer` with its choice read from ``values`` or the text."""
    raw = values.get("citations") or [] if citations is None else citations
    checked = parse_citations(ctx, state.evidence, raw, default_video)
    cost: dict[str, Any] = {}
    if reply is not None:
        cost = {"reasoning": reply.text, "latency_s": reply.usage.latency_s, **reply_cost(reply)}
    record(
        TraceStep(
            index=len(state.trace) + 1,
            kind="finish",
            tool=tool,
            arguments=values,
            observation=f"{sum(c.verified for c in checked)}/{len(checked)} citations verified",
            **cost,
        )
    )
    return final_answer(state, str(values.get("answer", "")), checked, options, choice=values.get("choice"))


#: The answer of a run that ended without an answer in words.
NO_ANSWER = "No answer was reached {why}."


def end_run(
    state: LoopState,
    options: Sequence[str] | None,
    *,
    last: Reply | None = None,
    why: str = "within the turn limit",
) -> Answer:
    """The forced end of a run, the same for every loop (at its turn limit, its tolerance, or
    ``agent.prose_replies`` thoughts in a row): the answer the ``last`` turn states in words
    (never a plan, a data echo or a cut-off reply: :mod:`vidscope.agents.replies`), else the one
    the model stated earlier (``state.stated_answer``), with the choice it names, marked
    ``forced``; without either, "No answer was reached ``why``" (``no_answer``: the strategies put
    the extractive answer in its place, :func:`~vidscope.agents.strategies.extractive_floor`)."""
    said = last.stated if last is not None else None
    return forced_answer(state, said or state.stated_answer, options, why)


def forced_answer(
    state: LoopState, text: str | None, options: Sequence[str] | None, why: str = "within the turn limit"
) -> Answer:
    """The best guess at a loop's limit: ``text`` (what the model last stated) with the choice it
    names, marked ``forced``; without one (or only data), "No answer was reached" (``no_answer``)."""
    return final_answer(state, text or "", [], options, forced=True, why=why)


def final_answer(
    state: LoopState,
    text: str,
    citations: list[Citation],
    options: Sequence[str] | None,
    *,
    choice: str | Sequence[str] | None = None,
    forced: bool = False,
    why: str = "(the reply was data, not an answer)",
) -> Answer:
    """The run's :class:`Answer`, whichever loop ends it: ``text``'s words (:func:`statement`:
    never a data echo), its choice, the citations; ``no_answer`` when no words are left."""
    said = statement(text)
    letter, source = picked_choice(choice, said, options, multi_select=state.multi_select)
    return Answer(
        answer=said or NO_ANSWER.format(why=why),
        choice=letter,
        choice_source=source,
        citations=citations,
        trace=state.trace,
        usage=state.usage,
        forced=forced or not said,
        no_answer=not said,
    )
