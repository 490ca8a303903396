"""AgentCVR's masters are Qwen3-VL models (issue 38: "the paper's masters are Qwen3-VL;
`transformers-chat` cannot load a Qwen3-VL checkpoint today. Load it (or say exactly why not)").

The test builds a tiny random-weight checkpoint of the Qwen3-VL architecture
(``Qwen3VLForConditionalGeneration``, in the installed transformers) with a word-level tokenizer
made here (nothing is downloaded), names it as the chat model, and runs AgentCVR's master with it
on the script simulator. No causal-LM auto class takes a Qwen3-VL configuration, so
``transformers-chat`` loads it with the image-text-to-text one and uses it for text.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from vidscope.agents.cvr.agent import run_cvr  # noqa: E402
from vidscope.agents.simulator.simulator import ScriptSimulator, SimContext  # noqa: E402
from vidscope.agents.simulator.templates import generate_script  # noqa: E402
from vidscope.core.errors import BackendUnavailable  # noqa: E402
from vidscope.core.settings import Settings  # noqa: E402
from vidscope.models import registry  # noqa: E402
from vidscope.models.transformers_chat import TransformersChat  # noqa: E402

SPECIAL = ["[UNK]", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ANSWER = json.dumps({"actions": [{"action": "answer", "answer": "A", "choice": "A"}]}, separators=(",", ":"))
WORDS = ["A", "B", "system", "user", "assistant", ANSWER]


def tiny_qwen3_vl(directory: Path) -> Path:
    """A two-layer Qwen3-VL-architecture model with random weights and its tokenizer, saved."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen3VLConfig, Qwen3VLForConditionalGeneration

    vocab = {token: i for i, token in enumerate(SPECIAL + WORDS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.save(str(directory / "tokenizer.json"))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_file=str(directory / "tokenizer.json"),
        unk_token="[UNK]",
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        additional_special_tokens=SPECIAL[2:],
    )
    tokenizer.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }} {{ m['content'] }}<|im_end|>{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant {% endif %}"
    )
    text = {
        "vocab_size": len(vocab),
        "hidden_size": 16,
        "intermediate_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 8,
        "max_position_embeddings": 4096,
        "rope_scaling": {"rope_type": "default", "mrope_section": [2, 1, 1], "mrope_interleaved": True},
        "pad_token_id": vocab["<|endoftext|>"],
        "eos_token_id": vocab["<|im_end|>"],
    }
    vision = {
        "depth": 1,
        "hidden_size": 16,
        "intermediate_size": 32,
        "num_heads": 2,
        "out_hidden_size": 16,
        "deepstack_visual_indexes": [0],
        "num_position_embeddings": 16,
    }
    torch.manual_seed(0)
    Qwen3VLForConditionalGeneration(Qwen3VLConfig(text_config=text, vision_config=vision)).save_pretrained(
        directory
    )
    tokenizer.save_pretrained(directory)
    return directory


def test_a_qwen3_vl_checkpoint_loads_as_the_master_and_answers(tmp_path: Path) -> None:
    (tmp_path / "qwen3-vl").mkdir()
    checkpoint = tiny_qwen3_vl(tmp_path / "qwen3-vl")
    settings = Settings(
        data_dir=tmp_path / "data",
        models={
            "chat": f"transformers-chat:{checkpoint}",
            "options": {"transformers-chat": {"max_new_tokens": 4}},
        },
        agent={"cvr_max_turns": 2, "max_tokens": 4},
    )
    registry.clear_cache()
    chat = registry.planner_model(settings)
    assert isinstance(chat, TransformersChat)
    assert type(chat.model).__name__ == "Qwen3VLForConditionalGeneration"

    script = generate_script(3)
    question = script.questions[0]
    ctx = SimContext(settings, ScriptSimulator(script), chat=chat)
    answer = run_cvr(ctx, question.text, question.video_ids, options=question.options)
    registry.clear_cache()

    # A random master: its replies are read as actions or cost a turn; the run ends either way.
    turns = [s for s in answer.trace if s.kind in ("model-error", "tool", "finish")]
    assert 1 <= len(turns) <= 2 + 1 and answer.answer


def test_a_checkpoint_of_an_unknown_model_type_is_one_line(tmp_path: Path) -> None:
    checkpoint = tmp_path / "unknown"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps({"model_type": "qwen9_vl_future"}))
    settings = Settings(data_dir=tmp_path / "data", models={"chat": f"transformers-chat:{checkpoint}"})
    registry.clear_cache()
    with pytest.raises(BackendUnavailable) as raised:
        registry.planner_model(settings)
    registry.clear_cache()
    message = str(raised.value)
    assert "\n" not in message and "qwen9_vl_future" in message and "transformers" in message
