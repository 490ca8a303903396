"""The ``frame_embed`` stage through production ingestion, and the MAVIS fine stage reading it.

The image–text model is open_clip ViT-B-32 built with random weights (no download; the vectors
carry no meaning, so rankings are not checked, only that the fine stage scored the stored frames
of this model and said so).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from media import text_video

from vidscope.core.images import decode_jpeg
from vidscope.core.settings import ModelSettings, Settings
from vidscope.models import registry
from vidscope.models.open_store import open_store
from vidscope.storage import Store
from vidscope.tasks import frame_embed
from vidscope.tasks.stage import ledger_rows

CLIP = "open-clip:ViT-B-32"


def clip_settings(tmp_path: Path, image_text: str | None = CLIP) -> Settings:
    # No speech model: the videos are silent, and whisper would only cost time.
    return Settings(
        data_dir=tmp_path / "data",
        models=ModelSettings(
            chat=None,
            speech_recognizer=None,
            image_text=image_text,
            options={"open-clip": {"random_weights": True, "batch_size": 8}},
        ),
        search={"frames_per_video": 3},
    )


def frame_vectors(store: Store, video_id: str) -> tuple[list[float], list[Any], list[bytes]]:
    rows = store.rows(
        store.frames, video_id=video_id, columns=["frame_index", "t", "jpeg", "image_embedding"]
    ).to_pylist()
    return [r["t"] for r in rows], [r["image_embedding"] for r in rows], [r["jpeg"] for r in rows]


def interrupt(store: Store, video_id: str, *, keep: int) -> None:
    """Leave the video as a run stopped after ``keep`` frames would: later vectors missing, the
    ledger row not current."""
    _, vectors, _ = frame_vectors(store, video_id)
    store.update_columns(
        store.frames,
        [
            {"video_id": video_id, "frame_index": i, "image_embedding": None}
            for i in range(keep, len(vectors))
        ],
    )
    store.update_columns(store.ledger, [{"video_id": video_id, "stage": "frame_embed", "status": "failed"}])


@pytest.mark.slow
def test_ingestion_embeds_frames_and_search_reranks_with_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vidscope.flows.ingest import run_ingest
    from vidscope.flows.search import run_search

    monkeypatch.setattr(frame_embed, "BATCH", 5)  # 12 frames: three batches
    # Every frame embedded (the near-duplicate gate off: tests/test_frame_embed_gate.py checks it).
    monkeypatch.setattr(frame_embed, "SAME_VIEW_LEVELS", 0.0)
    car = text_video(tmp_path / "road.mp4", duration=6.0, texts=[(0.0, 6.0, "A RED CAR ON THE ROAD")])
    dog = text_video(tmp_path / "dog.mp4", duration=4.0, texts=[(0.0, 4.0, "A DOG ON THE BEACH")])
    settings = clip_settings(tmp_path)
    reports = {Path(r.path).name: r for r in run_ingest([str(car), str(dog)], settings, optimize=False)}
    store = open_store(settings)
    car_id = reports["road.mp4"].video_id
    assert car_id is not None
    statuses = {s.stage: s.status for s in reports["road.mp4"].stages}
    assert statuses["frame_embed"] == "done" and statuses["tags"] == "done", reports

    # Every frame got the vector the model gives its stored JPEG.
    model = registry.image_text(settings)
    times, vectors, jpegs = frame_vectors(store, car_id)
    assert len(vectors) == 12 and all(v is not None for v in vectors)
    expected = model.embed_images([decode_jpeg(j) for j in jpegs])
    np.testing.assert_allclose(np.asarray(vectors), expected, atol=1e-4)
    details = json.loads(ledger_rows(store, car_id)["frame_embed"]["details_json"])
    assert details == {"model": CLIP, "dim": 512, "embedded": 12, "shared": 0, "kept": 0}

    # The fine stage scored those stored frames with the model's text side, not the captions.
    result = run_search(settings, "a red car on the road")
    assert result.rerank == f"image-text:{CLIP}", result.notes
    assert not any("frame embeddings" in n for n in result.notes)
    (hit,) = [h for h in result.hits if h.video_id == car_id]
    query = model.embed_texts(["a red car on the road"])[0]
    scores = dict(zip(times, np.asarray(vectors) @ query, strict=True))
    assert hit.score == pytest.approx(max(scores[a] for a, _ in hit.moments), abs=1e-3)
    assert all(hit.score >= scores[a] - 1e-3 for a, _ in hit.moments)

    # Stopped after the first batch: the next run keeps those 5 vectors and embeds the other 7.
    interrupt(store, car_id, keep=5)
    (again,) = [r for r in run_ingest([str(car)], settings, optimize=False)]
    redone = {s.stage: s.status for s in again.stages}
    assert redone["frame_embed"] == "done" and redone["tags"] == "cached", again
    details = json.loads(ledger_rows(store, car_id)["frame_embed"]["details_json"])
    assert (details["kept"], details["embedded"]) == (5, 7)
    np.testing.assert_allclose(np.asarray(frame_vectors(store, car_id)[1]), expected, atol=1e-4)

    # Vectors that are not this model's (another checkpoint) are never kept: all are redone.
    interrupt(store, car_id, keep=12)
    store.update_columns(
        store.frames,
        [{"video_id": car_id, "frame_index": 0, "image_embedding": np.roll(expected[0], 1).tolist()}],
    )
    run_ingest([str(car)], settings, optimize=False)
    details = json.loads(ledger_rows(store, car_id)["frame_embed"]["details_json"])
    assert (details["kept"], details["embedded"]) == (0, 12)

    # Without an image-text model the stage is skipped with its reason, and a search that has one
    # then falls back to captions, saying why (the stored vectors are not trusted any more).
    plain = clip_settings(tmp_path, image_text=None)
    (skipped,) = run_ingest([str(car)], plain, optimize=False)
    assert {s.stage: s.status for s in skipped.stages}["frame_embed"] == "skipped"
    row = ledger_rows(store, car_id)["frame_embed"]
    assert "no image-text model configured" in json.loads(row["details_json"])["reason"]
    fallback = run_search(settings, "a red car on the road")
    assert fallback.rerank == "caption"
    assert any("frame_embed stage has not run" in n for n in fallback.notes), fallback.notes
