"""SAMA's evidence memory keeps evidence (issue 29): the planner sees the latest tool result in full
(within a token budget) and earlier results as notes, distilled only when they outgrow their budget.

The lighthouse case is the issue's own: a tour guide's words, heard late in a stretch of speech,
say the lighthouse was "painted green in 1990". The tool returned that line, but the planner's next
request held only the tool's one-line summary and a note cut at 400 characters, so it never saw it.
"""

from __future__ import annotations

from pathlib import Path

from llm_server import ScriptedLLMServer, text, tool_call
from test_simulator_sama import planner_settings

from vidscope.agents.sama.agent import run_sama
from vidscope.agents.sama.memory import EvidenceMemory, estimate_tokens
from vidscope.agents.simulator.script import AudioLine, Script, ScriptVideo
from vidscope.agents.simulator.simulator import ScriptSimulator, SimContext
from vidscope.agents.simulator.tools_sama import sim_sama_registry
from vidscope.models import registry

GUIDE = [
    "Welcome aboard, everyone, and thank you for joining the harbour tour on this windy morning.",
    "On your left you can see the old fish market, which has been trading on this quay since 1870.",
    "Ahead of us the breakwater protects the inner harbour from the winter storms of the north sea.",
    "The lighthouse was first lit in 1874 and was painted green in 1990 after the harbour's colours.",
    "Before that it was plain white, and sailors still argue about which was easier to see at night.",
]


def harbour_script() -> Script:
    lines = [
        AudioLine(start=4.0 * i, end=4.0 * i + 3.5, text=t, speaker="guide") for i, t in enumerate(GUIDE)
    ]
    return Script(script_id="harbour", videos=[ScriptVideo(video_id="tour", duration=30.0, audio=lines)])


def test_a_fact_a_tool_returned_reaches_the_planners_next_request(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    llm_server.script(
        [
            text('{"type": "subtitles"}'),
            tool_call("subtitle_extractor", {"video_id": "tour", "t0": 0.0, "t1": 20.0}),
            tool_call("video_reader", {"video_id": "tour", "t0": 12.0, "t1": 16.0, "question": "Colour?"}),
            tool_call(
                "answer",
                {"answer": "green", "citations": [{"video_id": "tour", "start": 12.0, "end": 15.5}]},
            ),
        ]
    )
    settings = planner_settings(tmp_path / "data", llm_server)
    ctx = SimContext(
        settings,
        ScriptSimulator(harbour_script()),
        chat=registry.chat_model(settings),
        registry=sim_sama_registry(),
    )
    result = run_sama(ctx, "When was the lighthouse painted green, according to the guide?", ["tour"])
    assert result.answer == "green"

    requests = [r["messages"][-1]["content"] for r in llm_server.chat_requests]
    assert len(requests) == 4  # classify, three planner turns
    assert "painted green in 1990" not in requests[1]  # nothing was read yet
    after_extract, after_reader = requests[2], requests[3]
    # The turn after the extractor: its result in full, the lighthouse line among it.
    latest = after_extract.split('"latest":', 1)[1]
    assert "painted green in 1990" in latest
    # A turn later the result is a note of the memory, still whole (well within its budget), and
    # the reader's result is the latest.
    notes, latest = after_reader.split('"notes":', 1)[1].split('"latest":', 1)
    assert "painted green in 1990" in notes and "which was easier to see at night" in notes
    assert "video_reader" in latest and "subtitle_extractor" not in latest


def test_notes_are_distilled_oldest_first_only_past_their_token_budget() -> None:
    memory = EvidenceMemory()
    long = "The lighthouse was painted green in 1990. " * 60  # about 630 tokens
    memory.note("a", "subtitle_extractor", long, summary="60 lines")
    memory.note("b", "video_reader", "Two boats, one red and one blue.", summary="2 boats")
    memory.note("a", "video_reader", long, summary="a lighthouse")
    fresh = memory.render(None, result_tokens=200)["a"]["latest"]  # type: ignore[index]
    assert len(fresh) == 2 and all(
        "more tokens not shown: ask for a narrower interval" in n["text"] for n in fresh
    )
    memory.settle()

    whole = memory.render(None)
    assert [n["text"] for n in whole["a"]["notes"]] == [" ".join(long.split())] * 2  # type: ignore[index]

    budget = estimate_tokens(long) + 50  # room for one long note and the short one
    tight = memory.render(budget)
    first, last = tight["a"]["notes"]  # type: ignore[index]
    assert first["text"] == "60 lines"  # the oldest was distilled to its summary
    assert "painted green in 1990" in last["text"]  # the newest kept whole
    assert tight["b"]["notes"][0]["text"] == "Two boats, one red and one blue."  # type: ignore[index]


def test_a_distilled_note_keeps_the_line_that_bears_on_the_question_not_the_first() -> None:
    """Issue 38: distilled to its summary (a reading's first words), a note lost the line that
    answered. Past the budget it keeps the summary and the line sharing most words with the
    question, whole."""
    memory = EvidenceMemory(question="When was the lighthouse painted green?")
    reading = (
        "Boats sail past the quay on a windy morning while gulls circle overhead. " * 20
        + "The guide says the lighthouse was painted green in 1990."
    )
    memory.note("a", "video_reader", reading, summary="16 frames of [0, 30]s: Boats sail past the quay")
    memory.note("a", "video_reader", "A gull lands.", summary="a gull")
    memory.settle()
    first, last = memory.render(estimate_tokens(reading) // 2)["a"]["notes"]  # type: ignore[index]
    assert first["text"].startswith("16 frames of [0, 30]s: Boats sail past the quay")
    assert first["text"].endswith("The guide says the lighthouse was painted green in 1990.")
    assert estimate_tokens(first["text"]) < 60 and last["text"] == "A gull lands."
