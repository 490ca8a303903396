"""Moment relevance reads the text vectors of clips found by words alone (not by meaning), and only
theirs: the read asks for the videos and clip numbers as two lists, so their cross product comes
back from the store and must be cut to the pairs wanted (agents/moments.relevance)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from vidscope.agents.moments import relevance
from vidscope.storage.store import Store

DIM = 8


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def test_relevance_of_clips_found_by_words_is_their_own_cosine(tmp_path: Path) -> None:
    store = Store(tmp_path, text_dim=DIM)
    rng = np.random.default_rng(4)
    keys = [(video, clip) for video in ("va", "vb", "vc") for clip in range(4)]
    vectors = {key: _unit(rng.normal(size=DIM)).astype(np.float32) for key in keys}
    vectors[("vc", 3)] = None  # a clip not embedded yet
    store.upsert(
        store.clips,
        pa.table(
            {
                "video_id": [v for v, _ in keys],
                "clip_index": pa.array([c for _, c in keys], pa.int32()),
                "start": [5.0 * c for _, c in keys],
                "end": [5.0 * c + 5.0 for _, c in keys],
                "text_embedding": pa.array(
                    [None if vectors[k] is None else vectors[k].tolist() for k in keys],
                    pa.list_(pa.float32(), DIM),
                ),
            }
        ),
    )
    query = rng.normal(size=DIM)
    by_meaning = [{"video_id": "va", "clip_index": 0, "_distance": 0.25}]
    # Found by words: (vb, 1) and (vc, 2) and (vc, 3); the lists' cross product also holds
    # (vb, 2), (vc, 1), (vb, 3)... which were not found and must get no relevance.
    by_words = [{"video_id": v, "clip_index": c} for v, c in (("vb", 1), ("vc", 2), ("vc", 3))]

    similar = relevance(store, query.tolist(), by_meaning, [*by_meaning, *by_words])

    assert set(similar) == {("va", 0), ("vb", 1), ("vc", 2)}  # (vc, 3) has no vector
    assert similar[("va", 0)] == 0.75  # from the meaning ranking's distance, not read again
    for key in (("vb", 1), ("vc", 2)):
        expected = float(vectors[key] @ _unit(query))
        assert abs(similar[key] - min(1.0, max(0.0, expected))) < 1e-6


def test_clips_read_with_their_vector_are_compared_without_another_read(tmp_path: Path) -> None:
    """The words ranking reads each hit's text vector with it (moments._word_columns): relevance
    uses that vector, and a hit read without one (None) has none; neither is read again. The
    store here holds no clip at all, so a second read would find nothing."""
    store = Store(tmp_path, text_dim=DIM)
    rng = np.random.default_rng(5)
    query = rng.normal(size=DIM)
    carried = _unit(rng.normal(size=DIM)).astype(np.float32)
    by_words = [
        {"video_id": "va", "clip_index": 1, "text_embedding": carried.tolist()},
        {"video_id": "va", "clip_index": 2, "text_embedding": None},  # not embedded yet
    ]

    similar = relevance(store, query.tolist(), [], by_words)

    assert set(similar) == {("va", 1)}
    assert abs(similar[("va", 1)] - min(1.0, max(0.0, float(carried @ _unit(query))))) < 1e-6
