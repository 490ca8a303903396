"""The embedded all-MiniLM-L6-v2 forward pass in NumPy: the same weights and vectors, no torch.

Loading the embedder through transformers imports torch and transformers (~3 s of CPU, ~2.5 s of it
imports) before the first query vector; a cold ``vidscope ask`` spends most of its time there. This
module reads the packaged ``model.safetensors`` and ``tokenizer.json`` directly (``safetensors`` and
``tokenizers``, core dependencies: a core install has no torch) and runs the six BERT layers with NumPy
matrix products: ~0.1 s to load. The vectors equal the transformers ones to float32 rounding
(``tests/test_embedder.py`` compares them); the only approximation is GELU's ``erf``, computed
with Abramowitz–Stegun 7.1.26 (error below 1.5e-7) since NumPy has none.

A question's few texts run with one BLAS thread (``threadpoolctl``, when installed): OpenBLAS's
threads cost far more than they save on a dozen tokens, and on a busy machine they wait for cores
(measured on the shared 2-core machine, issue 44: a query vector took 0.23-0.36 CPU-s and 1.8-2.9 s
with the default threads, 0.016 CPU-s and 0.16-0.21 s with one).

Ingestion's batches run here too (torch only with ``torch_batches``, see
:class:`~vidscope.models.sentence_embedder.MiniLMEmbedder`). GELU works on a cache-sized block of
values at a time in float32 and attention on one text at a time, so the passes over a batch stay
in the CPU's cache: 700 texts of 5-300 words take ~2x torch's time with a third of its peak
memory (``benchmarks/embed_batches.py --backend numpy``; 5.5x before).

Nothing here is MiniLM-L6 only: sizes and layer count come from ``config.json``, and the padding
token from the tokenizer, so a local BERT directory in the same format (``minilm:<directory>``,
:mod:`.multilingual_minilm`: e.g. the 12-layer multilingual MiniLM with its XLM-R tokenizer) runs too.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: Batches of at most this many texts (a question's) run with one BLAS thread.
ONE_THREAD_TEXTS = 8
_controller: list[Any] = []  # threadpoolctl's controller, found once per process


def _one_blas_thread() -> contextlib.AbstractContextManager[Any]:
    """BLAS limited to one thread for the block (nothing without ``threadpoolctl``)."""
    if not _controller:
        try:
            from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]
        except ImportError:
            return contextlib.nullcontext()
        _controller.append(ThreadpoolController())
    return _controller[0].limit(limits=1, user_api="blas")


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def _erf(x: np.ndarray) -> np.ndarray:
    """erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), in float32 and in place on two
    temporaries: GELU runs on every token's 1,536 intermediate values, and the float64 version
    with a temporary per operation was half of an ingestion batch's time (issue 44)."""
    z = np.abs(x, dtype=np.float32)
    t = np.multiply(z, np.float32(0.3275911))
    t += 1.0
    np.reciprocal(t, out=t)
    poly = np.multiply(t, np.float32(1.061405429))
    for coefficient in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(coefficient)
        poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z  # poly · exp(-x²)
    np.subtract(np.float32(1.0), poly, out=poly)
    return np.copysign(poly, x, out=poly)


#: Values GELU works on at a time: its dozen passes then stay in the CPU's cache instead of
#: streaming a batch's whole intermediate layer (tens of MB) through memory a dozen times.
_GELU_BLOCK = 32_768


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x·Φ(x) = x/2 · (1 + erf(x/√2)), in float32, a block at a time."""
    flat = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    out = np.empty_like(flat)
    for start in range(0, flat.size, _GELU_BLOCK):
        block = flat[start : start + _GELU_BLOCK]
        phi = _erf(block * np.float32(1 / np.sqrt(2.0)))
        phi += 1.0
        phi *= block
        phi *= np.float32(0.5)
        out[start : start + _GELU_BLOCK] = phi
    return out.reshape(x.shape)


def _read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file as float32 arrays: float32 ones are read-only views of the
    file mapped into memory (its 8-byte header length, JSON header, then the data); others are read
    and converted."""
    import struct

    with path.open("rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + length)
    tensors: dict[str, np.ndarray] = {}
    others = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] != "F32":
            others.append(name)
            continue
        start, end = entry["data_offsets"]
        tensors[name] = data[start:end].view(np.float32).reshape(entry["shape"])
    if others:
        from safetensors import safe_open

        with safe_open(str(path), framework="np") as handle:
            for name in others:
                tensors[name] = handle.get_tensor(name).astype(np.float32)
    return tensors


class NumpyBert:
    """A BERT encoder (``BertModel``'s ``last_hidden_state``) from a safetensors checkpoint."""

    def __init__(self, model_dir: Path, max_tokens: int) -> None:
        from tokenizers import Tokenizer

        config = json.loads((model_dir / "config.json").read_text())
        if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
            raise ValueError(f"{model_dir} is not a BERT model with GELU activations")
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        # Dense weights are used transposed: a view, which BLAS reads as such (no copy); the float32
        # tensors are views of the memory-mapped file, so loading reads nothing twice (issue 44: a
        # cold question spent 0.11-0.15 CPU-s on load_file's copy and the transposed copies).
        tensors = _read_safetensors(model_dir / "model.safetensors")
        dense = {k for k, v in tensors.items() if k.startswith("encoder.") and v.ndim == 2}
        self.w = {k: (v.T if k in dense else v) for k, v in tensors.items()}
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        # As AutoTokenizer(padding=True, truncation=True, max_length=max_tokens) would: pad to the
        # longest text of the batch (the file's own setting pads every text to 128).
        self.tokenizer.enable_truncation(max_tokens)
        # BERT's WordPiece vocabulary pads with [PAD]; an XLM-R sentencepiece one (the multilingual
        # MiniLM) with <pad>. Padded positions are masked out, so only a valid id matters.
        pad_token = next(
            (t for t in ("[PAD]", "<pad>") if self.tokenizer.token_to_id(t) is not None), "[PAD]"
        )
        pad_id = self.tokenizer.token_to_id(pad_token)
        self.tokenizer.enable_padding(
            pad_id=int(config.get("pad_token_id", 0)) if pad_id is None else pad_id, pad_token=pad_token
        )

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text after truncation (before padding), to group similar lengths."""
        return [sum(e.attention_mask) for e in self.tokenizer.encode_batch(list(texts))]

    def encode(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(last hidden states (batch, tokens, hidden), attention mask (batch, tokens))."""
        if len(texts) <= ONE_THREAD_TEXTS:
            with _one_blas_thread():
                return self._encode(texts)
        return self._encode(texts)

    def _encode(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        encodings = self.tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        w = self.w
        positions = np.arange(ids.shape[1])
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][positions][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        # Padding gets the most negative float added before the softmax, as transformers does.
        bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        batch, tokens, _ = x.shape
        head_dim = self.hidden // self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def linear(h: np.ndarray, name: str, p: str = p) -> np.ndarray:
                weight = w[p + name + ".weight"]
                out = h.reshape(-1, h.shape[-1]) @ weight + w[p + name + ".bias"]
                return out.reshape(batch, tokens, weight.shape[1])

            def split(h: np.ndarray) -> np.ndarray:
                # Contiguous per head: NumPy's stacked matmul hands contiguous matrices to BLAS.
                heads = h.reshape(batch, tokens, self.heads, head_dim).transpose(0, 2, 1, 3)
                return np.ascontiguousarray(heads)

            q = split(linear(x, "attention.self.query"))
            q *= np.float32(1 / np.sqrt(head_dim))
            k = split(linear(x, "attention.self.key"))
            v = split(linear(x, "attention.self.value"))
            context = np.empty_like(q)
            for one in range(batch):  # one text's scores (heads × tokens²) stay in the cache
                scores = q[one] @ k[one].transpose(0, 2, 1)
                scores += bias[one]
                scores -= scores.max(axis=-1, keepdims=True)
                np.exp(scores, out=scores)
                scores /= scores.sum(axis=-1, keepdims=True)
                np.matmul(scores, v[one], out=context[one])
            context = context.transpose(0, 2, 1, 3).reshape(batch, tokens, self.hidden)
            x = _layer_norm(
                linear(context, "attention.output.dense") + x,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                self.eps,
            )
            inner = _gelu(linear(x, "intermediate.dense"))
            x = _layer_norm(
                linear(inner, "output.dense") + x,
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
                self.eps,
            )
        return x.astype(np.float32, copy=False), mask
