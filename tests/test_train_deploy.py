"""Train what you deploy: a GRPO training sample starts from exactly the conversation the master
agent sends when it runs (``compare --agent cvr`` → ``run_cvr``), checked on the request a real
OpenAI-compatible client sent to the loopback test server (tests/llm_server.py)."""

from __future__ import annotations

import json
from pathlib import Path

from llm_server import ScriptedLLMServer, text

from vidscope.agents import strategies
from vidscope.agents.simulator.simulator import ScriptSimulator, SimContext
from vidscope.agents.simulator.templates import generate_scripts
from vidscope.agents.strategies import StrategyRequest
from vidscope.core.settings import Settings
from vidscope.flows.training.train import training_rows
from vidscope.models import registry


def test_a_training_sample_is_the_conversation_the_deployed_master_sends(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        models={
            "chat": "openai:scripted",
            "options": {"openai": {"base_url": llm_server.base_url, "max_retries": 0, "cache": False}},
        },
    )
    registry.clear_cache()
    script = generate_scripts(1, seed=5)[0]
    rows = training_rows([script], settings, seed=0)
    for row in rows:
        question = script.question(row["question_id"])
        llm_server.script([text(json.dumps({"actions": [{"action": "answer", "answer": "A"}]}))])
        ctx = SimContext(
            settings,
            ScriptSimulator(script, clip_seconds=settings.ingest.clip_seconds),
            chat=registry.planner_model(settings),
        )
        scope = "video" if len(question.video_ids) == 1 else "videos"
        answer = strategies.answer(
            "cvr", ctx, StrategyRequest(question.text, question.video_ids, scope, question.options)
        )
        sent = llm_server.chat_requests[-1]
        assert [{"role": m["role"], "content": m["content"]} for m in sent["messages"]] == row["prompt"]
        assert not sent.get("tools")  # the master's actions are in its prompt, not tool calling
        assert answer.choice == "A"
    assert {r["question_id"] for r in rows} == {q.question_id for q in script.questions}
    assert (
        "visual_query" in rows[0]["prompt"][0]["content"]
        and "clip_search" not in rows[0]["prompt"][0]["content"]
    )


def test_grpo_defaults_are_agentcvrs_and_the_command_checks_its_flags(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from vidscope.cli import app
    from vidscope.flows.training.train import GrpoOptions

    options = GrpoOptions(model="m", output_dir=tmp_path)
    # AgentCVR's released GRPO run: 8 rollouts a question, KL 0.005, lr 1e-7, 4096 response tokens;
    # the paper's 20-turn limit.
    assert (options.group_size, options.beta, options.learning_rate) == (8, 0.005, 1e-7)
    assert (options.max_turns, options.max_completion_length) == (20, 4096)
    env = {"VIDSCOPE_DATA_DIR": str(tmp_path / "data")}
    bad = CliRunner().invoke(
        app, ["train", "grpo", "m", "--out", str(tmp_path / "o"), "--beta", "-1"], env=env
    )
    assert bad.exit_code == 2 and "beta" in bad.output and "Traceback" not in bad.output
