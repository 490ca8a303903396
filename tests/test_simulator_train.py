"""GRPO on the simulator end to end: a few optimisation steps of a tiny random policy.

The policy is a two-layer Qwen2-style model initialised at random and a word-level tokenizer built
here with the ``tokenizers`` library (nothing is downloaded). Each rollout is the deployed master
agent (``run_cvr``) driven by the policy. Its vocabulary is a handful of words and
the four answer actions written whole (one word each), so a sampled reply is sometimes an answer
given through the answer action, sometimes the right one, and a group's rewards differ: that is
what gives GRPO a gradient (a letter in plain text earns nothing, as in the release's reward).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")

from vidscope.core.settings import Settings  # noqa: E402
from vidscope.flows.training.train import GrpoOptions, train_grpo  # noqa: E402

SPECIAL = ["[UNK]", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]
ANSWERS = [
    json.dumps({"actions": [{"action": "answer", "answer": x, "choice": x}]}, separators=(",", ":"))
    for x in "ABCD"
]
WORDS = ["A", "B", "C", "D", "system", "user", "assistant", "tool", "the", "answer", "is", *ANSWERS]


def tiny_policy(tmp: Path):
    """A random Qwen2-style causal LM and its tokenizer with TRL's Qwen2.5 chat template."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    from trl.chat_template_utils import qwen2_5_chat_template

    vocab = {token: i for i, token in enumerate(SPECIAL + WORDS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()  # an answer action is one word
    core.save(str(tmp / "tokenizer.json"))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_file=str(tmp / "tokenizer.json"),
        unk_token="[UNK]",
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        additional_special_tokens=SPECIAL[2:],
        padding_side="left",
    )
    tokenizer.chat_template = qwen2_5_chat_template
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(vocab),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        pad_token_id=vocab["<|endoftext|>"],
        eos_token_id=vocab["<|im_end|>"],
        bos_token_id=None,
    )
    return Qwen2ForCausalLM(config), tokenizer


def test_grpo_steps_change_the_weights_and_log_the_reward(tmp_path: Path) -> None:
    import torch

    model, tokenizer = tiny_policy(tmp_path)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    options = GrpoOptions(
        model="tiny-random-qwen2",
        output_dir=tmp_path / "out",
        generated_scripts=2,
        seed=3,
        group_size=8,
        max_turns=1,  # one reply: an answer action, or nothing
        max_steps=3,
        learning_rate=1e-2,
        max_completion_length=32,
        per_device_batch_size=8,
        questions_per_step=1,  # one group a step, one update, one pass: the release's 32/16/4 is GPU work
        mini_batch_questions=1,
        ppo_epochs=1,
        save_steps=1000,
        beta=0.0,  # an in-memory model has no path to load the KL reference model from
    )
    result = train_grpo(Settings(data_dir=tmp_path / "data"), options, model=model, tokenizer=tokenizer)

    assert result.steps == 3 and result.questions == 8
    assert len(result.rewards) == 3 and all(0.0 <= r <= 1.1 for r in result.rewards)
    changed = [n for n, p in model.named_parameters() if not torch.equal(before[n], p.detach())]
    assert changed, "no weight changed"
    assert (tmp_path / "out" / "config.json").is_file()


@pytest.mark.slow
def test_train_grpo_command_trains_a_saved_model_and_saves_the_result(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from vidscope.cli import app

    model, tokenizer = tiny_policy(tmp_path)
    model.save_pretrained(tmp_path / "policy")
    tokenizer.save_pretrained(tmp_path / "policy")
    out = tmp_path / "trained"
    args = ["train", "grpo", str(tmp_path / "policy"), "--out", str(out), "--generated", "1", "--steps", "1"]
    args += ["--group-size", "2", "--batch-size", "2", "--max-turns", "1", "--max-completion-length", "8"]
    args += ["--questions-per-step", "1", "--mini-batch", "1", "--ppo-epochs", "1"]
    result = CliRunner().invoke(app, args, env={"VIDSCOPE_DATA_DIR": str(tmp_path / "data")})

    assert result.exit_code == 0, result.output
    assert "trained 1 steps" in result.output and str(out) in result.output.replace("\n", "")
    assert json.loads((out / "config.json").read_text())["model_type"] == "qwen2"


@pytest.mark.slow
def test_a_saved_policy_is_loaded_as_the_master_by_a_model_spec(tmp_path: Path) -> None:
    """``[models] chat = "transformers-chat:<dir>"`` loads a saved policy, and the cvr strategy
    runs it: every reply is read as the master's actions (or costs a turn), ending in an answer."""
    from vidscope.agents import strategies
    from vidscope.agents.simulator.simulator import ScriptSimulator, SimContext
    from vidscope.agents.simulator.templates import generate_scripts
    from vidscope.agents.strategies import StrategyRequest
    from vidscope.models import registry
    from vidscope.models.transformers_chat import TransformersChat

    model, tokenizer = tiny_policy(tmp_path)
    model.save_pretrained(tmp_path / "policy")
    tokenizer.save_pretrained(tmp_path / "policy")
    settings = Settings(
        data_dir=tmp_path / "data",
        models={
            "chat": f"transformers-chat:{tmp_path / 'policy'}",
            "options": {"transformers-chat": {"max_new_tokens": 12}},
        },
        agent={"cvr_max_turns": 3},
    )
    registry.clear_cache()
    chat = registry.planner_model(settings)
    assert isinstance(chat, TransformersChat)
    script = generate_scripts(1, seed=2)[0]
    question = script.questions[0]
    ctx = SimContext(settings, ScriptSimulator(script, clip_seconds=5.0), chat=chat)
    answer = strategies.answer(
        "cvr", ctx, StrategyRequest(question.text, question.video_ids, "video", question.options)
    )
    turns = [s for s in answer.trace if s.kind in ("model-error", "tool", "finish")]
    assert turns and answer.answer  # three replies read (an unusable one costs its turn), then an answer
    registry.clear_cache()


def test_a_qwen3_policy_stays_one_token_sequence_over_the_masters_turns(tmp_path: Path) -> None:
    """Qwen3's chat template drops earlier turns' thinking, so a re-rendered conversation is not a
    prefix of the next one; rollouts render with TRL's prefix-preserving twin and keep every turn,
    the policy's tokens marked 1 and the observations between them 0."""
    from trl.chat_template_utils import qwen3_chat_template

    from vidscope.agents.simulator.templates import generate_scripts
    from vidscope.flows.training.train import RecordingPolicy, master_rollout, training_template

    model, tokenizer = tiny_policy(tmp_path)
    tokenizer.chat_template = qwen3_chat_template
    template = training_template(tokenizer)
    assert template is not None
    script = generate_scripts(1, seed=3)[0]
    policy = RecordingPolicy(model, tokenizer, budget=400, chat_template=template)
    settings = Settings(data_dir=tmp_path / "data", agent={"max_tokens": 16})  # each reply ends
    master_rollout(settings, script, script.questions[0], policy, 3, 1.0)
    assert policy.prompt_ids and len(policy.mask) == len(policy.completion_ids)
    turns = sum(1 for a, b in zip([0, *policy.mask], policy.mask, strict=False) if (a, b) == (0, 1))
    assert turns == 3 and policy.mask.count(0) > 0  # three replies, observations between them
