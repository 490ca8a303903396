"""SAMA's skills and strict rules as the paper writes them (issue 38), and the room they leave.

App. C.1 (the skills, about 1,100 words) and App. C.2 (seven strict rules) could not be found here:
the stored pages hold the paper's abstract only. The points checked are those issue 38 names as
missing from our skills — the style-vs-event split, "not visible ≠ 0", how to word a reading
(prompt tuning), the nested counterfactual rule — and the seven rules in our words
(``prompts.SAMA_RULES``, each traced there to the reading it follows). The prompt is read from the
request the real ``run_sama`` sends to the loopback server, so what is checked is what a model
gets; it must leave half of the 8,192-token context the docs' llama.cpp setup uses (docs/models.md)
to the evidence memory and the reply.
"""

from __future__ import annotations

import json
from pathlib import Path

from llm_server import ScriptedLLMServer, text, tool_call
from test_sama_memory import harbour_script
from test_simulator_sama import planner_settings

from vidscope.agents import prompts
from vidscope.agents.sama.agent import run_sama
from vidscope.agents.sama.memory import estimate_tokens
from vidscope.agents.sama.skills import load_skills
from vidscope.agents.simulator.simulator import ScriptSimulator, SimContext
from vidscope.agents.simulator.tools_sama import sim_sama_registry
from vidscope.agents.tools import AgentConfig
from vidscope.models import registry

#: The context of the documented local setup (llama-server -c 8192) and the share of it the fixed
#: part of SAMA's request (system, rules, skills, tools, question) may take; beside it must fit the
#: reply and one latest tool result in full (``sama_result_tokens``).
CONTEXT_TOKENS = 8192
FIXED_SHARE = 0.5


def first_request(server: ScriptedLLMServer, tmp_path: Path) -> dict:  # type: ignore[type-arg]
    server.script(
        [
            text('{"type": "reading"}'),
            tool_call(
                "answer",
                {"answer": "green", "citations": [{"video_id": "tour", "start": 12.0, "end": 15.5}]},
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
    run_sama(ctx, "What colour is the lighthouse?", ["tour"])
    return server.chat_requests[1]  # [0] is the meta planner's


def test_the_skills_carry_the_points_the_paper_gives_them() -> None:
    skills = {s.name: s for s in load_skills(None)}
    reader = " ".join(skills["video-reader"].body.split())
    # The style-vs-event split: how something looks holds over a shot; an event happens at a moment.
    assert "- Style:" in reader and "- Event:" in reader and "holds over a whole shot" in reader
    # Not visible is not zero: no "none" before every stretch the question covers was read.
    assert "Not visible is not zero." in reader and "after every stretch the question covers" in reader
    # Prompt tuning: how to word a reading, and what to do with a vague reply.
    assert "Word every video_reader question" in reader and "do not repeat it" in reader
    # The nested counterfactual rule: inside out, one changed fact, never what did happen.
    comparison = " ".join(skills["multi-video-comparison"].body.split())
    assert "Counterfactual questions" in comparison and "innermost outward" in comparison
    assert "change only the fact" in comparison and "Never answer what did" in comparison
    # scene_detector's arguments are explained where shot bounds are asked for.
    grounding = skills["temporal-grounding"].body
    assert "fps" in grounding and "threshold" in grounding
    words = sum(len(s.body.split()) for s in skills.values())
    assert words >= 850, words  # was ~270; App. C.1 runs to ~1,100 with its headers


def test_the_planner_gets_the_seven_strict_rules_and_every_skill_within_budget(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    request = first_request(llm_server, tmp_path)
    system = request["messages"][0]["content"]
    assert len(prompts.SAMA_RULES) == 7
    rules = system.split("Strict rules:\n", 1)[1]
    for number, rule in enumerate(prompts.SAMA_RULES, start=1):
        assert f"{number}. {rule}" in rules
    for name in ("video-reader", "temporal-grounding", "multi-video-comparison", "subtitle-tools"):
        assert f"Skill {name} " in system
    assert "Not visible is not zero." in system and "innermost outward" in system
    fixed = sum(estimate_tokens(m["content"]) for m in request["messages"])
    fixed += estimate_tokens(json.dumps(request["tools"]))
    assert fixed <= CONTEXT_TOKENS * FIXED_SHARE, fixed
    # The reply and one latest result in full (its budget) fit beside it.
    reply = int(request.get("max_tokens") or request.get("max_completion_tokens") or 0)
    assert fixed + reply + AgentConfig().sama_result_tokens <= CONTEXT_TOKENS, (fixed, reply)


def test_the_evidence_memory_fits_what_the_models_context_leaves(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    """A server whose context is 3,000 (of its) tokens: a transcript of some 4,000 words, shown in
    full as the latest result (``sama_result_tokens`` = 3,000), would have been refused for length;
    SAMA reads the window from the server (llama.cpp's /props) and shows the result in part, with
    the line saying how to see the rest, and the request fits."""
    from vidscope.agents.simulator.script import AudioLine, Script, ScriptVideo

    said = "The guide describes the old harbour wall, its stones and the boats moored along it today."
    lines = [AudioLine(start=2.0 * i, end=2.0 * i + 1.5, text=f"{said} ({i})") for i in range(250)]
    script = Script(script_id="long", videos=[ScriptVideo(video_id="tour", duration=520.0, audio=lines)])
    llm_server.n_ctx = 3000
    llm_server.script(
        [
            text('{"type": "subtitles"}'),
            tool_call("subtitle_extractor", {"video_id": "tour", "t0": 0.0, "t1": 500.0}),
            tool_call(
                "answer", {"answer": "a wall", "citations": [{"video_id": "tour", "start": 0, "end": 2}]}
            ),
        ]
    )
    settings = planner_settings(tmp_path / "data", llm_server)
    ctx = SimContext(
        settings, ScriptSimulator(script), chat=registry.chat_model(settings), registry=sim_sama_registry()
    )
    result = run_sama(ctx, "What does the guide describe?", ["tour"])
    assert [s.kind for s in result.trace if s.kind == "context"] == []  # nothing was refused for length
    assert result.answer == "a wall" and not result.forced
    after = llm_server.chat_requests[-1]["messages"]
    assert "more tokens not shown: ask for a narrower interval" in after[-1]["content"]
    assert sum(len(str(m["content"]).split()) for m in after) < llm_server.n_ctx
    # The transcript itself would not have fitted beside the prompt.
    assert sum(len(line.text.split()) for line in lines) > llm_server.n_ctx
