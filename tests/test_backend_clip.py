"""Image–text embedders: open_clip ViT-B-32 with random weights, and a tiny transformers CLIP."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vidscope.core.errors import BackendUnavailable
from vidscope.core.settings import Settings, disable_telemetry
from vidscope.models import clip, registry
from vidscope.models.protocols.image_text import ImageTextEmbedder

disable_telemetry()


def images(count: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    # Different sizes on purpose: the preprocessing must bring them to one input size.
    return [rng.integers(0, 256, (60 + 10 * i, 80 + 7 * i, 3), dtype=np.uint8) for i in range(count)]


def assert_unit_rows(vectors: np.ndarray, rows: int, dim: int) -> None:
    assert vectors.shape == (rows, dim) and vectors.dtype == np.float32
    assert np.all(np.isfinite(vectors))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.fixture(scope="module")
def open_clip_b32() -> clip.OpenClipEmbedder:
    import torch

    torch.manual_seed(0)
    return clip.from_spec("image_text", "ViT-B-32", {"random_weights": True, "batch_size": 2}, Path("unused"))


def test_open_clip_vit_b32_random_weights_shapes_and_norms(open_clip_b32) -> None:
    embedder = open_clip_b32
    assert isinstance(embedder, ImageTextEmbedder)
    assert embedder.name == "open-clip:ViT-B-32" and embedder.dim == 512
    picture_vectors = embedder.embed_images(images(3, seed=1))  # 2 batches of <= 2
    assert_unit_rows(picture_vectors, 3, 512)
    text_vectors = embedder.embed_texts(["a red car", "a person reading a book", "x"])
    assert_unit_rows(text_vectors, 3, 512)
    assert not np.allclose(text_vectors[0], text_vectors[1])
    assert embedder.embed_texts([]).shape == (0, 512)
    # Batching must not change results: one at a time equals three in two batches.
    single = np.concatenate([embedder.embed_texts([t]) for t in ["a red car", "a person reading a book"]])
    np.testing.assert_allclose(single, text_vectors[:2], atol=1e-5)


def test_open_clip_refuses_to_run_without_weights(tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailable, match="checkpoint") as info:
        clip.from_spec("image_text", "ViT-B-32", {}, tmp_path)
    assert "open-clip:ViT-B-32" in str(info.value)
    missing = tmp_path / "vit-b-32.bin"
    with pytest.raises(BackendUnavailable) as info:
        clip.from_spec("image_text", "ViT-B-32", {"checkpoint": str(missing)}, tmp_path)
    assert str(missing) in str(info.value)
    with pytest.raises(BackendUnavailable, match="Unknown architecture 'ViT-Nope'"):
        clip.from_spec("image_text", "ViT-Nope", {"random_weights": True}, tmp_path)


@pytest.mark.slow
def test_open_clip_loads_a_local_checkpoint(open_clip_b32, tmp_path: Path) -> None:
    import torch

    checkpoint = tmp_path / "vit-b-32.pt"
    torch.save(open_clip_b32._model.state_dict(), checkpoint)
    loaded = clip.from_spec("image_text", "ViT-B-32", {"checkpoint": str(checkpoint)}, tmp_path)
    texts = ["a dog on a beach", "traffic at night"]
    np.testing.assert_allclose(loaded.embed_texts(texts), open_clip_b32.embed_texts(texts), atol=1e-5)


def build_tiny_hf_clip(directory: Path) -> None:
    """Save a random two-layer CLIP (32-d), a byte-level tokenizer and a 32 px image processor."""
    import torch
    from tokenizers import pre_tokenizers
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, CLIPTokenizer

    specials = ["<|startoftext|>", "<|endoftext|>"]
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    # Every byte, alone or word-final, is a token; no merges needed for a working tokenizer.
    tokens = specials + alphabet + [ch + "</w>" for ch in alphabet]
    tokenizer = CLIPTokenizer(vocab={t: i for i, t in enumerate(tokens)}, merges=[])
    image_processor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(directory)
    config = CLIPConfig(
        text_config={
            "vocab_size": len(tokens),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "max_position_embeddings": 64,
            "bos_token_id": 0,
            "eos_token_id": 1,
            "pad_token_id": 1,
        },
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": 32,
            "patch_size": 8,
        },
        projection_dim=24,
    )
    torch.manual_seed(0)
    CLIPModel(config).save_pretrained(directory)


@pytest.fixture(scope="module")
def tiny_clip_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tiny-clip")
    build_tiny_hf_clip(directory)
    return directory


def test_hf_clip_tiny_random_model_from_directory(tiny_clip_dir: Path, tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path,
        models={
            "image_text": f"hf-clip:{tiny_clip_dir}",
            "options": {"hf-clip": {"batch_size": 2}},
        },
    )
    registry.clear_cache()
    try:
        embedder = registry.image_text(settings)
    finally:
        registry.clear_cache()
    assert isinstance(embedder, clip.HFClipEmbedder) and isinstance(embedder, ImageTextEmbedder)
    assert embedder.dim == 24  # the projection size, not the hidden size
    assert_unit_rows(embedder.embed_images(images(3, seed=2)), 3, 24)
    texts = ["a cat", "a much longer sentence about a cat sitting on a mat", "b"]
    vectors = embedder.embed_texts(texts)
    assert_unit_rows(vectors, 3, 24)
    # Padding inside a batch must not leak into the vectors.
    np.testing.assert_allclose(embedder.embed_texts([texts[0]])[0], vectors[0], atol=1e-5)


def test_hf_clip_missing_directory_and_wrong_model(tmp_path: Path, tiny_clip_dir: Path) -> None:
    missing = tmp_path / "clip-model"
    with pytest.raises(BackendUnavailable) as info:
        clip.from_spec("image_text", str(missing), {"kind": "hf-clip"}, tmp_path)
    assert str(missing) in str(info.value) and "hf-clip" in str(info.value)
    with pytest.raises(BackendUnavailable, match="cache"):
        clip.from_spec("image_text", "openai/clip-vit-base-patch32", {}, tmp_path)


def build_tiny_siglip(directory: Path) -> None:
    """Save a random one-layer SigLIP (32-d, no projection) with a byte-level tokenizer."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        PreTrainedTokenizerFast,
        SiglipConfig,
        SiglipImageProcessor,
        SiglipModel,
        SiglipProcessor,
    )

    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    for special in ("<pad>", "</s>", "<unk>"):
        vocab[special] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        eos_token="</s>",
        unk_token="<unk>",
        model_max_length=16,
    )
    image_processor = SiglipImageProcessor(size={"height": 32, "width": 32})
    SiglipProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(directory)
    ids = {"pad_token_id": vocab["<pad>"], "eos_token_id": vocab["</s>"], "bos_token_id": None}
    config = SiglipConfig(
        text_config={
            "vocab_size": len(vocab),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "max_position_embeddings": 16,
            **ids,
        },
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 32,
            "patch_size": 8,
        },
    )
    torch.manual_seed(0)
    SiglipModel(config).save_pretrained(directory)


def test_hf_siglip_pads_texts_to_the_trained_length(tmp_path: Path) -> None:
    build_tiny_siglip(tmp_path)
    embedder = clip.from_spec("image_text", str(tmp_path), {}, tmp_path)
    assert isinstance(embedder, clip.HFClipEmbedder)
    assert embedder._text_padding == "max_length" and embedder.dim == 32
    texts = ["a cat", "a much longer text that gets truncated at sixteen tokens"]
    vectors = embedder.embed_texts(texts)
    assert_unit_rows(vectors, 2, 32)
    np.testing.assert_allclose(embedder.embed_texts([texts[0]])[0], vectors[0], atol=1e-5)
    assert_unit_rows(embedder.embed_images(images(2, seed=3)), 2, 32)
