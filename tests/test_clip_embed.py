"""The ``video_text`` role (X-CLIP), the ``clip_embed`` stage through production ingestion, and the
MAVIS rerank and moment search reading the stored clip vectors.

The X-CLIP model is a tiny random one built and saved here (no download); its vectors carry no
meaning, so rankings are not checked, only that the clips were embedded from their own frames and
that the fine stage and moment search scored those stored vectors with the model's text side.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from media import text_video

from vidscope.core.errors import BackendUnavailable
from vidscope.core.images import decode_jpeg
from vidscope.core.settings import ModelSettings, Settings, disable_telemetry
from vidscope.models import registry, xclip
from vidscope.models.open_store import open_store
from vidscope.models.probe import check_role
from vidscope.models.protocols.video_text import VideoTextEmbedder
from vidscope.storage import Store
from vidscope.tasks import clip_embed
from vidscope.tasks.stage import ledger_rows

disable_telemetry()

FRAMES_PER_CLIP = 4
DIM = 24


def build_tiny_xclip(directory: Path) -> None:
    """Save a random X-CLIP (two-layer text and vision towers, one cross-frame layer, 24-d), a
    byte-level CLIP tokenizer and the VideoMAE image processor the released checkpoints use."""
    import torch
    from tokenizers import pre_tokenizers
    from transformers import CLIPTokenizer, VideoMAEImageProcessor, XCLIPConfig, XCLIPModel, XCLIPProcessor

    specials = ["<|startoftext|>", "<|endoftext|>"]
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokens = specials + alphabet + [ch + "</w>" for ch in alphabet]
    tokenizer = CLIPTokenizer(vocab={t: i for i, t in enumerate(tokens)}, merges=[])
    frames = VideoMAEImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    XCLIPProcessor(image_processor=frames, tokenizer=tokenizer).save_pretrained(directory)
    config = XCLIPConfig(
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
            "num_frames": FRAMES_PER_CLIP,
            "mit_hidden_size": DIM,
            "mit_intermediate_size": 48,
            "mit_num_hidden_layers": 1,
            "mit_num_attention_heads": 2,
        },
        projection_dim=DIM,
        prompt_layers=1,
        prompt_num_attention_heads=2,
    )
    torch.manual_seed(0)
    XCLIPModel(config).save_pretrained(directory)


@pytest.fixture(scope="module")
def tiny_xclip_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tiny-xclip")
    build_tiny_xclip(directory)
    return directory


def clips_of(count: int, seed: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        [rng.integers(0, 256, (40 + 8 * i, 60, 3), dtype=np.uint8) for _ in range(FRAMES_PER_CLIP)]
        for i in range(count)
    ]


def test_xclip_backend_embeds_clips_and_texts(tiny_xclip_dir: Path, tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path,
        models={"video_text": f"xclip:{tiny_xclip_dir}", "options": {"xclip": {"batch_size": 2}}},
    )
    registry.clear_cache()
    model = registry.video_text(settings)
    assert isinstance(model, VideoTextEmbedder)
    assert (model.name, model.dim, model.frames_per_clip) == (f"xclip:{tiny_xclip_dir}", DIM, FRAMES_PER_CLIP)
    clips = clips_of(3, seed=1)
    vectors = model.embed_videos(clips)  # two batches of <= 2
    assert vectors.shape == (3, DIM) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Batching does not change a clip's vector, and the frames' order matters (a video, not a bag).
    np.testing.assert_allclose(model.embed_videos(clips[2:]), vectors[2:], atol=1e-5)
    assert not np.allclose(model.embed_videos([clips[0][::-1]])[0], vectors[0], atol=1e-4)
    texts = model.embed_texts(["a dog runs on the beach", "a red car"])
    assert texts.shape == (2, DIM) and not np.allclose(texts[0], texts[1])
    with pytest.raises(ValueError, match="reads 4"):
        model.embed_videos([clips[0][:3]])
    # The models check lists and loads the role.
    assert "video_text" in registry.ROLES
    check = check_role(settings, "video_text")
    assert check.ok is True and "xclip" in check.summary
    assert check_role(Settings(data_dir=tmp_path), "video_text").summary == "not configured"


def test_xclip_refuses_a_missing_or_wrong_directory(tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailable, match="does not exist"):
        xclip.from_spec("video_text", str(tmp_path / "nope"), {}, tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(BackendUnavailable, match="XCLIPModel"):
        xclip.from_spec("video_text", str(tmp_path / "empty"), {}, tmp_path)


def xclip_settings(tmp_path: Path, model_dir: Path | None) -> Settings:
    # Silent videos: no speech model. No image-text model: clips must win over nothing else.
    return Settings(
        data_dir=tmp_path / "data",
        models=ModelSettings(
            chat=None,
            speech_recognizer=None,
            image_text=None,
            video_text=f"xclip:{model_dir}" if model_dir else None,
            options={"xclip": {"batch_size": 2}},
        ),
    )


def stored_clips(store: Store, video_id: str) -> dict[int, tuple[float, float, list[float]]]:
    rows = store.rows(store.clip_videos, video_id=video_id).to_pylist()
    return {r["clip_index"]: (r["start"], r["end"], r["video_embedding"]) for r in rows}


def expected_vectors(store: Store, video_id: str, model: VideoTextEmbedder) -> dict[int, np.ndarray]:
    """What the model makes of each clip's frames, picked as the stage picks them."""
    frames = store.rows(store.frames, video_id=video_id, columns=["frame_index", "clip_index", "jpeg"])
    by_clip: dict[int, list[tuple[int, bytes]]] = {}
    for row in frames.to_pylist():
        by_clip.setdefault(row["clip_index"], []).append((row["frame_index"], row["jpeg"]))
    result = {}
    for clip, items in by_clip.items():
        items.sort()
        jpegs = dict(items)
        picks = clip_embed.pick_frames([i for i, _ in items], model.frames_per_clip)
        result[clip] = model.embed_videos([[decode_jpeg(jpegs[i]) for i in picks]])[0]
    return result


@pytest.mark.slow
def test_ingestion_embeds_clips_and_search_scores_them(
    tiny_xclip_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vidscope.flows.ingest import run_ingest
    from vidscope.flows.search import run_search, run_search_moments

    monkeypatch.setattr(clip_embed, "BATCH", 2)  # 3 clips: two batches
    registry.clear_cache()
    car = text_video(tmp_path / "road.mp4", duration=13.0, texts=[(0.0, 13.0, "A RED CAR ON THE ROAD")])
    dog = text_video(tmp_path / "dog.mp4", duration=4.0, texts=[(0.0, 4.0, "A DOG ON THE BEACH")])
    settings = xclip_settings(tmp_path, tiny_xclip_dir)
    reports = {Path(r.path).name: r for r in run_ingest([str(car), str(dog)], settings, optimize=False)}
    store = open_store(settings)
    assert store.video_dim == DIM
    car_id = reports["road.mp4"].video_id
    assert car_id is not None
    statuses = {s.stage: s.status for s in reports["road.mp4"].stages}
    assert statuses["clip_embed"] == "done" and statuses["frame_embed"] == "skipped", reports

    # One vector per clip, the one the model gives that clip's own frames, with the clip's span.
    model = registry.video_text(settings)
    assert model is not None
    expected = expected_vectors(store, car_id, model)
    stored = stored_clips(store, car_id)
    spans = {
        r["clip_index"]: (r["start"], r["end"]) for r in store.rows(store.clips, video_id=car_id).to_pylist()
    }
    assert sorted(stored) == sorted(spans) == [0, 1, 2]
    for clip, (start, end, vector) in stored.items():
        assert (start, end) == spans[clip]
        np.testing.assert_allclose(vector, expected[clip], atol=1e-4)
    details = json.loads(ledger_rows(store, car_id)["clip_embed"]["details_json"])
    assert details == {"model": model.name, "dim": DIM, "frames_per_clip": 4, "embedded": 3, "kept": 0}

    # The MAVIS fine stage scored the stored clip vectors with the model's text side.
    result = run_search(settings, "a red car on the road")
    assert result.rerank == f"video-text:{model.name}", result.notes
    (hit,) = [h for h in result.hits if h.video_id == car_id]
    query = model.embed_texts(["a red car on the road"])[0]
    by_span = {(s, e): float(np.asarray(v) @ query) for s, e, v in stored.values()}
    assert hit.score == pytest.approx(max(by_span[m] for m in hit.moments), abs=1e-3)
    assert set(hit.moments) <= set(by_span)  # moments are whole clips

    # Moment search fuses the video encoder's ranking with the text ones (all moments: the
    # relevance bar, a cosine of the text, is not what this checks).
    moments = run_search_moments(settings, "a red car on the road", k=5, show_all=True)
    assert moments.ranked_by[-1] == f"video-text:{model.name}", moments
    assert {m.video_id for m in moments.moments} == {car_id, reports["dog.mp4"].video_id}

    # Stopped after the first batch: the next run keeps those 2 clips and embeds the third.
    store.delete_rows(store.clip_videos, f"video_id = '{car_id}' AND clip_index = 2")
    store.update_columns(store.ledger, [{"video_id": car_id, "stage": "clip_embed", "status": "failed"}])
    (again,) = run_ingest([str(car)], settings, optimize=False)
    assert {s.stage: s.status for s in again.stages}["clip_embed"] == "done", again
    details = json.loads(ledger_rows(store, car_id)["clip_embed"]["details_json"])
    assert (details["kept"], details["embedded"]) == (2, 1)
    np.testing.assert_allclose(stored_clips(store, car_id)[2][2], expected[2], atol=1e-4)

    # Without a video-text model the stage is skipped with its reason; a search that has one then
    # says the video encoder was not used and ranks by captions.
    (skipped,) = run_ingest([str(car)], xclip_settings(tmp_path, None), optimize=False)
    assert {s.stage: s.status for s in skipped.stages}["clip_embed"] == "skipped"
    row = ledger_rows(store, car_id)["clip_embed"]
    assert "no video-text model configured" in json.loads(row["details_json"])["reason"]
    fallback = run_search(settings, "a red car on the road")
    assert fallback.rerank == "caption"
    assert any("clip_embed stage has not run" in n for n in fallback.notes), fallback.notes
