"""SAMA's skills guide, they do not hide (issue 29): every skill is in the planner's context in
full, the chosen one named to follow; its tools come first among those offered and the rest follow;
a question about what is said reaches the subtitle tools even when the meta planner's reply is no
use (the trigger words route it)."""

from __future__ import annotations

from pathlib import Path

from llm_server import ScriptedLLMServer, text, tool_call
from test_sama_memory import harbour_script
from test_simulator_sama import planner_settings

from vidscope.agents.sama.agent import run_sama
from vidscope.agents.sama.skills import load_skills
from vidscope.agents.simulator.simulator import ScriptSimulator, SimContext
from vidscope.agents.simulator.tools_sama import sim_sama_registry
from vidscope.models import registry

ALL_TOOLS = {
    "video_reader",
    "temporal_grounding",
    "scene_detector",
    "scene_graph",
    "object_tracker",
    "visual_similarity",
    "subtitle_retriever",
    "subtitle_extractor",
    "answer",
}


def ask(server: ScriptedLLMServer, tmp_path: Path, meta_reply: str, question: str) -> list[dict]:  # type: ignore[type-arg]
    server.script(
        [
            text(meta_reply),
            tool_call("subtitle_retriever", {"video_id": "tour", "query": "lighthouse painted"}),
            tool_call(
                "answer",
                {"answer": "in 1990", "citations": [{"video_id": "tour", "start": 12.0, "end": 15.5}]},
            ),
        ]
    )
    settings = planner_settings(tmp_path / "data", server)
    ctx = SimContext(
        settings,
        ScriptSimulator(harbour_script()),
        chat=registry.chat_model(settings),
        registry=sim_sama_registry(),
    )
    result = run_sama(ctx, question, ["tour"])
    assert result.answer == "in 1990"
    return server.chat_requests[1:]


def test_a_spoken_content_question_reaches_the_subtitle_tools_first(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    # The meta planner rambles; the question's words route it to the subtitles skill.
    turns = ask(
        llm_server,
        tmp_path,
        "I think it is about a lighthouse.",
        "What does the guide say about the lighthouse?",
    )
    offered = [t["function"]["name"] for t in turns[0]["tools"]]
    assert offered[:3] == ["subtitle_retriever", "subtitle_extractor", "video_reader"]
    assert set(offered) == ALL_TOOLS and offered[-1] == "answer"
    system = turns[0]["messages"][0]["content"]
    assert "follow the skill subtitle-tools" in system
    # The retriever found the line; the next turn shows it in full.
    assert "painted green in 1990" in turns[1]["messages"][-1]["content"]


def test_every_skill_is_in_context_and_no_tool_is_hidden(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    turns = ask(llm_server, tmp_path, '{"type": "reading"}', "What is the lighthouse like?")
    system = turns[0]["messages"][0]["content"]
    skills = load_skills(None)
    assert len(skills) == 5
    for skill in skills:
        if skill.question_type == "meta":  # the classification call's prompt, not the planner's
            assert skill.body not in system
            continue
        assert f"Skill {skill.name} ({skill.question_type})" in system
        assert skill.body in system and skill.stop in system
    assert "follow the skill video-reader" in system
    offered = [t["function"]["name"] for t in turns[0]["tools"]]
    assert offered[:4] == ["temporal_grounding", "video_reader", "scene_graph", "object_tracker"]
    assert set(offered) == ALL_TOOLS  # the reading skill does not hide the subtitle tools
