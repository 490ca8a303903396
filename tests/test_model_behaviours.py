"""What real models do, scripted, against the DVD loop through the real HTTP backend (issue 28).

Each behaviour is named after something a real model did (a Qwen2.5-Coder 1.5B behind llama.cpp's
server, or a scripted server imitating reasoning models), and each test asserts the outcome the
paper's protocol requires, not what the code happened to do:

* Deep Video Discovery's loop (its Alg. 1 and its public code, as issue 28 reads them): the agent
  reasons, acts with a tool, observes, and repeats until it *answers* (the finish action) or hits
  the step budget, where an answer is forced. A reply without an action is a thought in that code:
  the loop goes on; nothing asks for a *final* answer before the budget is spent — except that a
  thought giving its final answer in so many words after the tools returned evidence brings the
  budget's last turn (DVD's "Please call the `finish` function") forward (a deviation: the real
  1.5B model restated its answer until the budget was spent).
* The paper names its tools "Global Browse", "Clip Search" and "Frame Inspect"; models trained on
  such text write those names, or CamelCase ("FrameInspect").
* Citations are ranges of the video; models write them as ``[s, e]`` pairs, ``{start, end}``
  objects or ``"m:ss-m:ss"`` strings.
"""

from __future__ import annotations

import json

from llm_server import Reply, text, tool_call
from test_agent_runtime import DURATION, VIDEO_ID
from test_ask import ANSWER_RANGE, QUESTION, finish_call, search, world  # noqa: F401  (fixture)

from vidscope.agents import prompts
from vidscope.agents.tools import AgentConfig
from vidscope.flows.ask import run_ask

FACT = "The code is purple elephant."


def kinds(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [s.kind for s in result.trace]


def tool_steps(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [s.tool or "" for s in result.trace if s.kind == "tool"]


def last_user_message(request: dict) -> str:
    return next(m["content"] for m in reversed(request["messages"]) if m["role"] == "user")


# ----------------------------------------------------------------------------- prose replies


def test_prose_first_is_a_thought_and_the_loop_goes_on(world) -> None:  # noqa: F811
    settings, _, server = world
    server.script(
        [
            text("The vault code was probably said aloud somewhere in the video."),
            search("secret code vault"),
            finish_call(FACT, [ANSWER_RANGE]),
        ]
    )
    result = run_ask(settings, VIDEO_ID, QUESTION)
    assert result.answer == FACT and not result.forced  # from finish, after the search
    assert tool_steps(result) == ["clip_search"]
    reminder = last_user_message(server.chat_requests[1])
    # Never a request for a *final* answer before the step limit.
    assert "final answer" not in reminder.lower() and "call a tool" in reminder.lower()


def test_two_prose_replies_in_a_row_do_not_end_the_question_without_a_tool_call(world) -> None:  # noqa: F811
    settings, _, server = world
    server.script(
        [
            text("I need to find where the code is mentioned."),
            text("The code is probably purple elephant."),
            search("secret code"),
            finish_call(FACT, [ANSWER_RANGE]),
        ]
    )
    result = run_ask(settings, VIDEO_ID, QUESTION)
    assert result.answer == FACT and not result.forced
    assert result.usage.tool_calls >= 1
    # The reminders differ, so a response cache can never replay the same thought.
    reminders = [last_user_message(r) for r in server.chat_requests[1:3]]
    assert reminders[0] != reminders[1]


def test_a_model_that_only_talks_goes_on_to_the_step_limit_and_ends_forced_with_what_it_said(
    world,  # noqa: F811
) -> None:
    """DVD's code: a reply without an action is a thought and the loop goes on; only the step
    budget ends it (issue 35: the default). The last thing it said is the forced answer."""
    settings, _, server = world
    steps = 4
    server.script([text(f"My guess {i}: the code is purple elephant.") for i in range(steps)])
    result = run_ask(settings, VIDEO_ID, QUESTION, config=AgentConfig(max_steps=steps))
    assert result.forced and result.answer == f"My guess {steps - 1}: the code is purple elephant."
    assert len(server.chat_requests) == steps and server.pending == 0  # the last turn is the forced one


def test_a_prose_bound_when_set_ends_a_model_that_only_talks_early(world) -> None:  # noqa: F811
    settings, _, server = world
    server.script([text(f"My guess {i}: the code is purple elephant.") for i in range(3)])
    result = run_ask(settings, VIDEO_ID, QUESTION, config=AgentConfig(prose_replies=3))
    assert result.forced and result.answer == "My guess 2: the code is purple elephant."
    assert len(server.chat_requests) == 3 and server.pending == 0


#: The real 1.5B model's reply after its first DVD search (question_speed.py, 2026-11-29), its
#: facts this test's: the clips read back, then its conclusion in words, no finish call.
CONCLUSION = (
    "From these clips, I can see that the code is purple elephant. The other clips do not mention "
    "the code.\n\n### Step 4: Reflect\nThe evidence directly answers the question.\n\n"
    "### Conclusion\nThe vault code is purple elephant.\n\n**Final Answer**: purple elephant"
)


def test_a_final_answer_in_words_after_evidence_is_asked_for_its_finish_call_at_once(world) -> None:  # noqa: F811
    """The real 1.5B model searched, then wrote "**Final Answer**: C" in words; DVD's loop went on
    and the model restated it for three turns (36 s on 2 cores) until the budget's forced turn.
    Now the last turn comes at once; its finish call is the model's own answer: cited, not forced."""
    settings, _, server = world
    server.script([search("secret code vault"), text(CONCLUSION), finish_call(FACT, [ANSWER_RANGE])])
    result = run_ask(settings, VIDEO_ID, QUESTION)
    assert result.answer == FACT and not result.forced
    assert [(c.evidence, c.verified) for c in result.citations] == [("retrieved", True)]
    assert len(server.chat_requests) == 3 and server.pending == 0
    assert last_user_message(server.chat_requests[2]) == prompts.CONCLUDED_FINISH.format(
        call=prompts.finish_shape("finish", one_video=True)
    )
    # Every tool stays on offer there, as on DVD's last turn (a local server's prompt cache).
    assert server.chat_requests[2]["tools"] == server.chat_requests[1]["tools"]
    assert kinds(result) == ["tool", "nudge", "finish"]


def test_a_final_answer_in_words_never_called_ends_the_run_one_turn_later(world) -> None:  # noqa: F811
    """The real 1.5B model's forced turn: the answer in words again, with its citations in text."""
    settings, _, server = world
    again = "The vault code is purple elephant.\n\n**Citations**: [[35.0, 40.0]]"
    server.script([search("secret code vault"), text(CONCLUSION), text(again)])
    result = run_ask(settings, VIDEO_ID, QUESTION)
    assert result.forced and result.answer.startswith("The vault code is purple elephant.")
    assert len(server.chat_requests) == 3 and server.pending == 0


def test_the_shown_shape_copied_as_it_is_answers_with_what_was_stated(world) -> None:  # noqa: F811
    """A model copying the last turn's shape word for word ("your answer") answers nothing new:
    the answer it stated before stands, with the citations it gave."""
    settings, _, server = world
    server.script([search("secret code vault"), text(CONCLUSION), finish_call("your answer", [ANSWER_RANGE])])
    result = run_ask(settings, VIDEO_ID, QUESTION)
    assert "your answer" not in result.answer.lower() and result.answer.endswith("purple elephant")
    assert [c.verified for c in result.citations] == [True]


def test_a_final_answer_before_any_evidence_is_a_thought(world) -> None:  # noqa: F811
    """DVD's prompt: "Do not guess". A conclusion before any tool returned evidence is a thought;
    the loop goes on and asks for a tool call, not for the finish call."""
    settings, _, server = world
    server.script(
        [text("**Final Answer**: purple elephant"), search("secret code"), finish_call(FACT, [ANSWER_RANGE])]
    )
    result = run_ask(settings, VIDEO_ID, QUESTION)
    assert result.answer == FACT and not result.forced
    reminder = last_user_message(server.chat_requests[1])
    assert not reminder.startswith("You gave your final answer") and "call a tool" in reminder.lower()


def test_the_plan_sentence_is_never_the_answer(world) -> None:  # noqa: F811
    """Scripted as seen: clip_search, "I should confirm it with FrameInspect", then a plan sentence."""
    settings, _, server = world
    server.script(
        [
            search("secret code"),
            text("I should confirm it with FrameInspect before answering."),
            text("Next I will use Frame Inspect on 35-40 s to read the screen."),
            tool_call(
                "frame_inspect",
                {"video_id": VIDEO_ID, "question": "What code is shown?", "time_ranges": [ANSWER_RANGE]},
                call_id="f",
            ),
            text("The screen reads CODE: PURPLE ELEPHANT."),  # the vision model's look
            finish_call(FACT, [ANSWER_RANGE]),
        ]
    )
    result = run_ask(settings, VIDEO_ID, QUESTION)
    assert result.answer == FACT and not result.forced
    assert tool_steps(result) == ["clip_search", "frame_inspect"]
    nudges = [s for s in result.trace if s.kind == "nudge"]
    assert [s.tool for s in nudges] == ["frame_inspect", "frame_inspect"]  # both spellings recognised
    assert last_user_message(server.chat_requests[2]) == prompts.TOOL_NUDGE.format(tool="frame_inspect")


def test_a_plan_at_the_step_limit_is_not_taken_as_the_answer(world) -> None:  # noqa: F811
    settings, _, server = world
    server.script(
        [
            text("The code is purple elephant, I think."),
            search("secret code"),
            text("I should check it with Clip Search again."),  # forced-finish reply: a plan
        ]
    )
    result = run_ask(settings, VIDEO_ID, QUESTION, config=AgentConfig(max_steps=2))
    assert result.forced and result.answer == "The code is purple elephant, I think."


# ----------------------------------------------------------------------- calls written as text


def _written_search(template: str) -> object:
    call = {"name": "clip_search", "arguments": {"video_id": VIDEO_ID, "query": "secret code", "top_k": 3}}
    return text(template.replace("CALL", json.dumps(call)))


def test_tool_calls_written_in_the_text_are_run(world) -> None:  # noqa: F811
    settings, _, server = world
    shapes = [
        "<tool_call>\nCALL\n</tool_call>",  # Hermes / Qwen template, server parser off
        "I will search first.\n```json\nCALL\n```",  # a fenced block after a plan
        "{CALL}",  # Qwen2.5-Coder behind llama.cpp: doubled braces
    ]
    for shape in shapes:
        server.script([_written_search(shape), finish_call(FACT, [ANSWER_RANGE])])
        result = run_ask(settings, VIDEO_ID, QUESTION + f" ({shape[:6]})")
        assert tool_steps(result) == ["clip_search"], shape
        assert result.answer == FACT and result.citations[0].verified, shape


def test_the_finish_arguments_written_alone_are_the_finish_call(world) -> None:  # noqa: F811
    """The real 1.5B planner's eval turn after a clip_search (tests/real_model, 2026-11-29):
    ``{"answer": "B", "citations": [[0.0, 5.0], …], "choice": "B"}``, finish's arguments without
    the call around them. It was kept as words and the run forced one more turn, whose answer had
    lost those citations; now it is the finish call, and its citations are checked."""
    settings, _, server = world
    start, end = ANSWER_RANGE
    bare = {"answer": FACT, "citations": [[0.0, 5.0], [start, end]], "choice": None}
    server.script([search("secret code"), text("```json\n" + json.dumps(bare, indent=2) + "\n```")])
    result = run_ask(settings, VIDEO_ID, QUESTION + " (bare)")
    assert not result.forced and result.answer == FACT
    assert [(c.start, c.end) for c in result.citations] == [(0.0, 5.0), (start, end)]
    assert [c.verified for c in result.citations] == [False, True]
    assert len(server.chat_requests) == 2  # no forced turn
    # A reading pasted back (an answer, no citations) is data, not a finish call.
    reading = {"video_id": VIDEO_ID, "question": "what code?", "answer": FACT, "counts": {}}
    server.script(
        [search("secret code", call_id="s2"), text(json.dumps(reading)), finish_call(FACT, [ANSWER_RANGE])]
    )
    again = run_ask(settings, VIDEO_ID, QUESTION + " (reading)")
    assert "nudge" in kinds(again) and again.citations[0].verified


# ----------------------------------------------------------------------------- citations


def test_citations_in_other_shapes_are_read(world) -> None:  # noqa: F811
    settings, _, server = world
    start, end = ANSWER_RANGE
    for i, citations in enumerate(
        [
            [{"start": start, "end": end}],
            [f"0:{int(start):02d}-0:{int(end):02d}"],
            [start, end],  # one pair, not a list of pairs
        ]
    ):
        server.script([search("secret code", call_id=f"s{i}"), finish_call(FACT, citations)])
        result = run_ask(settings, VIDEO_ID, f"{QUESTION} ({i})")
        assert not result.forced, citations
        assert [(c.start, c.end, c.verified) for c in result.citations] == [(start, end, True)], citations


def test_the_same_invalid_call_twice_gets_the_exact_shape_back_once(world) -> None:  # noqa: F811
    settings, _, server = world
    bad = {"answer": FACT, "citations": "around the middle"}
    server.script(
        [
            search("secret code"),
            tool_call("finish", bad, call_id="b1"),
            tool_call("finish", bad, call_id="b2"),
            tool_call("finish", bad, call_id="b3"),
            finish_call(FACT, [ANSWER_RANGE]),
        ]
    )
    result = run_ask(settings, VIDEO_ID, QUESTION)
    assert result.answer == FACT and not result.forced
    tool_messages = [m["content"] for m in server.chat_requests[-1]["messages"] if m["role"] == "tool"]
    hints = [m for m in tool_messages if "exactly in this shape" in m]
    assert len(hints) == 1 and '"citations": [[10.0, 15.0]]' in hints[0]


def test_a_stated_answer_is_never_lost(world) -> None:  # noqa: F811
    """The model answers, but every finish call is invalid, up to the step limit."""
    settings, _, server = world
    bad = {"answer": FACT, "citations": "the part with the vault"}
    server.script(
        [
            search("secret code"),
            tool_call("finish", bad, call_id="b1"),
            tool_call("finish", bad, call_id="b2"),  # the forced-finish turn
        ]
    )
    result = run_ask(settings, VIDEO_ID, QUESTION, config=AgentConfig(max_steps=2))
    assert result.forced and result.answer == FACT
    assert "No answer" not in result.answer and result.citations == []


# ----------------------------------------------------------------------------- evidence levels
# Issue 28: each citation gets a level — perceived (frames or detections over that range, looked at
# and answering), retrieved (a clip hit, transcript or on-screen text line inside the range),
# echoed (a range the model supplied itself, an overview, a perception call that found nothing) or
# none; only the first two verify, a citation wider than 30 s never verifies, and a look over the
# whole video verifies nothing by its range alone.


def test_a_clip_hit_is_retrieved_evidence(world) -> None:  # noqa: F811
    settings, _, server = world
    server.script([search("secret code"), finish_call(FACT, [ANSWER_RANGE, [100.0, 105.0]])])
    result = run_ask(settings, VIDEO_ID, QUESTION)
    levels = [(c.evidence, c.verified) for c in result.citations]
    assert levels[0] == ("retrieved", True)
    assert levels[1] == ("none", False)


def test_frames_looked_at_are_perceived_and_a_wide_citation_never_verifies(world) -> None:  # noqa: F811
    settings, _, server = world
    start, end = ANSWER_RANGE
    server.script(
        [
            tool_call(
                "frame_inspect",
                {"video_id": VIDEO_ID, "question": "What code is shown?", "time_ranges": [ANSWER_RANGE]},
                call_id="f",
            ),
            text("The screen reads CODE: PURPLE ELEPHANT."),
            finish_call(FACT, [ANSWER_RANGE, [start - 20.0, end + 20.0]]),
        ]
    )
    result = run_ask(settings, VIDEO_ID, QUESTION)
    # The wide one holds the looked range, but most of it was never looked at: echoed at most.
    assert [(c.evidence, c.verified) for c in result.citations] == [("perceived", True), ("echoed", False)]
    assert "wider than 30" in result.citations[1].note
    # The verified one names the call that supports it and what it saw there.
    (support,) = result.citations[0].support
    assert support.tool == "frame_inspect" and "PURPLE ELEPHANT" in support.found


def test_a_look_over_the_whole_video_verifies_nothing_by_its_range(world) -> None:  # noqa: F811
    settings, _, server = world
    duration = DURATION
    server.script(
        [
            tool_call(
                "frame_inspect",
                {"video_id": VIDEO_ID, "question": "Where is the code?", "time_ranges": [[0.0, duration]]},
                call_id="f",
            ),
            text("Somewhere there is a code."),
            finish_call(FACT, [ANSWER_RANGE]),
        ]
    )
    result = run_ask(settings, VIDEO_ID, QUESTION)
    assert [(c.evidence, c.verified) for c in result.citations] == [("echoed", False)]


# ----------------------------------------------------------------------------- the AVI loop
# AVI (Alg. 1; Fig. 9: one tool per turn; Fig. 10: retrieval starts with clip_retrieve; Fig. 11-12:
# the review's "**Answer:**" line and "[start s, end s]" interval). Captions and graph facts are
# hints: an answer is perceived only when a successful targeted perception call (object_detect,
# text_extract, boundary_detect) covered what it cites; otherwise it says so and verifies nothing.

RETRIEVE_ARGS = {"video_id": VIDEO_ID, "query": "secret code", "k": 3}
EXTRACT_ARGS = {"video_id": VIDEO_ID, "time_range": ANSWER_RANGE}


def _review(**fields: object) -> object:
    return text(json.dumps(fields))


def test_avi_retrieve_makes_a_call_before_its_phase_ends(world) -> None:  # noqa: F811
    settings, _, server = world
    server.script(
        [
            text("The code is probably in the middle."),  # retrieve "done" without a call: sent back
            tool_call("clip_retrieve", RETRIEVE_ARGS, call_id="c"),
            text("Candidate: 35-40 s."),
            tool_call("text_extract", EXTRACT_ARGS, call_id="t"),
            text("The screen says CODE: PURPLE ELEPHANT at 35-40 s."),
            _review(answer=FACT, citations=[ANSWER_RANGE]),
        ]
    )
    result = run_ask(settings, VIDEO_ID, QUESTION, agent="avi")
    assert [(s.phase, s.tool) for s in result.trace if s.kind == "tool"] == [
        ("retrieve", "clip_retrieve"),
        ("perceive", "text_extract"),
    ]
    assert result.perceived is True and result.citations[0].verified
    assert result.citations[0].evidence == "perceived"


def test_avi_starts_with_clip_retrieve_and_runs_one_tool_per_turn(world) -> None:  # noqa: F811
    settings, _, server = world
    merge = {"video_id": VIDEO_ID, "ranges": [[0, 5], [5, 10]]}
    server.script(
        [
            text(json.dumps({"name": "clip_merge", "arguments": merge})),  # written in text, refused
            tool_call("clip_retrieve", RETRIEVE_ARGS, call_id="c"),
            text("Candidate: 35-40 s."),
            Reply(
                "tool_calls",
                tool_calls=[
                    {"id": "t", "name": "text_extract", "arguments": json.dumps(EXTRACT_ARGS)},
                    {"id": "o", "name": "object_detect", "arguments": json.dumps(EXTRACT_ARGS)},
                ],
            ),
            text("The screen says the code."),
            _review(answer=FACT, citations=[ANSWER_RANGE]),
        ]
    )
    result = run_ask(settings, VIDEO_ID, QUESTION, agent="avi")
    ran = [s.tool for s in result.trace if s.kind == "tool"]
    refused = [s.tool for s in result.trace if s.kind == "refused"]
    assert ran == ["clip_retrieve", "text_extract"] and refused == ["clip_merge", "object_detect"]
    assert result.perceived is True


def test_avi_answers_from_captions_without_perceiving_are_marked(world) -> None:  # noqa: F811
    settings, _, server = world
    server.script(
        [
            tool_call("clip_retrieve", RETRIEVE_ARGS, call_id="c"),
            text("Candidate: 35-40 s: the caption says the code."),
            text("The caption already says it."),  # perceive without a call: sent back once
            text("Still nothing to look at."),
            _review(answer=FACT, citations=[[0.0, 60.0]]),  # cites (nearly) the whole video
        ]
    )
    result = run_ask(settings, VIDEO_ID, QUESTION, agent="avi")
    assert result.perceived is False and result.answer == FACT
    assert all(not c.verified for c in result.citations) and result.unverified_citations == 1
    # Issue 35: the answer says which step of AVI's protocol the run skipped.
    assert result.skipped == ["perception skipped"]


def test_avi_a_perception_call_that_fails_does_not_count(world) -> None:  # noqa: F811
    settings, _, server = world
    server.script(
        [
            tool_call("clip_retrieve", RETRIEVE_ARGS, call_id="c"),
            text("Candidate: 35-40 s."),
            tool_call("text_extract", {"video_id": "no-such-video", "time_range": ANSWER_RANGE}, call_id="t"),
            text("Done looking."),  # no successful look: sent back once
            text("Still done."),
            _review(answer=FACT, citations=[ANSWER_RANGE]),
        ]
    )
    result = run_ask(settings, VIDEO_ID, QUESTION, agent="avi")
    failed = [s for s in result.trace if s.kind == "tool" and s.tool == "text_extract"]
    assert failed and not failed[0].ok
    assert result.perceived is False and not result.citations[0].verified


def test_avi_review_in_the_papers_format_is_read(world) -> None:  # noqa: F811
    settings, _, server = world
    server.script(
        [
            tool_call("clip_retrieve", RETRIEVE_ARGS, call_id="c"),
            text("Candidate: 35-40 s."),
            tool_call("text_extract", EXTRACT_ARGS, call_id="t"),
            text("Seen."),
            text(f"The code is on screen.\n**Answer:** B\n[{ANSWER_RANGE[0]}s, {ANSWER_RANGE[1]}s]"),
        ]
    )
    result = run_ask(settings, VIDEO_ID, QUESTION, options=["red tiger", "purple elephant"], agent="avi")
    assert result.choice == "B" and not result.forced
    assert [(c.start, c.end, c.verified) for c in result.citations] == [(*ANSWER_RANGE, True)]


# ----------------------------------------------------------------------------- AgentCVR
# The master's protocol (AgentCVR §3: actions visual_query / audio_query / answer); a real Coder
# model wrote its calls as {"name": ..., "arguments": {...}} in text. A sub-agent that answered
# "no evidence" returned nothing for that interval: it verifies no citation there.


def test_cvr_reads_tool_calls_in_the_shapes_models_write() -> None:
    from vidscope.agents.cvr.agent import parse_actions

    query = {"video_id": VIDEO_ID, "t0": 30, "t1": 40, "focus": "the code"}
    for written in (
        json.dumps({"name": "visual_query", "arguments": query}),
        "```json\n" + json.dumps({"actions": [{"name": "visual_query", "arguments": query}]}) + "\n```",
        "I will look.\n<tool_call>\n"
        + json.dumps({"name": "visual_query", "arguments": query})
        + "\n</tool_call>",
        "{" + json.dumps({"name": "visual_query", "arguments": query}) + "}",
    ):
        actions, problem = parse_actions(written)
        assert problem is None, written
        assert actions == [{"action": "visual_query", **query}], written


def test_cvr_no_evidence_verifies_nothing() -> None:
    from vidscope.agents.cvr.results import LookedRange, VisualQueryResult

    span = LookedRange(video_id=VIDEO_ID, t0=30, t1=40, frames=8)
    seen = VisualQueryResult(targets=[span], focus="code", answer="A sign reads PURPLE.")
    blind = VisualQueryResult(targets=[span], focus="code", answer="no evidence")
    assert [s.level for s in seen.support()] == ["perceived"]
    assert [s.level for s in blind.support()] == ["echoed"]


def test_cvr_an_answer_beside_queries_waits_for_their_results() -> None:
    """A real 1.5B master sent its queries and its answer in one turn, every turn: the queries are
    read (not refused as unusable) and the answer is one action of its own (AgentCVR §3)."""
    from vidscope.agents.cvr.agent import parse_actions

    query = {"action": "visual_query", "video_id": VIDEO_ID, "t0": 0, "t1": 10, "focus": "ticket"}
    answer = {"action": "answer", "answer": "cheaper at the river port", "citations": []}
    actions, problem = parse_actions(json.dumps({"actions": [query, answer]}))
    assert problem is None and [a["action"] for a in actions] == ["visual_query", "answer"]
