"""A policy trained with GRPO on the simulator is saved, then loaded by ``compare --agent cvr`` on
an ingested video (the CLI, with ``planner = "transformers-chat:<dir>"`` in vidscope.toml); its
replies are read as the master's actions and those actions run on the real video.

The policy is tiny and random (two layers), with a word-level vocabulary whose "words" include
whole master replies — an answer, and an ``audio_query`` of the ingested video — split on spaces
only, so some sampled replies are well-formed actions: what a real trained policy writes, at
random. Nothing is downloaded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("trl")

from llm_server import ScriptedLLMServer, text  # noqa: E402
from media import text_video  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from vidscope.cli import app  # noqa: E402
from vidscope.core.settings import Settings  # noqa: E402
from vidscope.flows.compare import CompareResult  # noqa: E402
from vidscope.flows.ingest import run_ingest  # noqa: E402
from vidscope.flows.training.train import GrpoOptions, train_grpo  # noqa: E402
from vidscope.models import registry  # noqa: E402

pytestmark = pytest.mark.slow

SPECIAL = ["[UNK]", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def action_policy(tmp: Path, video_id: str):
    """A random Qwen2-style model whose vocabulary holds whole master replies as words."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    from trl.chat_template_utils import qwen2_5_chat_template

    replies = [
        json.dumps({"actions": [{"action": "answer", "answer": "A"}]}, separators=(",", ":")),
        json.dumps(
            {"actions": [{"action": "audio_query", "video_id": video_id, "t0": 0, "t1": 4}]},
            separators=(",", ":"),
        ),
    ]
    words = ["A", "B", "system", "user", "assistant", "the", "is", *replies]
    vocab = {token: i for i, token in enumerate(SPECIAL + words)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
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
        max_position_embeddings=8192,
        pad_token_id=vocab["<|endoftext|>"],
        eos_token_id=vocab["<|im_end|>"],
        bos_token_id=None,
    )
    return Qwen2ForCausalLM(config), tokenizer


def test_a_trained_policy_is_the_master_of_compare_on_an_ingested_video(tmp_path: Path) -> None:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    video = text_video(tmp_path / "talk.mp4", duration=6.0, texts=[(0.0, 6.0, "HELLO THERE")])
    base: dict[str, object] = {
        "chat": None,
        "captioner": None,
        "speech_recognizer": None,
        "text_reader": None,
        "image_text": None,
    }
    settings = Settings(data_dir=tmp_path / "data", models=base)
    reports = run_ingest([str(video)], settings)
    assert all(r.status == "ok" for r in reports), reports
    video_id = reports[0].video_id

    model, tokenizer = action_policy(tmp_path, video_id)
    out = tmp_path / "policy"
    result = train_grpo(
        settings,
        GrpoOptions(
            model="tiny",
            output_dir=out,
            generated_scripts=1,
            seed=0,
            group_size=4,
            max_turns=2,
            max_steps=2,
            learning_rate=1e-2,
            max_completion_length=16,
            per_device_batch_size=4,
            questions_per_step=1,
            mini_batch_questions=1,
            ppo_epochs=1,
            save_steps=1000,
            beta=0.0,
        ),
        model=model,
        tokenizer=tokenizer,
    )
    assert result.steps == 2 and (out / "config.json").is_file() and (out / "tokenizer.json").is_file()

    registry.clear_cache()
    config = tmp_path / "vidscope.toml"
    config.write_text(
        f"data_dir = {json.dumps(str(tmp_path / 'data'))}\n"
        "[models]\n"
        'chat = ""\ncaptioner = ""\nspeech_recognizer = ""\ntext_reader = ""\nimage_text = ""\n'
        f"planner = {json.dumps(f'transformers-chat:{out}')}\n"
        "[models.options.transformers-chat]\nmax_new_tokens = 2\n"
        "[agent]\ntemperature = 1.0\ncvr_max_turns = 20\ntool_cache = false\n"
    )
    args = ["compare", "--agent", "cvr", "--json", video_id, "What is said at the start?"]
    ran_cli = CliRunner().invoke(
        app, [*args, "--options", "hello", "--options", "bye"], env={"VIDSCOPE_CONFIG": str(config)}
    )
    registry.clear_cache()
    assert ran_cli.exit_code == 0, ran_cli.output
    answer = CompareResult.model_validate_json(ran_cli.stdout[ran_cli.stdout.index("{") :])

    ran = [s for s in answer.trace if s.kind == "tool"]
    assert ran and all(s.tool == "audio_query" for s in ran), [s.kind for s in answer.trace]
    assert all(s.arguments.get("video_id") == video_id for s in ran)
    assert answer.answer


def test_sim_to_real_runs_the_master_on_the_video_and_on_its_script(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    video = text_video(tmp_path / "sign.mp4", duration=6.0, texts=[(0.0, 6.0, "OPEN NOW")])
    base = {
        "chat": None,
        "captioner": None,
        "speech_recognizer": None,
        "text_reader": None,
        "image_text": None,
    }
    (ingested,) = run_ingest([str(video)], Settings(data_dir=tmp_path / "data", models=base))
    assert ingested.status == "ok", ingested
    look = {"action": "visual_query", "video_id": ingested.video_id, "t0": 0, "t1": 5, "focus": "the sign"}
    done = {"actions": [{"action": "answer", "answer": "A"}]}
    # The real run (its visual sub-agent asks the same model, about the frames), then the simulated one.
    master, seen = [json.dumps({"actions": [look]}), json.dumps(done)], "The sign says OPEN NOW."
    llm_server.script([text(r) for r in (master[0], seen, master[1], *master)])
    config = tmp_path / "vidscope.toml"
    config.write_text(
        f"data_dir = {json.dumps(str(tmp_path / 'data'))}\n"
        '[models]\ncaptioner = ""\nspeech_recognizer = ""\ntext_reader = ""\nimage_text = ""\n'
        'chat = "openai:scripted"\n[models.options.openai]\nmax_retries = 0\ncache = false\n'
        f"base_url = {json.dumps(llm_server.base_url)}\n"
    )
    registry.clear_cache()
    args = ["train", "sim-to-real", ingested.video_id, "--out", str(tmp_path / "report")]
    result = CliRunner().invoke(
        app,
        [*args, "--question", "What does the sign say?", "--options", "open", "--options", "closed"],
        env={"VIDSCOPE_CONFIG": str(config)},
    )
    registry.clear_cache()

    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())  # the console wraps long lines
    assert "1 questions; mean decision overlap 1.00" in said and "answers agree 1/1" in said
    report = (tmp_path / "report" / "sim_to_real_master.md").read_text()
    assert report.count("visual_query 0-5s") == 2  # the same action in both environments
    assert (tmp_path / "report" / "sim_to_real_master.png").stat().st_size > 0
    assert llm_server.pending == 0
