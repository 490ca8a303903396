"""SAMA: a text-only planner guided by skills, with conflict checks and an evidence memory.

Per question: the meta planner classifies it and the matching skill is chosen. Every skill is in
the planner's context in full, the chosen one named to follow; its tool order puts its tools first
among those offered (all of them: a skill guides, it does not hide). Each turn the planner sees the
question, the skills and the evidence memory — verified facts, notes of earlier results and the
latest results in full, not the whole history — and calls one or more tools. Facts the tools state
(counts, colours, times) pass the verification layer (:mod:`vidscope.agents.sama.memory`): a
conflict between comparable facts is re-read with ``video_reader`` over their shared window, and
only the verified value is kept. ``answer`` ends the conversation; its
citations are checked like ``ask``'s.

Beside the list of videos the planner reads each video's chapter overview
(:mod:`vidscope.agents.sama.overview`: the chapters stage's titled parts, bounded, quoted as data,
said to be no evidence) when the video has one, as DVD's ``global_browse`` returns the same list.

Ablations: ``use_skills=False`` offers every tool in declared order with no skill text;
``conflict_check=False`` keeps facts as they come; ``use_chapters=False`` leaves the chapter
overview out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from vidscope.agents import prompts
from vidscope.agents.answers import read_cited_ranges
from vidscope.agents.multi_video import answer as answer_tool
from vidscope.agents.runtime import (
    Answer,
    LoopState,
    StepCallback,
    TraceStep,
    ask_model,
    describe_videos,
    end_run,
    finish_answer,
    normalise_args,
    note_thought,
    read_turn,
    run_tool,
    tool_step,
)
from vidscope.agents.sama.facts import REREAD_NOTE, Fact
from vidscope.agents.sama.memory import EvidenceMemory, admit, estimate_tokens
from vidscope.agents.sama.overview import chapter_overview
from vidscope.agents.sama.skills import META, Skill, classify, load_skills
from vidscope.agents.sama.tools_find import (
    subtitle_extractor,
    subtitle_retriever,
    temporal_grounding,
    visual_similarity,
)
from vidscope.agents.sama.tools_look import object_tracker, scene_graph, video_reader
from vidscope.agents.sama.tools_scenes import scene_detector
from vidscope.agents.strategies import StrategyRequest
from vidscope.agents.tools import ToolContext, ToolRegistry, validation_message
from vidscope.models.json_tools import quote_data
from vidscope.models.protocols.chat import ChatMessage, ToolCall, ToolSpec

#: SAMA's tools in declared order (the order offered without a skill).
SAMA_TOOLS = (
    video_reader,
    temporal_grounding,
    scene_detector,
    scene_graph,
    object_tracker,
    visual_similarity,
    subtitle_retriever,
    subtitle_extractor,
    answer_tool,
)

#: The planner's system prompt: what it sees, then App. C.2's seven strict rules
#: (:data:`vidscope.agents.prompts.SAMA_RULES`, each traced there); the skills follow it.
SYSTEM = prompts.SAMA_SYSTEM
#: The closing line of every planner turn.
NEXT_TURN = "Your turn: call one tool to gather the evidence you still need, or call answer."

#: Told when several options may be right (CrossVid BU: "one to three correct choices").
MULTI_SELECT_NOTE = (
    "One or more options may be right: give every right letter in the answer's choice, in "
    'alphabetical order (e.g. "AC").'
)


#: Repeated calls (a call the planner already made, same tool and arguments) that end the turns:
#: the answer is then asked for at once. App. C.2's rule 5 forbids repeating a call; a planner that
#: breaks it twice has nothing new to look at (the real 1.5B planner, tests/real_model compare-sama,
#: 2026-11-29, sent one subtitle_retriever call on turns 2, 4 and 6 and a copy carrying the
#: result pasted back on 3 and 5: half its 463 s). The first repeat is refused with the rule.
REPEATS_BEFORE_ANSWER = 2


def call_key(registry: ToolRegistry, call: ToolCall) -> str | None:
    """``call`` as its tool would run it (validated; text compared without case or extra spaces,
    times to the hundredth: a narrower window is another call), or None when it would not run."""
    if call.name not in registry:
        return None
    try:
        arguments = registry.get(call.name).validate(call.arguments).model_dump(mode="json")
    except ValidationError:
        return None
    return f"{call.name} {normalise_args(arguments, digits=2)}"


def sama_registry() -> ToolRegistry:
    """SAMA's allow-list."""
    return ToolRegistry(SAMA_TOOLS)


def tool_order(skill: Skill | None, registry: ToolRegistry) -> list[str]:
    """The tools offered: all of them, the skill's first in its order, then the others in
    declared order, answer always last. A skill guides the order; it never hides a tool."""
    if skill is None or not skill.tools:
        return registry.names
    first = [n for n in skill.tools if n in registry and n != answer_tool.name]
    rest = [n for n in registry.names if n not in first and n != answer_tool.name]
    return [*first, *rest, answer_tool.name]


def skills_text(skills: Sequence[Skill], chosen: Skill | None) -> str:
    """Every question skill in full for the planner's context, the chosen one named first. The
    meta planner's skill is not among them: it is the classification call's prompt, and its
    "reply with {"type": …}" would ask the planner for the wrong reply."""
    parts = []
    if chosen is not None:
        parts.append(f"This question is of type {chosen.question_type}: follow the skill {chosen.name}.")
    questions = [s for s in skills if s.question_type != META]
    for skill in sorted(questions, key=lambda s: s is not chosen):
        tools = f"Tools, in order: {', '.join(skill.tools)}. " if skill.tools else ""
        parts.append(
            f"Skill {skill.name} ({skill.question_type}) — {skill.description}\n{tools}"
            f"{skill.body}\nStop when: {skill.stop}"
        )
    return "\n\n".join(parts)


def _prompt(
    question: str,
    videos: list[dict[str, object]],
    skills: str,
    memory: EvidenceMemory,
    last: list[str],
    options: Sequence[str] | None,
    *,
    result_tokens: int | None = None,
    note_tokens: int | None = None,
    multi_select: bool = False,
    overview: str = "",
    next_turn: str = NEXT_TURN,
) -> list[ChatMessage]:
    system = SYSTEM + (f"\n\nSkills:\n{skills}" if skills else "")
    parts = [f"Question: {question}"]
    if options:
        parts.append("Options: " + "; ".join(f"({chr(65 + i)}) {o}" for i, o in enumerate(options)))
        if multi_select:
            parts.append(MULTI_SELECT_NOTE)
    parts.append(f"Videos:\n{json.dumps(videos)}")
    if overview:
        parts.append(overview)
    shown = memory.render(note_tokens, result_tokens)
    # An empty memory in words, not an empty data block: a small model (Qwen2.5-Coder-1.5B in the
    # real-model tier) copies a trailing "<video_data>{}</video_data>" as its reply, turn after turn.
    gathered = any(any(parts.values()) for parts in shown.values() if isinstance(parts, dict))
    evidence = quote_data(shown) if gathered else "(empty: no tool has been called yet)"
    parts.append(f"Evidence memory:\n{evidence}")
    if last:
        parts.append("Since your last turn:\n" + "\n".join(last))
    parts.append(next_turn)  # the last words are what to do now, not the data above
    return [ChatMessage(role="system", content=system), ChatMessage(role="user", content="\n\n".join(parts))]


#: Share of a known context window kept free beside the estimate (the estimate counts about four
#: characters a token; tokenizers differ, JSON and numbers take more).
CONTEXT_SLACK = 0.15


def memory_budgets(ctx: ToolContext, fixed: list[ChatMessage], specs: Sequence[Any]) -> tuple[int, int]:
    """(latest results, notes) token budgets of the evidence memory: ``sama_result_tokens`` and
    ``sama_note_tokens``, lowered to what the model's context leaves when the backend knows its
    window (``context_window()``: the option, or what the server reports) — the fixed part of the
    request (system, rules, skills, tools, question), the reply and a slack of
    :data:`CONTEXT_SLACK` come first, the latest results get up to half of the rest, the notes the
    remainder. Over budget, a result is shown in part and notes are distilled, never refused by the
    server for length."""
    result, notes = ctx.config.sama_result_tokens, ctx.config.sama_note_tokens
    window = getattr(ctx.chat, "context_window", None)
    size = window() if callable(window) else None
    if not isinstance(size, int) or size <= 0:
        return result, notes
    used = sum(
        estimate_tokens(m.content if isinstance(m.content, str) else json.dumps(m.content)) for m in fixed
    )
    used += estimate_tokens(json.dumps([s.model_dump() for s in specs]))
    room = int(size * (1 - CONTEXT_SLACK)) - used - (ctx.config.max_tokens or 0)
    result = max(100, min(result, room // 2))  # 100: within_tokens' least share of a result
    return result, max(0, min(notes, room - result))


def _reread_question(fact: Fact) -> str:
    """What a re-read asks, in the fact's own measure."""
    if fact.kind == "count" and fact.measure == "distinct":
        ask = f"How many different {fact.subject} appear over the whole segment?"
    elif fact.kind == "count":
        ask = f"How many {fact.subject} are visible together at most, in any one frame?"
    elif fact.kind == "colour":
        ask = f"What colour is the {fact.subject} in most frames?"
    else:  # the event's own question, so the re-read's time is of the same event
        ask = (
            fact.subject if fact.subject.rstrip().endswith("?") else f"When does this happen: {fact.subject}?"
        )
    return f"{ask} {REREAD_NOTE}"


def _facts(result: Any) -> list[Fact]:
    facts = getattr(result, "facts", None)
    return list(facts()) if callable(facts) else []


def run_sama(
    ctx: ToolContext,
    question: str,
    video_ids: Sequence[str],
    *,
    options: Sequence[str] | None = None,
    use_skills: bool = True,
    conflict_check: bool = True,
    on_step: StepCallback | None = None,
    multi_select: bool = False,
    use_chapters: bool = True,
) -> Answer:
    """Answer ``question`` about ``video_ids`` with SAMA (``ctx.chat`` is the planner).

    ``use_chapters``: the planner reads each video's chapter overview (when it has one).
    ``multi_select``: several options may be right (CrossVid BU); the planner is told so and the
    answer's choice is the set of letters it names (``"AC"``)."""
    if ctx.chat is None:
        raise ValueError("SAMA needs a planner model; use the extractive answerer without one")
    registry = ctx.registry or sama_registry()
    ctx.registry = registry
    state = LoopState(messages=[], multi_select=multi_select)
    memory = EvidenceMemory(question=question)

    def record(step: TraceStep) -> None:
        state.trace.append(step)
        if on_step is not None:
            on_step(step)

    skill = None
    skills = ""
    if use_skills:
        every = load_skills(ctx.config.skills_dir)
        chosen = classify(question, every, ctx.chat, len(video_ids))
        if chosen.usage is not None:
            state.usage.add_model(chosen.usage)
        skill = chosen.skill
        skills = skills_text(every, skill)
        record(
            TraceStep(
                index=1,
                kind="classify",
                observation=f"type {chosen.question_type or 'none'} by {chosen.how}; skill "
                f"{skill.name if skill else 'none'}",
            )
        )
    names = tool_order(skill, registry)
    specs = registry.specs(names)
    specs.sort(key=lambda s: names.index(s.name))
    videos = describe_videos(ctx, video_ids)
    overview = chapter_overview(ctx, video_ids) if use_chapters else ""
    last: list[str] = []
    fixed = _prompt(
        question, videos, skills, EvidenceMemory(), [], options, multi_select=multi_select, overview=overview
    )
    result_tokens, note_tokens = memory_budgets(ctx, fixed, specs)

    def prompt(lines: list[str], next_turn: str = NEXT_TURN) -> list[ChatMessage]:
        """The planner's request: question, skills and evidence memory, then ``lines``, then
        what to do now (``next_turn``)."""
        return _prompt(
            question,
            videos,
            skills,
            memory,
            lines,
            options,
            result_tokens=result_tokens,
            note_tokens=note_tokens,
            multi_select=multi_select,
            overview=overview,
            next_turn=next_turn,
        )

    def reread(fact: Fact, start: float, end: float) -> list[Fact]:
        arguments = {
            "video_id": fact.video_id,
            "t0": round(start, 2),
            "t1": round(end, 2),
            "question": _reread_question(fact),
        }
        # Through run_tool, like the planner's calls: the re-read counts as a tool call and the
        # vision model it runs counts in the model usage.
        call = ToolCall(id=f"reread-{len(state.trace) + 1}", name=video_reader.name, arguments=arguments)
        outcome = run_tool(ctx, state, call)
        record(
            TraceStep(
                index=len(state.trace) + 1,
                kind="verify",
                tool=video_reader.name,
                arguments=arguments,
                observation=outcome.result.summary() if outcome.result else str(outcome.error),
                ok=outcome.ok,
                tool_cached=outcome.cached,
            )
        )
        if outcome.result is None:
            return []
        return _facts(outcome.result)

    called: set[str] = set()  # the calls run so far (rule 5: none is run twice)
    repeats = 0
    for turn in range(1, ctx.config.sama_max_turns + 1):
        if repeats >= REPEATS_BEFORE_ANSWER:
            break
        # The turn number makes each request differ from the last, so a reply that did not advance
        # the loop is never replayed from the response cache within this conversation.
        header = f"Turn {turn} of {ctx.config.sama_max_turns}."
        state.messages = prompt([header, *last])
        memory.settle()  # the latest results were shown in full; from now on they are notes
        last = []
        reply = ask_model(ctx, state, specs, record)
        if reply is None:
            last.append("Your last reply could not be used; call one of the tools.")
            continue
        said = read_turn(state, reply, names)
        if not said.calls:
            # As in the shared loop: naming a tool with intent ("I will use VideoReader") is a
            # plan, so ask for the call; otherwise a thought, and after agent.prose_replies of
            # them in a row the stated answer ends the loop (forced).
            if note_thought(ctx, state, said):
                record(
                    TraceStep(
                        index=len(state.trace) + 1,
                        kind="answer",
                        reasoning=said.text or None,
                        observation=f"{state.prose_replies} replies in a row without a tool call (forced)",
                    )
                )
                return end_run(state, options)
            if said.announced is not None:
                last.append(
                    f"You said you would use {said.announced}: call it now with a tool call, not a "
                    "description of the call."
                )
            else:
                last.append(
                    f"Your last reply called no tool ({state.prose_replies} of "
                    f"{ctx.config.prose_replies or ctx.config.sama_max_turns} "
                    f"in a row): {quote_data(said.text[:600])}. Call a tool to gather evidence, or call "
                    "the answer tool with the answer and its moments."
                )
            record(
                TraceStep(
                    index=len(state.trace) + 1,
                    kind="nudge",
                    reasoning=said.text or None,
                    tool=said.announced,
                    observation=f"announced {said.announced}"
                    if said.announced
                    else "no tool call: a thought; reminded to call a tool or answer",
                )
            )
            continue
        state.prose_replies = 0
        for position, call in enumerate(said.calls):
            if call.name == answer_tool.name:
                done = _answer(ctx, state, call, video_ids, options, record)
                if done is not None:
                    return done
                last.append(f"answer: {state.trace[-1].observation}")
                continue
            key = call_key(registry, call)
            if key is not None and key in called:
                repeats += 1
                record(
                    TraceStep(
                        index=len(state.trace) + 1,
                        kind="nudge",
                        tool=call.name,
                        arguments=call.arguments,
                        observation=f"a repeated call, not run again ({repeats} of {REPEATS_BEFORE_ANSWER})",
                    )
                )
                last.append(prompts.SAMA_REPEATED_CALL.format(tool=call.name))
                continue
            if key is not None:
                called.add(key)
            outcome = run_tool(ctx, state, call)
            record(tool_step(len(state.trace) + 1, call, outcome, reply, first=position == 0))
            if outcome.result is None:
                last.append(f"{call.name} failed: {outcome.error}")
                continue
            video_id = str(outcome.arguments.get("video_id", video_ids[0]))
            data = json.dumps(outcome.result.for_model(), ensure_ascii=False)
            summary = outcome.result.summary()
            memory.note(video_id, call.name, f"{summary} {data}", summary)
            resolutions = admit(
                memory,
                _facts(outcome.result),
                reread if conflict_check else None,
                ctx.config.sama_max_rereads,
            )
            last.append(f"{call.name}: {outcome.result.summary()}")
            for resolution in resolutions:
                line = resolution.describe()
                last.append(line)
                record(TraceStep(index=len(state.trace) + 1, kind="conflict", observation=line))
    # Turn limit: the planner's own last stated answer, else one more turn in which it must give
    # its best guess with the answer tool (issue 35 reads SAMA's App. C.2 rule 4 so), never a letter
    # read out of the facts; without one, no answer (the extractive answer stands in).
    if state.stated_answer:
        return end_run(state, options)
    # The forced instruction is the request's last words: followed by the turns' "call one tool to
    # gather the evidence you still need", the real 1.5B planner gathered instead of answering.
    if repeats >= REPEATS_BEFORE_ANSWER:
        state.messages = prompt([], next_turn=prompts.SAMA_REPEATS_ANSWER)
        return _best_guess(ctx, state, specs, video_ids, options, record, why="repeated calls")
    state.messages = prompt([], next_turn=prompts.FORCED_ANSWER)
    return _best_guess(ctx, state, specs, video_ids, options, record)


def run(ctx: ToolContext, request: StrategyRequest) -> Answer:
    """The SAMA strategy's run: :func:`run_sama`; the ablations ``skills``, ``conflict_check`` and
    ``chapters`` switch those parts off."""
    return run_sama(
        ctx,
        request.prompt,
        request.video_ids,
        options=request.options,
        use_skills="skills" not in request.ablations,
        conflict_check="conflict_check" not in request.ablations,
        on_step=request.on_step,
        multi_select=request.multi_select,
        use_chapters="chapters" not in request.ablations,
    )


def _answer(
    ctx: ToolContext,
    state: LoopState,
    call: ToolCall,
    video_ids: Sequence[str],
    options: Sequence[str] | None,
    record: StepCallback,
) -> Answer | None:
    """The answer of an ``answer`` call. Citations that do not name their video are resolved (a
    question about one video) or dropped with the reason; a stated answer is never thrown away
    for its citations' shape (the real 1.5B planner answered B ten times with video-less ones)."""
    arguments = dict(call.arguments)
    arguments["citations"], dropped = _resolved_citations(arguments.get("citations"), video_ids)
    try:
        values = answer_tool.validate(arguments).model_dump()
    except ValidationError as exc:
        stated = call.arguments.get("answer")  # kept for the forced end, as the shared loop does
        if isinstance(stated, str) and stated.strip():
            state.stated_answer = stated.strip()
        record(
            TraceStep(
                index=len(state.trace) + 1,
                kind="finish",
                tool=call.name,
                arguments=call.arguments,
                observation=validation_message(exc),
                ok=False,
            )
        )
        return None
    if dropped:
        record(
            TraceStep(
                index=len(state.trace) + 1,
                kind="nudge",
                tool=call.name,
                observation=f"{dropped} citation(s) dropped: they name no video of the question",
            )
        )
    return finish_answer(ctx, state, call.name, values, video_ids[0], options, record)


def _resolved_citations(raw: Any, video_ids: Sequence[str]) -> tuple[list[dict[str, Any]], int]:
    """The cited moments in the answer tool's shape, each naming one of ``video_ids`` (the only one
    when the question has one video), and how many were dropped for naming none."""
    kept: list[dict[str, Any]] = []
    dropped = 0
    for item in read_cited_ranges(raw):
        if isinstance(item, list | tuple) and len(item) == 2:
            item = {"start": item[0], "end": item[1]}
        if not isinstance(item, dict):
            dropped += 1
            continue
        video = str(item.get("video_id") or (video_ids[0] if len(video_ids) == 1 else ""))
        if video not in video_ids:
            dropped += 1
            continue
        kept.append({**item, "video_id": video})
    return kept, dropped


def _best_guess(
    ctx: ToolContext,
    state: LoopState,
    specs: list[ToolSpec],
    video_ids: Sequence[str],
    options: Sequence[str] | None,
    record: StepCallback,
    *,
    why: str = "turn limit reached",
) -> Answer:
    """One last turn (``state.messages`` already asks for it) in which only the answer tool is
    taken: the planner's best guess from its evidence memory, forced; a reply in words counts too,
    data does not. The tools on offer stay ``specs``, the turns' own: offering only the answer
    tool would change the tools a chat template renders first, and a local server would re-read
    the whole prompt (the real 1.5B planner: 1,631 of 3,332 tokens, 34 s); a call of another tool
    here is not run."""
    record(TraceStep(index=len(state.trace) + 1, kind="nudge", observation=why))
    reply = ask_model(ctx, state, specs, record)
    assert ctx.registry is not None  # run_sama set it
    last = read_turn(state, reply, ctx.registry.names)
    for call in last.calls:
        if call.name == answer_tool.name:
            done = _answer(ctx, state, call, video_ids, options, record)
            if done is not None:
                done.forced = True
                return done
    return end_run(state, options, last=last)
