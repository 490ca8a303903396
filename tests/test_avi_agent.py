"""The three-phase AVI agent (retrieve, perceive, review) against the scripted loopback server.

The loop takes its tool registries as parameters; most tests give it the DVD tools (clip_search
to retrieve, frame_inspect to perceive) over the store of ``test_agent_runtime`` so they do not
depend on the AVI tool family. The real ``openai`` backend talks HTTP to ``tests/llm_server.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from llm_server import ScriptedLLMServer, text, tool_call
from rich.console import Console
from test_agent_runtime import ANSWER_CLIP, VIDEO_ID, build_store, make_settings

from vidscope.agents import prompts
from vidscope.agents.avi.agent import (
    ReviewReply,
    is_when_question,
    parse_review,
    run_avi_agent,
)
from vidscope.agents.dvd.tools import clip_search, finish, frame_inspect
from vidscope.agents.tools import AgentConfig, ToolContext, ToolRegistry
from vidscope.core.settings import Settings
from vidscope.models import registry
from vidscope.storage.store import Store

QUESTION = "What is the secret code for the vault?"
ANSWER_RANGE = [ANSWER_CLIP * 5.0, ANSWER_CLIP * 5.0 + 5]
INSPECT_ARGS = {"video_id": VIDEO_ID, "question": "What is written?", "time_ranges": [ANSWER_RANGE]}


@pytest.fixture
def world(tmp_path: Path, llm_server: ScriptedLLMServer) -> tuple[Settings, Store, ScriptedLLMServer]:
    options = {"openai": {"base_url": llm_server.base_url, "max_retries": 0, "timeout_s": 20}}
    settings = make_settings(tmp_path / "data", chat="openai:scripted", options=options)
    return settings, build_store(settings), llm_server


def run(world, question: str = QUESTION, **config: object):
    """The AVI loop with clip_search (retrieve) and frame_inspect (perceive)."""
    settings, store, _ = world
    # Most tests script a Perceive phase that ends at once to test other parts of the loop; the
    # requirement of a perception call is tested on its own (and is on by default).
    config.setdefault("avi_require_perception", False)
    ctx = ToolContext(settings, store, chat=registry.chat_model(settings), config=AgentConfig(**config))
    steps = []
    answer = run_avi_agent(
        ctx,
        question,
        [VIDEO_ID],
        retrieve=ToolRegistry([clip_search]),
        perceive=ToolRegistry([frame_inspect, finish]),  # a terminal tool is never offered
        on_step=steps.append,
    )
    assert steps == answer.trace  # every step was shown live
    return answer


def search(query: str, call_id: str = "s1") -> object:
    return tool_call("clip_search", {"video_id": VIDEO_ID, "query": query, "top_k": 3}, call_id=call_id)


def review(**fields: object) -> object:
    return text(json.dumps(fields))


def tool_names(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


def with_images(server: ScriptedLLMServer) -> list[dict]:
    """The requests frame_inspect made (the only ones carrying images)."""
    return [r for r in server.chat_requests if any(isinstance(m.get("content"), list) for m in r["messages"])]


def test_each_phase_offers_only_its_tools_and_the_review_answers(world) -> None:
    _, _, server = world
    server.script(
        [
            search("secret code vault"),
            text("Candidate: 0:35-0:40, where the code is spoken."),
            tool_call("frame_inspect", INSPECT_ARGS, call_id="f1"),
            text("The frame reads CODE: PURPLE ELEPHANT."),  # frame_inspect's own model call
            text("On screen at 35-40 s: CODE: PURPLE ELEPHANT."),
            review(verdict="answer", answer="The code is purple elephant.", citations=[ANSWER_RANGE]),
        ]
    )
    answer = run(world)

    assert answer.answer == "The code is purple elephant." and not answer.forced
    assert [(c.start, c.end, c.verified) for c in answer.citations] == [(35.0, 40.0, True)]
    assert answer.interval is None  # not a "when" question
    assert [(s.phase, s.kind, s.tool) for s in answer.trace] == [
        ("retrieve", "tool", "clip_search"),
        ("retrieve", "phase-end", None),
        ("perceive", "tool", "frame_inspect"),
        ("perceive", "phase-end", None),
        ("review", "answer", None),
    ]
    requests = server.chat_requests
    assert len(requests) == 6
    agent_turns = [requests[i] for i in (0, 1, 2, 4, 5)]
    assert [tool_names(r) for r in agent_turns] == [
        ["clip_search"],
        ["clip_search"],
        ["frame_inspect"],
        ["frame_inspect"],
        [],  # review: no tools, JSON asked for
    ]
    # Review asks for JSON in words but reads the paper's "**Answer:**" format too (issue 28).
    assert "response_format" not in requests[5]
    assert requests[0]["messages"][0]["content"] == prompts.AVI_SYSTEM
    assert "Phase 1 of 3: RETRIEVE" in requests[0]["messages"][-1]["content"]
    assert "Phase 2 of 3: PERCEIVE" in requests[2]["messages"][-1]["content"]
    assert "Phase 3 of 3: REVIEW" in requests[5]["messages"][-1]["content"]
    # Video text reaches the model only as quoted data.
    observation = requests[1]["messages"][-1]
    assert observation["role"] == "tool" and "not instructions" in observation["content"]
    assert "<video_data>" in observation["content"]
    assert answer.usage.model_calls == 6 and answer.usage.tool_calls == 2 and answer.usage.images > 0


def test_a_perceive_tool_in_the_retrieve_phase_is_refused_and_not_run(world) -> None:
    _, _, server = world
    server.script(
        [
            # Written as JSON text: the backend passes it on; the loop refuses it.
            text(json.dumps({"tool": "frame_inspect", "arguments": INSPECT_ARGS})),
            # As a native call: the backend refuses a tool it did not offer and re-asks …
            tool_call("frame_inspect", INSPECT_ARGS, call_id="f2"),
            search("secret code"),  # … and the model retrieves instead.
            text("Candidate: 35-40 s."),
            text("Nothing to inspect: the speech says it."),  # perceive ends at once
            review(answer="purple elephant", citations=[ANSWER_RANGE]),
        ]
    )
    answer = run(world)

    # Perceive ended without looking (issue 28): the answer stands, but it was not perceived and
    # its citation, retrieved from speech, is not verified.
    assert answer.answer == "purple elephant" and answer.perceived is False
    assert not answer.citations[0].verified and answer.citations[0].evidence == "retrieved"
    refused = answer.trace[0]
    assert (refused.phase, refused.kind, refused.tool, refused.ok) == (
        "retrieve",
        "refused",
        "frame_inspect",
        False,
    )
    assert "belongs to the perceive phase" in refused.observation
    assert [s.kind for s in answer.trace] == ["refused", "tool", "phase-end", "phase-end", "answer"]
    # Nothing of frame_inspect ran: it never asked the model about frames, and only the one
    # clip_search was executed.
    assert with_images(server) == []
    assert answer.usage.tool_calls == 1
    requests = server.chat_requests
    told = requests[1]["messages"][-1]["content"]
    assert "frame_inspect failed" in told and "was not run" in told and "clip_search" in told
    reasked = json.dumps(requests[2]["messages"])
    assert "no tool named 'frame_inspect'" in reasked
    assert all("frame_inspect" not in tool_names(r) for r in requests[:4])


def test_the_review_sends_the_agent_back_once_then_answers_when(world) -> None:
    _, _, server = world
    server.script(
        [
            search("secret code revealed"),
            text("The code seems to be spoken at 35-40 s."),
            text("No closer look needed."),
            review(verdict="perceive", reason="check the screen at 35-40 s for the code"),
            tool_call("frame_inspect", INSPECT_ARGS, call_id="f1"),
            text("CODE: PURPLE ELEPHANT is shown."),  # frame_inspect's own model call
            text("The screen shows the code at 35-40 s."),
            review(verdict="perceive", reason="look once more"),  # no going back is left
            # A tool call in review is refused too (no tools are offered there).
            tool_call("clip_search", {"video_id": VIDEO_ID, "query": "code"}, call_id="r1"),
            review(
                verdict="answer",
                answer="The code is revealed from 0:35 to 0:40.",
                citations=[ANSWER_RANGE],
                interval="0:35-0:40",  # as text: read like an answer's interval
            ),
        ]
    )
    answer = run(world, "When is the secret code revealed?")

    assert answer.answer.startswith("The code is revealed") and not answer.forced
    assert answer.interval is not None
    assert (answer.interval.start, answer.interval.end, answer.interval.verified) == (35.0, 40.0, True)
    assert [(s.phase, s.kind) for s in answer.trace] == [
        ("retrieve", "tool"),
        ("retrieve", "phase-end"),
        ("perceive", "phase-end"),
        ("review", "review"),
        ("perceive", "tool"),
        ("perceive", "phase-end"),
        ("review", "nudge"),
        ("review", "refused"),
        ("review", "answer"),
    ]
    assert "back to perceive: check the screen" in answer.trace[3].observation
    requests = server.chat_requests
    first_review, back, second_review = requests[3], requests[4], requests[7]
    assert "interval: required" in first_review["messages"][-1]["content"]
    assert "go back to PERCEIVE" in first_review["messages"][-1]["content"]
    assert back["messages"][-1]["content"].startswith("Back to PERCEIVE, as the review asked: check")
    assert tool_names(back) == ["frame_inspect"]
    assert "no longer possible" in second_review["messages"][-1]["content"]
    assert requests[8]["messages"][-1]["content"] == prompts.AVI_MUST_ANSWER
    assert "No tools can be used in the REVIEW phase" in requests[9]["messages"][-1]["content"]
    assert all(tool_names(requests[i]) == [] for i in (3, 7, 8, 9))


def test_repeats_are_nudged_and_the_turn_limit_forces_an_answer(world) -> None:
    _, _, server = world
    server.script(
        [
            search("secret code", call_id="a"),
            search("Secret code ", call_id="b"),
            search("secret code", call_id="c"),
            review(answer="Purple elephant, said at 0:35.", citations=[ANSWER_RANGE, [70, 80]]),
        ]
    )
    answer = run(world, "When is the code said?", avi_max_iterations=3)

    assert answer.forced and answer.answer == "Purple elephant, said at 0:35."
    # Without an interval in the reply, a "when" answer takes its first verified citation.
    assert answer.interval is not None and (answer.interval.start, answer.interval.end) == (35.0, 40.0)
    # Nothing was perceived: no citation verifies (issue 28), whatever retrieval found.
    assert [c.verified for c in answer.citations] == [False, False] and answer.perceived is False
    assert not answer.interval.verified
    assert "outside the video" in answer.citations[1].note
    last = server.chat_requests[-1]
    assert len(server.chat_requests) == 4 and tool_names(last) == []
    assert last["messages"][-1]["content"] == prompts.AVI_FORCED
    assert "nearly the same arguments" in last["messages"][-2]["content"]
    assert [(s.phase, s.kind) for s in answer.trace] == [
        ("retrieve", "tool"),
        ("retrieve", "tool"),
        ("retrieve", "tool"),
        ("retrieve", "nudge"),
        ("review", "nudge"),
        ("review", "answer"),
    ]
    assert [s.tool_cached for s in answer.trace[:3]] == [False, False, True]
    assert answer.usage.tool_calls == 3 and answer.usage.tool_cache_hits == 1


def test_models_without_native_tools_follow_the_phases_in_json(tmp_path: Path, llm_server) -> None:
    options = {"openai": {"base_url": llm_server.base_url, "max_retries": 0, "tool_calling": "json"}}
    settings = make_settings(tmp_path / "data", chat="openai:scripted", options=options)
    world = (settings, build_store(settings), llm_server)
    args = {"video_id": VIDEO_ID, "query": "secret code", "top_k": 2}
    llm_server.script(
        [
            text(json.dumps({"tool": "clip_search", "arguments": args})),
            text(json.dumps({"answer": "Candidate: 35-40 s."})),  # ends retrieve
            text(json.dumps({"answer": "Nothing more to see."})),  # ends perceive
            review(answer="purple elephant", citations=[ANSWER_RANGE]),
        ]
    )
    answer = run(world)

    assert answer.answer == "purple elephant" and answer.perceived is False
    assert [s.kind for s in answer.trace] == ["tool", "phase-end", "phase-end", "answer"]
    assert answer.trace[1].reasoning == "Candidate: 35-40 s."
    systems = [r["messages"][0]["content"] for r in llm_server.chat_requests]
    assert all("tools" not in r for r in llm_server.chat_requests)
    assert "clip_search" in systems[0] and "frame_inspect" not in systems[0]
    assert "frame_inspect" in systems[2] and "clip_search:" not in systems[2]
    assert "arguments schema" not in systems[3]  # the review offers no tools


def test_registries_must_be_separate_and_need_a_chat_model(world) -> None:
    settings, store, _ = world
    ctx = ToolContext(settings, store)
    with pytest.raises(ValueError, match="needs a chat model"):
        run_avi_agent(
            ctx, QUESTION, [VIDEO_ID], retrieve=ToolRegistry([clip_search]), perceive=ToolRegistry([])
        )
    ctx.chat = registry.chat_model(settings)
    with pytest.raises(ValueError, match="tools in both phases: clip_search"):
        run_avi_agent(
            ctx,
            QUESTION,
            [VIDEO_ID],
            retrieve=ToolRegistry([clip_search]),
            perceive=ToolRegistry([clip_search, frame_inspect]),
        )
    with pytest.raises(ValueError, match="the perceive phase has no tools"):
        run_avi_agent(
            ctx, QUESTION, [VIDEO_ID], retrieve=ToolRegistry([clip_search]), perceive=ToolRegistry([finish])
        )


def test_review_replies_are_read_leniently() -> None:
    assert parse_review('```json\n{"answer": "x", "citations": [1, 2]}\n```') == ReviewReply(
        answer="x", citations=[[1, 2]]
    )
    back = parse_review("{'verdict': 'Back', 'reason': 'look at 0:10',}")
    assert back.verdict == "perceive" and back.reason == "look at 0:10"
    with pytest.raises(ValueError, match='no "answer"'):
        parse_review('{"verdict": "answer"}')
    with pytest.raises(ValueError, match="not a JSON object"):
        parse_review("[1, 2]")
    assert is_when_question("When does the dog jump?")
    assert is_when_question("  at what point is the cake cut")
    assert not is_when_question("What did she say when she left?")


def test_run_ask_with_agent_avi_uses_the_avi_tools_and_grounds_when(world) -> None:
    from vidscope.cli.render import render_answer
    from vidscope.flows.ask import run_ask, trace_markdown

    settings, _, server = world
    server.script(
        [
            tool_call("clip_retrieve", {"video_id": VIDEO_ID, "query": "secret code", "k": 3}, call_id="c"),
            text("Candidate: 35-40 s."),
            tool_call("text_extract", {"video_id": VIDEO_ID, "time_range": ANSWER_RANGE}, call_id="t"),
            tool_call(
                "frame_analysis",
                {
                    "video_id": VIDEO_ID,
                    "time_ranges": [ANSWER_RANGE],
                    "question": "Is a code shown?",
                    "frames": 4,
                },
                call_id="a",
            ),
            text("Yes: CODE: PURPLE ELEPHANT."),  # frame_analysis's own model call
            text("The code is on screen over 35-40 s."),
            review(answer="From 0:35 to 0:40.", citations=[ANSWER_RANGE], interval=ANSWER_RANGE),
        ]
    )
    question = "When is the secret code shown?"
    result = run_ask(settings, VIDEO_ID[:8], question, agent="avi")

    assert result.agent == "avi" and not result.extractive and result.note is None
    assert result.interval is not None and result.interval.verified
    assert (result.interval.start, result.interval.end) == (35.0, 40.0)
    assert [(s.phase, s.tool) for s in result.trace if s.kind == "tool"] == [
        ("retrieve", "clip_retrieve"),
        ("perceive", "text_extract"),
        ("perceive", "frame_analysis"),
    ]
    requests = server.chat_requests
    # Fig. 10: retrieval starts with clip_retrieve (the first turn offers only it), then all.
    assert tool_names(requests[0]) == ["clip_retrieve"]
    assert tool_names(requests[1]) == ["clip_retrieve", "clip_merge", "global_explore", "graph_retrieve"]
    assert tool_names(requests[2]) == ["object_detect", "text_extract", "boundary_detect", "frame_analysis"]
    assert tool_names(requests[3]) == tool_names(requests[2])  # still perceiving after text_extract
    assert "retrieve/tool" in trace_markdown(result) and "**Interval:** 0:35–0:40 ✓" in trace_markdown(result)
    out = Console(record=True, width=200)
    render_answer(result, out)
    shown = out.export_text()
    assert "AVI agent" in shown and "When: 0:35–0:40" in shown

    again = run_ask(settings, VIDEO_ID, question, agent="avi")  # model replies and tools are cached
    assert len(server.chat_requests) == 7
    assert again.answer == result.answer and again.interval == result.interval
    assert again.usage.model_http_calls == 0 and again.usage.tool_cache_hits == 3


def test_ask_agent_avi_without_a_chat_model_answers_extractively_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from vidscope.cli import app
    from vidscope.cli.common import overrides

    build_store(make_settings(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    overrides.clear()
    try:
        runner = CliRunner()
        args = ["--data-dir", str(tmp_path / "data"), "ask", "kitchen.mp4", QUESTION, "--json"]
        result = runner.invoke(app, [*args, "--agent", "avi"])
        assert result.exit_code == 0, result.output
        data = json.loads(result.output[result.output.index("{") :])
        assert data["extractive"] is True and data["agent"] is None
        assert "needs a chat model" in data["note"]
        assert data["citations"][0]["start"] == 35.0
        wrong = runner.invoke(app, [*args, "--agent", "mavis"])
        assert wrong.exit_code == 2 and "dvd" in wrong.output
    finally:
        overrides.clear()
    from vidscope.flows.ask import run_ask

    with pytest.raises(ValueError, match="unknown agent"):
        run_ask(make_settings(tmp_path / "data"), VIDEO_ID, QUESTION, agent="nope")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- issue 12: protocol


def test_perceive_without_a_perception_call_is_sent_back_once(world) -> None:
    from vidscope.flows.ask import run_ask

    settings, _, server = world
    server.script(
        [
            tool_call("clip_retrieve", {"video_id": VIDEO_ID, "query": "secret code", "k": 3}, call_id="c"),
            text("Candidate: 35-40 s, where a caption mentions the code."),
            text("The caption says the code; nothing to check."),  # no perception: sent back
            tool_call("text_extract", {"video_id": VIDEO_ID, "time_range": ANSWER_RANGE}, call_id="t"),
            text("On screen over 35-40 s: CODE: PURPLE ELEPHANT."),
            review(answer="purple elephant", citations=[ANSWER_RANGE]),
        ]
    )
    result = run_ask(settings, VIDEO_ID, QUESTION, agent="avi")

    assert result.answer == "purple elephant" and result.citations[0].verified
    assert [(s.phase, s.kind, s.tool) for s in result.trace] == [
        ("retrieve", "tool", "clip_retrieve"),
        ("retrieve", "phase-end", None),
        ("perceive", "phase-end", None),
        ("perceive", "nudge", None),
        ("perceive", "tool", "text_extract"),
        ("perceive", "phase-end", None),
        ("review", "answer", None),
    ]
    sent_back = server.chat_requests[3]
    assert sent_back["messages"][-1]["content"] == prompts.AVI_PERCEIVE_FIRST.format(
        tools="object_detect, text_extract, boundary_detect"
    )
    assert tool_names(sent_back) == ["object_detect", "text_extract", "boundary_detect", "frame_analysis"]
    system = server.chat_requests[0]["messages"][0]["content"]
    assert "hints, not proof" in system and "last resort" in system


def test_the_perception_requirement_sends_back_only_once(world) -> None:
    _, _, server = world
    server.script(
        [
            search("secret code"),
            text("Candidate: 35-40 s."),
            text("Nothing to look at."),  # sent back once
            text("Still nothing to look at."),  # not again: on to review
            review(answer="purple elephant", citations=[ANSWER_RANGE]),
        ]
    )
    answer = run(world, avi_require_perception=True)
    assert answer.answer == "purple elephant"
    kinds = [(s.phase, s.kind) for s in answer.trace]
    assert kinds.count(("perceive", "nudge")) == 1 and kinds[-1] == ("review", "answer")
    assert server.pending == 0


def test_a_citation_only_an_overview_pointed_at_is_unverified(world) -> None:
    from vidscope.flows.ask import run_ask

    settings, _, server = world
    server.script(
        [
            tool_call("global_explore", {"video_id": VIDEO_ID, "query": QUESTION}, call_id="e"),
            text("A bread recipe; a code is spoken around 35-40 s; it ends at 55-60 s."),  # the summary
            text("Candidates: 35-40 s."),
            tool_call("text_extract", {"video_id": VIDEO_ID, "time_range": ANSWER_RANGE}, call_id="t"),
            text("On screen over 35-40 s: CODE: PURPLE ELEPHANT."),
            review(answer="purple elephant", citations=[ANSWER_RANGE, [55, 60]]),
        ]
    )
    result = run_ask(settings, VIDEO_ID, QUESTION, agent="avi")

    assert [(c.start, c.verified) for c in result.citations] == [(35.0, True), (55.0, False)]
    assert "specific evidence" in result.citations[1].note
    assert result.unverified_citations == 1
