"""Portable databases: export ingested videos, import them elsewhere, get the same answers."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from media import text_video

from vidscope.core.settings import IngestSettings, ModelSettings, Settings
from vidscope.flows.ingest import run_ingest
from vidscope.models import registry
from vidscope.models.open_store import open_store
from vidscope.storage import Store
from vidscope.storage.bundle import (
    MANIFEST,
    BundleError,
    configured_models,
    export_videos,
    import_bundle,
)
from vidscope.storage.sql import query
from vidscope.tasks.stages import stages


def settings_in(folder: Path) -> Settings:
    return Settings(data_dir=folder, ingest=IngestSettings(stage_retries=0))


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Settings, list[str]]:
    """Two small silent videos with on-screen text, ingested by the real flow."""
    folder = tmp_path_factory.mktemp("bundle")
    first = text_video(
        folder / "signs.mp4",
        duration=10.0,
        texts=[(0.0, 4.0, "FRESH BREAD"), (5.0, 9.0, "TRAIN STATION")],
    )
    second = text_video(folder / "menu.mp4", duration=6.0, texts=[(0.0, 5.0, "HOT COFFEE")])
    settings = settings_in(folder / "data")
    # Load the embedder before the flow's threads do: two threads importing transformers at once
    # can see a half-initialised module ("cannot import name 'AutoModel'").
    registry.text_embedder(settings)
    reports = run_ingest([str(first), str(second)], settings)
    assert all(r.status == "ok" for r in reports), reports
    return settings, sorted(r.video_id for r in reports)


def clip_search(settings: Settings, store: Store, text: str) -> list[tuple[str, int, float]]:
    embedder = registry.text_embedder(settings)
    (vector,) = embedder.embed([text])
    hits = store.nearest(store.clips, vector.tolist(), 5, columns=["video_id", "clip_index"])
    return [(h["video_id"], h["clip_index"], round(h["_distance"], 6)) for h in hits]


SQL = """
    SELECT v.file_name, c.clip_index, c.start, c."end", c.ocr_text, l.stage, l.stage_version, l.status
    FROM clips c JOIN videos v USING (video_id) JOIN ledger l USING (video_id)
    ORDER BY v.file_name, c.clip_index, l.stage
"""


def test_export_then_import_into_an_empty_store_gives_the_same_answers(built, tmp_path) -> None:
    settings, video_ids = built
    source = open_store(settings)
    manifest = export_videos(source, [video_ids[0]], tmp_path / "bundle", models=configured_models(settings))
    written = json.loads((tmp_path / "bundle" / MANIFEST).read_text())
    assert written["videos"] == [video_ids[0]] and written["text_dim"] == 384
    assert written["models"]["text_embedder"] == "minilm:embedded"
    assert written["clip_embed_models"] == ["minilm:embedded"]
    assert manifest.tables["clips"] == 2 and manifest.tables["frames"] == 20
    assert (
        manifest.tables["ledger"] == len(stages())
        and manifest.tables["concepts"] == manifest.tables["concept_index"] > 0
    )
    assert manifest.stages[video_ids[0]]["embed"] >= 1

    target_settings = settings_in(tmp_path / "elsewhere")
    target = open_store(target_settings)
    # The store already knows one of the bundle's concepts, under another alias: aliases merge.
    known = pq.read_table(tmp_path / "bundle" / "concepts.parquet").to_pylist()[0]
    target.upsert(target.concepts, [{**known, "aliases": ["zzz"]}])
    import_bundle(target, tmp_path / "bundle", models=configured_models(target_settings))

    for spec in source.specs:
        assert target.rows(spec).to_pylist() == source.rows(spec, video_id=video_ids[0]).to_pylist(), (
            spec.name
        )
    merged = {(r["dimension"], r["concept"]): r for r in target.rows(target.concepts).to_pylist()}
    assert len(merged) == manifest.tables["concepts"]
    assert merged[(known["dimension"], known["concept"])]["aliases"] == ["zzz", *known["aliases"]]
    # The exported video answers the same search and SQL; the other video stayed behind.
    exported = [h for h in clip_search(settings, source, "bread") if h[0] == video_ids[0]]
    assert clip_search(target_settings, target, "bread") == exported
    assert exported[0][1] == 0  # the clip showing FRESH BREAD
    only_first = SQL.replace("ORDER BY", f"WHERE video_id = '{video_ids[0]}' ORDER BY")
    assert query(target, SQL) == query(source, only_first)

    # Importing again replaces rather than duplicates.
    import_bundle(target, tmp_path / "bundle", models=configured_models(target_settings))
    assert target.count(target.clips) == 2


def test_import_refuses_another_embedding_model_in_one_line(built, tmp_path) -> None:
    settings, video_ids = built
    source = open_store(settings)
    export_videos(source, video_ids, tmp_path / "bundle", models=configured_models(settings))

    other = Settings(
        data_dir=tmp_path / "bge",
        models=ModelSettings(text_embedder="sentence-transformers:BAAI/bge-m3"),
    )
    with pytest.raises(BundleError) as refused:
        import_bundle(
            Store(other.data_dir, text_dim=1024), tmp_path / "bundle", models=configured_models(other)
        )
    message = str(refused.value)
    assert "\n" not in message
    assert "minilm:embedded (384-d)" in message and "BAAI/bge-m3 (1024-d)" in message

    # Same size, different model: still refused, and nothing was written.
    same_size = Settings(data_dir=tmp_path / "other", models=ModelSettings(text_embedder="other:model"))
    store = Store(same_size.data_dir)
    with pytest.raises(BundleError, match="uses other:model"):
        import_bundle(store, tmp_path / "bundle", models=configured_models(same_size))
    assert store.count(store.videos) == 0


def test_export_refuses_unknown_videos_and_a_used_folder(built, tmp_path) -> None:
    settings, video_ids = built
    store = open_store(settings)
    with pytest.raises(BundleError, match="not in the store"):
        export_videos(store, ["f" * 64], tmp_path / "a", models=configured_models(settings))
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x").write_text("")
    with pytest.raises(BundleError, match="not empty"):
        export_videos(store, video_ids, tmp_path / "b", models=configured_models(settings))
    with pytest.raises(BundleError, match="not a vidscope bundle"):
        import_bundle(store, tmp_path / "b", models=configured_models(settings))
