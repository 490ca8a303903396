"""AgentCVR's observations in training are shaped like deployment (issue 38: "the simulated visual
agent today returns structured events (exact counts, colours) the real visual agent never returns
(`events: []` and prose at deployment); simulated audio has no language fields. Make simulated
results indistinguishable in shape and kind of content from real ones").

The same focus is asked of the same moments twice: by the real ``visual_query`` / ``audio_query``
over an ingested-looking store (the vision model is the loopback test server behind the real
OpenAI-compatible client; the audio agent reads the stored transcript), and by the simulated ones
over the script imported from that store. The master sees the same fields, filled with the same
kinds of values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from llm_server import ScriptedLLMServer, text
from test_agent_runtime import VIDEO_ID, build_store, make_settings

from vidscope.agents.cvr.master import cvr_registry
from vidscope.agents.simulator.importer import import_script
from vidscope.agents.simulator.simulator import ScriptSimulator, SimContext
from vidscope.agents.simulator.tools_cvr import sim_cvr_agent_registry
from vidscope.agents.tools import AgentConfig, ToolContext, execute_tool
from vidscope.models import registry
from vidscope.models.open_store import open_store

#: The weighing of the synthetic kitchen video: said and shown at 0-10 s.
FLOUR = (0.0, 10.0)
FOCUS = "how much flour is weighed"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("cvr-shapes") / "data"
    build_store(make_settings(data))
    return data


def contexts(data: Path, server: ScriptedLLMServer) -> tuple[ToolContext, SimContext]:
    settings = make_settings(
        data, chat="openai:scripted", options={"openai": {"base_url": server.base_url, "max_retries": 0}}
    )
    registry.clear_cache()
    store = open_store(settings)
    config = AgentConfig(tool_cache=False)
    real = ToolContext(
        settings, store, chat=registry.chat_model(settings), config=config, registry=cvr_registry()
    )
    script = import_script(store, [VIDEO_ID])
    sim = SimContext(settings, ScriptSimulator(script), config=config, registry=sim_cvr_agent_registry())
    return real, sim


def kinds(observation: dict[str, Any]) -> dict[str, str]:
    """Each field the master reads, with the kind of value it holds ("empty" for nothing)."""
    return {k: "empty" if v in (None, [], "", {}) else type(v).__name__ for k, v in observation.items()}


def observe(ctx: ToolContext, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    outcome = execute_tool(ctx, tool, args)
    assert outcome.ok and outcome.result is not None, outcome.error
    return outcome.result.for_model()


def test_a_simulated_and_a_real_look_at_the_same_focus_have_the_same_fields(
    data_dir: Path, llm_server: ScriptedLLMServer
) -> None:
    real_ctx, sim_ctx = contexts(data_dir, llm_server)
    llm_server.script(
        [text(json.dumps({"found": True, "what": "A scale shows 500 g of flour.", "when": [4.0]}))]
    )
    args = {"targets": [{"video_id": VIDEO_ID, "t0": FLOUR[0], "t1": FLOUR[1], "frames": 2}], "focus": FOCUS}
    real = observe(real_ctx, "visual_query", args)
    sim = observe(sim_ctx, "visual_query", args)
    registry.clear_cache()

    assert kinds(sim) == kinds(real)
    assert real["events"] == [] and sim["events"] == []  # words, never structured counts or colours
    assert sim["found"] is True and "flour" in sim["answer"] and sim["seen_at"]


def test_a_simulated_and_a_real_listen_to_the_same_moment_have_the_same_fields(
    data_dir: Path, llm_server: ScriptedLLMServer
) -> None:
    real_ctx, sim_ctx = contexts(data_dir, llm_server)
    args = {"video_id": VIDEO_ID, "t0": FLOUR[0], "t1": FLOUR[1]}
    real = observe(real_ctx, "audio_query", args)
    sim = observe(sim_ctx, "audio_query", args)
    registry.clear_cache()

    assert set(sim) == set(real)
    # The language is the speech stage's in both (this store's transcript records none; a whisper
    # pass also gives its probability, which a script states as 1).
    assert sim["language"] == real["language"]
    assert {k: v for k, v in kinds(sim).items() if k != "language_probability"} == {
        k: v for k, v in kinds(real).items() if k != "language_probability"
    }
    assert [line["text"] for line in sim["lines"]] == [line["text"] for line in real["lines"]]


def test_a_generated_script_is_heard_with_its_language() -> None:
    from vidscope.agents.simulator.templates import generate_script
    from vidscope.core.settings import Settings

    script = generate_script(7)
    video = script.videos[0]
    line = video.audio[0]
    ctx = SimContext(Settings(), ScriptSimulator(script), registry=sim_cvr_agent_registry())
    heard = observe(ctx, "audio_query", {"video_id": video.video_id, "t0": line.start, "t1": line.end})
    assert (heard["language"], heard["language_probability"]) == ("en", 1.0)
    silent = observe(ctx, "audio_query", {"video_id": video.video_id, "t0": 0.0, "t1": 0.1})
    assert silent["lines"] == [] and silent["language"] is None  # as the real agent: nothing heard


def test_the_llm_simulator_phrases_rollouts_when_a_model_is_configured(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    """Issue 38: "the LLM simulator M_sim takes part in `train grpo`/`train rollouts` whenever a
    model is configured". The oracle policy looks once; M_sim (the configured planner) words it."""
    import inspect

    from vidscope.agents.simulator.policies import OraclePolicy
    from vidscope.agents.simulator.templates import generate_script
    from vidscope.cli.train import grpo, rollouts
    from vidscope.core.settings import Settings
    from vidscope.flows.training.rollout import SIMULATOR_TEMPERATURE, rollout
    from vidscope.flows.training.train import simulator_model

    settings = Settings(
        data_dir=tmp_path / "data",
        models={
            "chat": "openai:scripted",
            "options": {"openai": {"base_url": llm_server.base_url, "max_retries": 0, "cache": False}},
        },
    )
    registry.clear_cache()
    script = generate_script(7)
    question = next(q for q in script.questions if q.kind == "counting")
    one = script.model_copy(update={"questions": [question]})
    llm_server.default = text("You can see the woman wave at the start.")
    table = rollout(
        settings,
        [one],
        lambda q, rng: OraclePolicy(q),
        group_size=1,
        simulator_model=simulator_model(settings),
    )
    registry.clear_cache()

    phrased = [r for r in llm_server.chat_requests if "Focus:" in json.dumps(r)]
    assert len(phrased) == len(question.evidence) and phrased[0]["temperature"] == SIMULATOR_TEMPERATURE
    (row,) = table.to_pylist()
    observations = [m["content"] for m in row["completion"] if m["role"] == "user"]
    assert any("You can see the woman wave" in o for o in observations)
    for command in (grpo, rollouts):  # on by default: whenever a model is configured
        assert inspect.signature(command).parameters["simulator_model"].default is True
