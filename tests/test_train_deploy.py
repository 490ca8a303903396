"""Train what you deploy: a GRPO training sample starts from exactly the conversation the master
agent sends when it runs (``compare --agent cvr`` → ``run_cvr``), checked on the request a real
OpenAI-compatible client sent to the loopback test server (tests/llm_server.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
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
    from vidscope.flows.training.train import GrpoOptions, trl_batches

    options = GrpoOptions(model="m", output_dir=tmp_path)
    # AgentCVR's released GRPO run: 8 rollouts a question, KL 0.005, lr 1e-7, 4096 response tokens;
    # the paper's 20-turn limit.
    assert (options.group_size, options.beta, options.learning_rate) == (8, 0.005, 1e-7)
    assert (options.max_turns, options.max_completion_length) == (20, 4096)
    # App. B: "a maximum turn limit T_max = 20 and a tolerance zone T_tol = 10".
    assert options.turn_tolerance == 10
    # The release's batches (verl/crossvid_agent_{4b,8b}.sh and crossvid_qwen3_grpo.yaml):
    # data.train_batch_size=32, ppo_mini_batch_size=16, ppo_epochs: 4; verl's token-level ratio.
    assert (options.questions_per_step, options.mini_batch_questions, options.ppo_epochs) == (32, 16, 4)
    assert options.ratio_level == "token" and options.interval_scoring == "exact"
    assert trl_batches(options) == {
        "generation_batch_size": 256,  # 32 questions × 8 completions rolled out per step
        "per_device_train_batch_size": 8,
        "gradient_accumulation_steps": 16,  # 16 questions × 8 = 128 completions per update
        "num_iterations": 4,
    }
    assert trl_batches(options, processes=8)["gradient_accumulation_steps"] == 2
    with pytest.raises(ValueError, match="multiple of the mini-batch"):
        trl_batches(options.model_copy(update={"questions_per_step": 24}))
    bad = CliRunner().invoke(
        app,
        ["train", "grpo", "m", "--out", str(tmp_path / "o"), "--questions-per-step", "3"],
        env={"VIDSCOPE_DATA_DIR": str(tmp_path / "data")},
    )
    said = " ".join(bad.output.split())
    assert bad.exit_code == 2 and "Traceback" not in said
    assert said == "train grpo: questions per step (3) must be a multiple of the mini-batch (16 questions)"
    with pytest.raises(ValueError, match="does not split"):
        trl_batches(options.model_copy(update={"per_device_batch_size": 3}))
    env = {"VIDSCOPE_DATA_DIR": str(tmp_path / "data")}
    bad = CliRunner().invoke(
        app, ["train", "grpo", "m", "--out", str(tmp_path / "o"), "--beta", "-1"], env=env
    )
    assert bad.exit_code == 2 and "beta" in bad.output and "Traceback" not in bad.output
