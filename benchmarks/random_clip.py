"""A CLIP ViT-B/32 with random weights, in the default image–text model's ONNX int8 form (issue 44).

The default ``image_text`` model (``onnx-clip:clip-vit-b32-int8``) cannot be fetched on the
development machines, so what it costs during ingestion was never measured. Compute does not
depend on the weights' values: this script builds open_clip's ``ViT-B-32`` with ``pretrained=None``
(the same architecture and size: 224 px, 32 px patches, width 768, 12 layers; text width 512),
exports the image tower (with its projection, output ``image_embeds``) and the text tower (output
``text_embeds``) to ONNX, and quantises both with onnxruntime's dynamic int8 quantisation, the way
transformers.js's conversion script made the published ``*_quantized.onnx`` files (per-channel,
reduced range, uint8 weights; from that script as we remember it: not checked against the hub
here). The tokenizer is a word-level one over CLIP's 49,408-entry BPE vocabulary (text cost is
not part of ingestion; a BPE tokenizer.json could not be had offline).

:func:`install` writes the three files into ``<model cache>/clip-vit-b32-int8/`` (where the
backend looks for the real one) and points the process's pins in
:data:`vidscope.models.model_files.CARDS` at them, so ``registry.image_text`` loads it through the
normal path (sha256 checked on load). Building takes ~1 CPU-minute; the result is kept in
``benchmarks/out/random-clip-vit-b32-int8/`` and reused.

    .venv/bin/python benchmarks/random_clip.py   # build once, print the files and sizes
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out" / "random-clip-vit-b32-int8"
NAME = "clip-vit-b32-int8"
FILES = ("vision.onnx", "text.onnx", "tokenizer.json")


def _tokenizer(path: Path) -> None:
    import open_clip
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    vocab_file = Path(open_clip.__file__).parent / "bpe_simple_vocab_16e6.txt.gz"
    with gzip.open(vocab_file) as handle:
        merges = handle.read().decode("utf-8").split("\n")[1 : 49152 - 256 - 2 + 1]
    words = [chr(i) for i in range(256)]
    words += [w + "</w>" for w in words]
    words += ["".join(m.split()) for m in merges]
    words += ["<|startoftext|>", "<|endoftext|>"]
    vocab = {w: i for i, w in enumerate(dict.fromkeys(words))}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<|endoftext|>"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(path))


def build(directory: Path = OUT) -> Path:
    """The three files in ``directory`` (built once, then reused)."""
    if all((directory / f).is_file() for f in FILES):
        return directory
    import open_clip
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    directory.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(2)
    model, _, _ = open_clip.create_model_and_transforms("ViT-B-32", pretrained=None)
    model.eval()

    class Vision(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.clip = model

        def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
            return self.clip.encode_image(pixel_values)

    class Text(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.clip = model

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            return self.clip.encode_text(input_ids)

    float_dir = directory / "fp32"
    float_dir.mkdir(exist_ok=True)
    torch.onnx.export(
        Vision(),
        (torch.zeros(1, 3, 224, 224),),
        str(float_dir / "vision.onnx"),
        input_names=["pixel_values"],
        output_names=["image_embeds"],
        dynamic_axes={"pixel_values": {0: "n"}, "image_embeds": {0: "n"}},
        opset_version=17,
        dynamo=False,
    )
    torch.onnx.export(
        Text(),
        (torch.zeros(1, 77, dtype=torch.int64),),
        str(float_dir / "text.onnx"),
        input_names=["input_ids"],
        output_names=["text_embeds"],
        dynamic_axes={"input_ids": {0: "n", 1: "t"}, "text_embeds": {0: "n"}},
        opset_version=17,
        dynamo=False,
    )
    for name in ("vision.onnx", "text.onnx"):
        quantize_dynamic(
            str(float_dir / name),
            str(directory / name),
            per_channel=True,
            reduce_range=True,
            weight_type=QuantType.QUInt8,
        )
    shutil.rmtree(float_dir)
    _tokenizer(directory / "tokenizer.json")
    return directory


def install(model_cache: Path) -> Path:
    """The random model in ``model_cache`` as ``clip-vit-b32-int8``, with this process's pins on it."""
    from vidscope.models import model_files

    source = build()
    target = model_cache / NAME
    target.mkdir(parents=True, exist_ok=True)
    card = model_files.CARDS[NAME]
    files = []
    for entry in card.files:
        path = source / entry.name
        if not (target / entry.name).exists():
            shutil.copyfile(path, target / entry.name)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        files.append(entry.model_copy(update={"sha256": digest, "bytes": path.stat().st_size}))
    runtime = {**card.runtime, "text": {**card.runtime["text"], "pad_token": "<|endoftext|>"}}
    model_files.CARDS[NAME] = card.model_copy(update={"files": files, "runtime": runtime})
    return target


if __name__ == "__main__":
    built = build()
    for f in FILES:
        print(f"{built / f}: {(built / f).stat().st_size / 1e6:.1f} MB")
