"""The transformers vision-language backend on a tiny random Qwen2-VL the test builds."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from vidscope.core.errors import BackendUnavailable
from vidscope.core.settings import Settings, disable_telemetry
from vidscope.models import registry
from vidscope.models.protocols.captioner import Captioner
from vidscope.models.protocols.chat import ChatMessage, ChatModel, ToolCall, ToolSpec

disable_telemetry()

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

# A ChatML-style template written for this test: images become the vision placeholder tokens the
# Qwen2-VL processor expands, text is copied through.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tiny_qwen_vl(directory: Path, family: str = "qwen2_vl") -> None:
    """Save a random ~100k-parameter Qwen2-VL, Qwen2.5-VL or Qwen3-VL and its processor."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    # Byte-level BPE with no merges: every byte is a token, so any text round-trips.
    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(SPECIAL_TOKENS)
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    text_config = {
        "vocab_size": len(tokenizer),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 1024,
        # head_dim 16 -> 8 rotary frequencies split over (time, height, width)
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 10000.0,
            "mrope_section": [2, 3, 3],
        },
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
    }
    if family == "qwen2_vl":
        processor_cls = transformers.Qwen2VLProcessor
        config_cls, model_cls = (
            transformers.Qwen2VLConfig,
            transformers.Qwen2VLForConditionalGeneration,
        )
        vision_config = {
            "depth": 1,
            "embed_dim": 32,
            "hidden_size": 32,
            "num_heads": 2,
            "mlp_ratio": 2,
        }
    elif family == "qwen2_5_vl":
        processor_cls = transformers.Qwen2_5_VLProcessor
        config_cls = transformers.Qwen2_5_VLConfig
        model_cls = transformers.Qwen2_5_VLForConditionalGeneration
        # Two blocks so both windowed and full attention run.
        vision_config = {
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": 32,
            "window_size": 56,
            "fullatt_block_indexes": [1],
        }
    elif family == "qwen3_vl":
        processor_cls = transformers.Qwen3VLProcessor
        config_cls = transformers.Qwen3VLConfig
        model_cls = transformers.Qwen3VLForConditionalGeneration
        # Interleaved M-RoPE: each of the height/width sections times 3 must fit in head_dim / 2.
        text_config["head_dim"] = 32
        text_config["rope_parameters"] = {
            "rope_type": "default",
            "rope_theta": 10000.0,
            "mrope_section": [6, 5, 5],
            "mrope_interleaved": True,
        }
        vision_config = {
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": 32,
            "patch_size": 16,
            "num_position_embeddings": 64,
            "deepstack_visual_indexes": [0],
        }
    else:
        raise ValueError(family)
    patch = vision_config.get("patch_size", 14) * 2  # one merged patch, in pixels
    # Small pixel budget: 4-16 merged patches per image keeps the vision tower cheap.
    image_processor = transformers.Qwen2VLImageProcessor(
        patch_size=patch // 2,
        merge_size=2,
        min_pixels=patch * patch * 4,
        max_pixels=patch * patch * 16,
    )
    video_processor_cls = (
        transformers.Qwen3VLVideoProcessor if family == "qwen3_vl" else transformers.Qwen2VLVideoProcessor
    )
    processor = processor_cls(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor_cls(),
        chat_template=CHAT_TEMPLATE,
    )
    processor.save_pretrained(directory)
    config = config_cls(
        text_config=text_config,
        vision_config=vision_config,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    torch.manual_seed(0)
    model_cls(config).save_pretrained(directory)


@pytest.fixture(scope="module")
def tiny_vlm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tiny-qwen2-vl")
    build_tiny_qwen_vl(directory)
    return directory


@pytest.fixture(scope="module")
def vlm(tiny_vlm_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    from vidscope.models import transformers_vlm

    # Calls are logged to the data dir's model_calls table: keep it out of the working tree.
    return transformers_vlm.from_spec(
        "captioner",
        str(tiny_vlm_dir),
        {"max_new_tokens": 6, "batch_size": 2},
        tmp_path_factory.mktemp("vlm-data"),
    )


def frames(count: int, seed: int, shape: tuple[int, int] = (90, 120)) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (*shape, 3), dtype=np.uint8) for _ in range(count)]


def jpeg(image: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="JPEG")
    return buffer.getvalue()


def test_loads_on_cpu_in_float32_and_satisfies_both_roles(vlm) -> None:
    import torch

    assert vlm.device == "cpu" and vlm.dtype == torch.float32
    assert next(vlm.model.parameters()).dtype == torch.float32
    assert isinstance(vlm, Captioner) and isinstance(vlm, ChatModel)
    assert vlm.supports_tools is False
    assert vlm.tokenizer.padding_side == "left"


def test_caption_two_frames_is_short_deterministic_text(vlm) -> None:
    clip = frames(2, seed=1)
    caption = vlm.caption(clip, "someone says: hello there")
    assert isinstance(caption, str)
    # Byte-level tokens decode to at most one character each, so 6 new tokens give <= 6 characters.
    assert len(caption) <= 6
    assert vlm.caption(clip, "someone says: hello there") == caption  # greedy decoding


def test_caption_batch_handles_uneven_clips_across_batches(vlm) -> None:
    clips = [frames(2, seed=2), frames(1, seed=3, shape=(64, 200)), frames(3, seed=4), []]
    contexts = ["", "on-screen text: EXIT", "a speech line", "no frames at all"]
    captions = vlm.caption_batch(clips, contexts)
    assert len(captions) == 4 and all(isinstance(c, str) and len(c) <= 6 for c in captions)
    with pytest.raises(ValueError, match="2 clips but 1 contexts"):
        vlm.caption_batch(clips[:2], contexts[:1])


def test_chat_with_images_and_tool_history_respects_max_tokens(vlm) -> None:
    image = frames(1, seed=5)[0]
    messages = [
        ChatMessage(role="system", content="You answer questions about videos."),
        ChatMessage(role="user", content="What is shown?", images=[jpeg(image)]),
        ChatMessage(role="assistant", tool_calls=[ToolCall(id="c1", name="search", arguments={"q": "car"})]),
        ChatMessage(role="tool", tool_call_id="c1", name="search", content='{"hits": []}'),
        ChatMessage(role="user", content="And now?"),
    ]
    reply = vlm.chat(messages, max_tokens=4, json_output=True)
    assert isinstance(reply.text, str) and len(reply.text) <= 4
    assert reply.tool_calls == []
    assert reply.model == vlm.name
    assert reply.usage.images == 1
    assert 0 <= reply.usage.output_tokens <= 4
    # The prompt holds the image placeholder tokens plus the text of all five messages.
    assert reply.usage.input_tokens > 40
    assert reply.finish_reason in {"stop", "length"}
    if reply.usage.output_tokens < 4:
        assert reply.finish_reason == "stop"
    text_only = vlm.chat([ChatMessage(role="user", content="hi")], max_tokens=2)
    assert text_only.usage.images == 0 and text_only.usage.output_tokens <= 2
    assert isinstance(text_only.text, str) and len(text_only.text) <= 2


def test_template_messages_render_tools_as_text(vlm) -> None:
    messages = [
        ChatMessage(role="assistant", tool_calls=[ToolCall(id="c1", name="search", arguments={"q": "x"})]),
        ChatMessage(role="tool", tool_call_id="c1", name="search", content="3 hits"),
        ChatMessage(role="user", content="Summarise."),
    ]
    converted, images = vlm._template_messages(messages, json_output=True)
    assert images == []
    assert [m["role"] for m in converted] == ["assistant", "user", "user"]
    assert converted[0]["content"][-1]["text"] == '{"tool": "search", "arguments": {"q": "x"}}'
    assert converted[1]["content"][-1]["text"].startswith("Result of tool search:")
    assert converted[2]["content"][-1]["text"].endswith("a single JSON object and nothing else.")


def test_registry_builds_it_from_settings(tiny_vlm_dir: Path, tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path,
        models={
            "captioner": f"transformers-vlm:{tiny_vlm_dir}",
            "options": {"transformers-vlm": {"max_new_tokens": 3}},
        },
    )
    registry.clear_cache()
    try:
        captioner = registry.captioner(settings)
        assert captioner is registry.captioner(settings)  # loaded once per process
        assert captioner.max_new_tokens == 3
        assert len(captioner.caption(frames(1, seed=6), "")) <= 3
    finally:
        registry.clear_cache()


def test_missing_directory_names_the_path_and_fix(tmp_path: Path) -> None:
    from vidscope.models import transformers_vlm

    missing = tmp_path / "no-such-model"
    with pytest.raises(BackendUnavailable) as info:
        transformers_vlm.from_spec("captioner", str(missing), {}, tmp_path)
    message = str(info.value)
    assert str(missing) in message and "transformers-vlm" in message and "directory" in message


def test_uncached_hub_name_is_refused_without_downloading(tmp_path: Path) -> None:
    from vidscope.models import transformers_vlm

    # No hub here and the name is not cached: the refusal must come from the cache check.
    with pytest.raises(BackendUnavailable) as info:
        transformers_vlm.from_spec("chat", "Qwen/Qwen2.5-VL-3B-Instruct", {}, tmp_path)
    message = str(info.value)
    assert "Qwen/Qwen2.5-VL-3B-Instruct" in message and "cache" in message


def test_directory_that_is_not_a_vlm_is_refused(tmp_path: Path) -> None:
    from vidscope.models import transformers_vlm

    (tmp_path / "config.json").write_text('{"model_type": "not-a-real-architecture"}')
    with pytest.raises(BackendUnavailable, match="AutoModelForImageTextToText"):
        transformers_vlm.from_spec("captioner", str(tmp_path), {}, tmp_path)


@pytest.mark.parametrize(
    ("family", "model_class"),
    [
        ("qwen2_5_vl", "Qwen2_5_VLForConditionalGeneration"),
        ("qwen3_vl", "Qwen3VLForConditionalGeneration"),
    ],
)
def test_newer_qwen_vl_families_load_and_caption(tmp_path: Path, family: str, model_class: str) -> None:
    from vidscope.models import transformers_vlm

    build_tiny_qwen_vl(tmp_path, family)
    vlm = transformers_vlm.from_spec("captioner", str(tmp_path), {"max_new_tokens": 4}, tmp_path)
    assert type(vlm.model).__name__ == model_class
    captions = vlm.caption_batch([frames(2, seed=7), frames(1, seed=8)], ["", "context"])
    assert len(captions) == 2 and all(isinstance(c, str) and len(c) <= 4 for c in captions)


SEARCH_TOOL = ToolSpec(
    name="search_transcript",
    description="Find moments where something is said.",
    parameters={"type": "object", "properties": {"query": {"type": "string"}}},
)


def test_tools_without_template_support_are_described_in_the_system_message(vlm) -> None:
    assert vlm.template_renders_tools is False  # the test template has no `tools` variable
    with_system = [
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="q"),
    ]
    converted, _ = vlm._template_messages(with_system, False, [SEARCH_TOOL])
    system_text = converted[0]["content"][-1]["text"]
    assert system_text.startswith("Be brief.") and "- search_transcript: Find moments" in system_text
    assert '"query": {"type": "string"}' in system_text and '{"tool": "<tool name>"' in system_text
    converted, _ = vlm._template_messages([ChatMessage(role="user", content="q")], False, [SEARCH_TOOL])
    assert [m["role"] for m in converted] == ["system", "user"]
    plain = vlm.chat([ChatMessage(role="user", content="q")], max_tokens=1)
    offered = vlm.chat([ChatMessage(role="user", content="q")], tools=[SEARCH_TOOL], max_tokens=1)
    assert offered.usage.input_tokens > plain.usage.input_tokens + 50
    assert offered.tool_calls == []


def test_tools_go_through_a_template_that_renders_them(vlm) -> None:
    tools_template = (
        "{% if tools %}<|im_start|>system\n{% for t in tools %}TOOL {{ t['function']['name'] }}"
        "{% endfor %}<|im_end|>\n{% endif %}" + CHAT_TEMPLATE
    )
    original = vlm.processor.chat_template
    vlm.processor.chat_template = tools_template
    vlm.template_renders_tools = True
    try:
        converted, _ = vlm._template_messages([ChatMessage(role="user", content="q")], False, [SEARCH_TOOL])
        assert [m["role"] for m in converted] == ["user"]  # no instructions of our own
        plain = vlm.chat([ChatMessage(role="user", content="q")], max_tokens=1)
        offered = vlm.chat([ChatMessage(role="user", content="q")], tools=[SEARCH_TOOL], max_tokens=1)
        # Exactly the system block the template rendered from the tool list was added.
        block = "<|im_start|>system\nTOOL search_transcript<|im_end|>\n"
        added = len(vlm.tokenizer.encode(block, add_special_tokens=False))
        assert offered.usage.input_tokens - plain.usage.input_tokens == added
    finally:
        vlm.processor.chat_template = original
        vlm.template_renders_tools = False


def test_ingestion_captions_clips_with_the_local_vlm(tiny_vlm_dir: Path, tmp_path: Path) -> None:
    from media import text_video

    from vidscope.core.settings import ModelSettings
    from vidscope.flows.ingest import run_ingest
    from vidscope.models.open_store import open_store

    video = text_video(tmp_path / "v.mp4", duration=12.0, texts=[(0.0, 12.0, "HELLO")])
    models = ModelSettings(
        captioner=f"transformers-vlm:{tiny_vlm_dir}",
        speech_recognizer="",
        options={"transformers-vlm": {"max_new_tokens": 6}},
    )
    # No Prefect retry of a failed stage, so the model calls below are counted exactly.
    settings = Settings(data_dir=tmp_path / "data", models=models, ingest={"stage_retries": 0})
    (report,) = run_ingest([str(video)], settings)
    # A random tiny VLM cannot write the structured parse's JSON: that stage fails clearly after
    # asking twice (tags, which needs it, is blocked); every other stage's rows are stored. Both
    # are optional enrichments, so the video is ingested, "degraded" (issue 37).
    stages = {s.stage: s for s in report.stages}
    assert report.status == "degraded"
    assert stages["parse"].status == "failed" and "no usable parse" in (stages["parse"].error or "")
    assert stages["tags"].status == "blocked"
    assert all(s.status != "failed" for name, s in stages.items() if name != "parse")
    store = open_store(settings)
    clips = store.rows(store.clips, video_id=report.video_id).to_pylist()
    assert len(clips) == 3
    assert all(c["caption_source"].startswith("transformers-vlm:") for c in clips)
    assert all(c["caption"] and "no captioning model" not in c["caption"] for c in clips)
    assert "HELLO" in (clips[0]["ocr_text"] or "")
    # The registry was carried (one clip per generate): the random model's noise is no registry
    # JSON, so each clip kept its text as the caption and the registry stayed empty.
    import json

    from vidscope.tasks.stage import ledger_rows

    caption = json.loads(ledger_rows(store, report.video_id)["caption"]["details_json"])
    assert len(caption["registry_unusable"]) == 3 and "registry" not in caption
    from vidscope.models.usage import totals

    logged = totals(store)  # every clip's generate call is logged like any model call
    assert logged["calls"] == 3 + 2 and logged["images"] >= 3  # 3 captions, the parse asked twice
    assert logged["input_tokens"] > 0 and logged["output_tokens"] > 0


def test_chat_returns_a_call_written_as_json_as_a_tool_call(vlm, monkeypatch: pytest.MonkeyPatch) -> None:
    # The tiny model writes noise, so its generation is replaced by what a real one would write.
    written = '{"tool": "search", "arguments": {"q": "red car"}}'
    monkeypatch.setattr(vlm, "_generate", lambda *args, **kwargs: [(written, 10, 5, True)])
    spec = ToolSpec(name="search", description="Find clips.", parameters={"type": "object"})
    reply = vlm.chat([ChatMessage(role="user", content="Find the red car.")], tools=[spec])
    assert reply.text is None
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("search", {"q": "red car"})]
    answered = '{"answer": "Clip 4."}'
    monkeypatch.setattr(vlm, "_generate", lambda *args, **kwargs: [(answered, 10, 5, True)])
    reply = vlm.chat([ChatMessage(role="user", content="Which clip?")], tools=[spec])
    assert reply.text == "Clip 4." and reply.tool_calls == []
