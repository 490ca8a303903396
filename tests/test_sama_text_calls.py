"""A SAMA planner that writes its tool call as text, or names a tool as the paper does
("VideoReader"), still gets the tool run (issue 29): the real ``run_sama`` loop, the real
``openai`` backend against the loopback server, the simulator answering the tools."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from llm_server import Reply, ScriptedLLMServer, text, tool_call

from vidscope.agents.prompts import FORCED_ANSWER, SAMA_REPEATED_CALL, SAMA_REPEATS_ANSWER
from vidscope.agents.sama.agent import NEXT_TURN, run_sama
from vidscope.agents.simulator.script import Event, Script, ScriptVideo
from vidscope.agents.simulator.simulator import ScriptSimulator, SimContext
from vidscope.agents.simulator.tools_sama import sim_sama_registry
from vidscope.core.settings import Settings
from vidscope.models import registry

READ = {"video_id": "street", "t0": 10.0, "t1": 16.0, "question": "How many cars?"}
CITATION = {"video_id": "street", "start": 10.0, "end": 16.0}
ANSWER = tool_call("answer", {"answer": "2 cars", "citations": [CITATION]})

#: The ways models write one video_reader call.
SHAPES: dict[str, Reply] = {
    "json fence in prose": text(
        "I will read the parked cars.\n```json\n"
        + json.dumps({"name": "video_reader", "arguments": READ})
        + "\n```"
    ),
    "python call": text('video_reader(video_id="street", t0=10, t1=16, question="How many cars?")'),
    "paper name, native call": tool_call("VideoReader", READ),
    "paper name in a json fence": text(
        "```json\n" + json.dumps({"name": "VideoReader", "arguments": READ}) + "\n```"
    ),
    "paper name as a python call": text(
        'Let me look. VideoReader(video_id="street", t0=10, t1=16, question="How many cars?")'
    ),
    # The real 1.5B model (tests/real_model, compare-sama, 2026-11-29): other tools' arguments set
    # to null, in a tools tag it never closed — refused three turns running before.
    "null arguments it does not take, in an unclosed tag": text(
        "<tools>\n"
        + json.dumps({"name": "video_reader", "arguments": {**READ, "time_range": None, "lines": None}})
        + "\n</"
    ),
}


def street() -> Script:
    video = ScriptVideo(
        video_id="street",
        duration=30.0,
        events=[
            Event(
                event_id="parked",
                start=10.0,
                end=16.0,
                kind="object",
                label="two cars parked",
                subject="car",
                attributes={"count": 2},
            )
        ],
    )
    return Script(script_id="street", videos=[video])


def run(server: ScriptedLLMServer, tmp_path: Path, replies: list[Reply], **agent: object):  # type: ignore[no-untyped-def]
    server.script([text('{"type": "reading"}'), *replies])
    options = {"openai": {"base_url": server.base_url, "max_retries": 0, "timeout_s": 30, "cache": False}}
    settings = Settings(
        data_dir=tmp_path / "data",
        models={
            "chat": "openai:scripted",
            "captioner": None,
            "speech_recognizer": None,
            "text_reader": None,
            "options": options,
        },
        agent=agent,
    )
    ctx = SimContext(
        settings, ScriptSimulator(street()), chat=registry.chat_model(settings), registry=sim_sama_registry()
    )
    return run_sama(ctx, "How many cars are parked?", ["street"])


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_call_written_as_text_or_named_as_in_the_paper_is_run(
    shape: str, llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    result = run(llm_server, tmp_path, [SHAPES[shape], ANSWER])
    tools = [s for s in result.trace if s.kind == "tool"]
    assert [s.tool for s in tools] == ["video_reader"] and tools[0].ok, result.trace
    assert (tools[0].arguments["t0"], tools[0].arguments["t1"]) == (10.0, 16.0)
    assert result.usage.tool_calls == 1 and not result.forced
    # The reading reached the planner's next turn through the evidence memory.
    memory = llm_server.chat_requests[-1]["messages"][-1]["content"]
    assert "video_reader: distinct count of car = 2.0 in [10, 16]s" in memory
    assert result.answer == "2 cars" and [c.verified for c in result.citations] == [True]


def test_prose_then_an_answer_written_as_text_ends_the_loop(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    answer = 'answer(answer="2 cars", citations=[{"video_id": "street", "start": 10, "end": 16}])'
    result = run(
        llm_server, tmp_path, [text("There seem to be two cars parked."), SHAPES["python call"], text(answer)]
    )
    kinds = [s.kind for s in result.trace]
    assert "nudge" in kinds and kinds.count("tool") == 1
    assert result.answer == "2 cars" and not result.forced
    assert [c.verified for c in result.citations] == [True]


def test_a_tool_announced_in_prose_is_asked_for_by_name(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    plan = text("I will use VideoReader on 10-16 s to count the cars.")
    result = run(llm_server, tmp_path, [plan, SHAPES["paper name, native call"], ANSWER])
    (nudge,) = [s for s in result.trace if s.kind == "nudge"]
    assert nudge.tool == "video_reader" and nudge.observation == "announced video_reader"
    asked = llm_server.chat_requests[2]["messages"][-1]["content"]
    assert "You said you would use video_reader: call it now" in asked
    assert result.answer == "2 cars" and not result.forced


def test_prose_replies_in_a_row_end_with_the_stated_answer(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    """As the single-video loops do: with agent.prose_replies set (3), that many thoughts in a row
    end the loop with the last one stated, marked forced, long before the turn limit."""
    thoughts = [
        text("Probably two cars."),
        text("I think two cars are parked."),
        text("Two cars are parked."),
    ]
    result = run(llm_server, tmp_path, [*thoughts, ANSWER], prose_replies=3)
    assert result.forced and result.answer == "Two cars are parked." and result.citations == []
    assert [s.kind for s in result.trace].count("nudge") == 2 and result.trace[-1].kind == "answer"
    assert result.usage.model_calls == len(llm_server.chat_requests) == 4  # the classification + 3


def test_replies_that_are_only_data_are_no_stated_answer(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    """What the real Qwen2.5-Coder 1.5B planner wrote in `compare` instead of a call or an answer:
    the classifier's JSON again, then an empty data block like the ones it is shown. Neither is an
    answer: it neither becomes the answer at the limit ("<video_data>{}</video_data>" was) nor ends
    the loop as a stated answer after three replies."""
    junk = [text('{"type": "comparison"}'), text("<video_data>\n{}\n</video_data>")]
    result = run(llm_server, tmp_path, [*junk * 5, junk[0]])
    assert result.forced and "video_data" not in result.answer and result.choice is None
    assert result.answer.startswith("No answer was reached") and result.no_answer
    # The classification + the paper's 10 turns + the best-guess turn at the limit.
    assert result.usage.model_calls == 12

    said = run(llm_server, tmp_path, [text("Two cars are parked."), *junk], prose_replies=3)
    assert said.forced and said.answer == "Two cars are parked."


def test_statement_keeps_words_and_drops_data() -> None:
    from vidscope.agents.runtime import statement

    assert statement('<video_data>\n{"clips": []}\n</video_data>') == ""
    assert statement('{"type": "comparison"}') == "" and statement("[]") == ""
    # An interval written as JSON is an answer (AgentCVR's FSA answers "[35.0, 40.0]"), not data.
    assert statement("[35.0, 40.0]") == "[35.0, 40.0]"
    # A tool result pasted back, with a lead-in (the real 1.5B DVD planner's forced answer): data.
    assert statement('Here is the result: {"clips": [{"start": 35.0, "end": 40.0}]}') == ""
    assert statement('```json\n{"answer": "2 cars", "citations": []}\n```') == "2 cars"
    # The real 1.5B SAMA planner's best guess at the limit: a broken answer call; its words stand.
    broken = '{"name": "answer", "arguments": The ferry ticket is cheaper at the harbour tour.'
    assert statement(broken) == "The ferry ticket is cheaper at the harbour tour."
    assert statement('{"name": "clip_search", "arguments": {"query": "ferry"}}') == ""  # a call, not words
    assert statement("The ticket is cheaper at the river port. <video_data>{}</video_data>") == (
        "The ticket is cheaper at the river port."
    )
    assert statement("{not json} but words") == "{not json} but words"
    assert statement(None) == ""


def test_an_answer_is_kept_when_its_citations_name_no_video(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    """The real 1.5B planner answered B ten times with citations lacking ``video_id`` and every
    answer was refused ("No answer was reached"). A question about one video: they are its."""
    bare = tool_call("answer", {"answer": "2 cars", "citations": [{"start": 10, "end": 16}]})
    result = run(llm_server, tmp_path, [SHAPES["paper name, native call"], bare])
    assert result.answer == "2 cars" and not result.forced
    assert [(c.video_id, c.start, c.end) for c in result.citations] == [("street", 10.0, 16.0)]


def test_citations_naming_no_video_of_several_are_dropped_with_the_reason() -> None:
    from vidscope.agents.sama.agent import _resolved_citations

    raw = [
        {"start": 1, "end": 2},
        {"video_id": "b", "start": 3, "end": 4},
        [5, 6],
        {"video_id": "z", "start": 0, "end": 1},
    ]
    kept, dropped = _resolved_citations(raw, ["a", "b"])
    assert kept == [{"video_id": "b", "start": 3.0, "end": 4.0}] and dropped == 3


def test_at_the_turn_limit_the_planner_gives_its_best_guess(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    """No stated answer by the limit: one more turn takes only the answer tool (issue 35 reads
    SAMA's App. C.2 rule 4 so), rather than a letter read out of a dump of facts. The tools on
    offer stay the turns' own, so a local server's prompt cache keeps the prefix."""
    junk = text('{"type": "comparison"}')
    result = run(llm_server, tmp_path, [SHAPES["paper name, native call"], *[junk] * 9, ANSWER])
    assert result.forced and result.answer == "2 cars" and not result.no_answer
    last, turn = llm_server.chat_requests[-1], llm_server.chat_requests[-2]
    assert last["tools"] == turn["tools"] and "answer" in [t["function"]["name"] for t in last["tools"]]
    assert "turn limit has been reached" in json.dumps(last["messages"])
    # Its last words: the turns' "call one tool to gather…" after it sent the real 1.5B planner
    # gathering again instead of answering.
    said = last["messages"][-1]["content"]
    assert said.endswith(FORCED_ANSWER) and NEXT_TURN not in said


def test_at_the_turn_limit_a_call_other_than_answer_is_not_run(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    """The last turn takes only the answer tool: a search there is not run, and with nothing
    stated the run has no answer (the extractive answer stands in)."""
    junk = text('{"type": "comparison"}')
    search = SHAPES["paper name, native call"]
    result = run(llm_server, tmp_path, [search, *[junk] * 9, search])
    assert result.forced and result.no_answer
    assert result.usage.tool_calls == 1  # the first turn's search only


def test_a_repeated_call_is_refused_once_and_the_second_asks_for_the_answer(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    """App. C.2's rule 5: never repeat a call. The real 1.5B planner (tests/real_model,
    compare-sama, 2026-11-29) sent one call on turns 2, 4 and 6 and, between them, the same call
    with the last result pasted back as an argument; every turn after the first ran nothing new.
    Now the first repeat is refused with the rule, and the second asks for the answer at once."""
    reading = {"answer": "two cars", "counts": {"car": 2}, "frame_times": [11.0, 13.0]}
    pasted = text(
        "<tools>\n"
        + json.dumps({"name": "video_reader", "arguments": {**READ, "time_range": None, **reading}})
        + "\n</"
    )
    again = SHAPES["python call"]  # the same call in another shape, its question spaced and cased
    result = run(llm_server, tmp_path, [SHAPES["paper name, native call"], pasted, again, ANSWER])
    assert result.usage.tool_calls == 1, result.trace
    refused = [s for s in result.trace if s.kind == "nudge" and s.tool == "video_reader"]
    assert [s.observation for s in refused] == [
        "a repeated call, not run again (1 of 2)",
        "a repeated call, not run again (2 of 2)",
    ]
    # The turn after the first repeat says why nothing ran; after the second, only the answer.
    told = llm_server.chat_requests[3]["messages"][-1]["content"]
    assert SAMA_REPEATED_CALL.format(tool="video_reader") in told
    last = llm_server.chat_requests[-1]["messages"][-1]["content"]
    assert last.endswith(SAMA_REPEATS_ANSWER) and NEXT_TURN not in last
    assert len(llm_server.chat_requests) == 5  # the classification, 3 turns, the answer turn
    assert result.answer == "2 cars" and result.forced
    assert [c.verified for c in result.citations] == [True]


def test_a_narrower_window_or_another_question_is_not_a_repeat(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    narrower = tool_call("video_reader", {**READ, "t0": 12.0})
    other = tool_call("video_reader", {**READ, "question": "What colour are the cars?"})
    result = run(llm_server, tmp_path, [SHAPES["paper name, native call"], narrower, other, ANSWER])
    assert result.usage.tool_calls == 3 and not result.forced
    assert not [s for s in result.trace if s.kind == "nudge"]


def test_a_result_pasted_back_as_arguments_is_not_an_argument() -> None:
    """The real 1.5B planner's subtitle_retriever call carrying the previous result's lines:
    the lines (a field of the tool's result) are dropped, not refused; an argument that is
    neither taken nor a result field is still refused."""
    from pydantic import ValidationError

    from vidscope.agents.sama.tools_find import subtitle_retriever

    line = {"start": 29.87, "end": 32.05, "text": "A ticket for the ferry cost $12.", "score": 32.8}
    call = {"video_id": "8e71", "query": "Where is the ferry ticket cheaper?", "time_range": None}
    assert subtitle_retriever.validate({**call, "lines": [line]}).model_dump() == {
        "video_id": "8e71",
        "query": "Where is the ferry ticket cheaper?",
    }
    with pytest.raises(ValidationError):
        subtitle_retriever.validate({**call, "top_k": 5})
