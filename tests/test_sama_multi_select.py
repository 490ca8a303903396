"""SAMA on a multi-select question (CrossVid BU: "each question has 1-3 correct choices", scored as
the set of letters): the planner is told several letters may be right, and its answer's choice is
their set whatever shape the model writes it in. The real ``run`` of the strategy, the real
``openai`` backend against the loopback server, the simulator answering the tools."""

from __future__ import annotations

from pathlib import Path

import pytest
from llm_server import ScriptedLLMServer, text, tool_call

from vidscope.agents import strategies
from vidscope.agents.sama.agent import MULTI_SELECT_NOTE
from vidscope.agents.simulator.script import Event, Script, ScriptVideo
from vidscope.agents.simulator.simulator import ScriptSimulator, SimContext
from vidscope.agents.simulator.tools_sama import sim_sama_registry
from vidscope.agents.strategies import StrategyRequest
from vidscope.core.settings import Settings
from vidscope.models import registry

OPTIONS = ["The dog is playful", "The cat is asleep", "The dog is afraid", "The bird sings"]
CITATION = {"video_id": "yard", "start": 0.0, "end": 5.0}


def yard() -> Script:
    video = ScriptVideo(
        video_id="yard",
        duration=10.0,
        events=[
            Event(event_id="play", start=0.0, end=5.0, kind="action", label="a dog plays", subject="dog")
        ],
    )
    return Script(script_id="yard", videos=[video])


def answer(server: ScriptedLLMServer, tmp_path: Path, choice: object, *, multi_select: bool):  # type: ignore[no-untyped-def]
    server.script(
        [
            text('{"type": "behaviour"}'),
            tool_call(
                "answer", {"answer": "Playful, and afraid.", "citations": [CITATION], "choice": choice}
            ),
        ]
    )
    options = {"openai": {"base_url": server.base_url, "max_retries": 0, "timeout_s": 30, "cache": False}}
    settings = Settings(
        data_dir=tmp_path / "data",
        models={"chat": "openai:scripted", "captioner": None, "speech_recognizer": None, "options": options},
    )
    ctx = SimContext(
        settings, ScriptSimulator(yard()), chat=registry.chat_model(settings), registry=sim_sama_registry()
    )
    request = StrategyRequest(
        "What does the dog feel?", ["yard"], scope="videos", options=OPTIONS, multi_select=multi_select
    )
    return strategies.answer("sama", ctx, request)


@pytest.mark.parametrize("choice", ["AC", "C, A", ["C", "A"], "A and C"])
def test_the_choice_is_the_set_of_letters_in_any_shape(
    llm_server: ScriptedLLMServer, tmp_path: Path, choice: object
) -> None:
    result = answer(llm_server, tmp_path, choice, multi_select=True)
    assert result.choice == "AC"
    assert not result.forced
    planner_turn = llm_server.chat_requests[-1]["messages"][-1]["content"]
    assert MULTI_SELECT_NOTE in planner_turn


def test_a_single_choice_question_keeps_one_letter_and_says_nothing_of_several(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    result = answer(llm_server, tmp_path, "C", multi_select=False)
    assert result.choice == "C"
    assert MULTI_SELECT_NOTE not in llm_server.chat_requests[-1]["messages"][-1]["content"]
