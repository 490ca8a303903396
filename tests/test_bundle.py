"""Portable databases: export ingested videos, import them elsewhere, get the same answers."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from media import text_video
from processes import MB, run_vidscope
from typer.testing import CliRunner

from vidscope.cli import app
from vidscope.cli.common import overrides
from vidscope.core.settings import IngestSettings, ModelSettings, Settings
from vidscope.flows.ingest import run_ingest
from vidscope.models import registry
from vidscope.models.open_store import open_store
from vidscope.storage import Store, ledger
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
        imported = target.rows(spec).to_pylist()
        if spec.name == "ledger":  # each row also says it came from a bundle (until the file comes)
            assert all(ledger.imported(row) for row in imported)
            imported = [{**row, "details_json": _unmarked(row["details_json"])} for row in imported]
        assert imported == source.rows(spec, video_id=video_ids[0]).to_pylist(), spec.name
    merged = {(r["dimension"], r["concept"]): r for r in target.rows(target.concepts).to_pylist()}
    assert len(merged) == manifest.tables["concepts"]
    assert merged[(known["dimension"], known["concept"])]["aliases"] == ["zzz", *known["aliases"]]
    # The exported video answers the same search and SQL; the other video stayed behind.
    exported = [h for h in clip_search(settings, source, "bread") if h[0] == video_ids[0]]
    assert clip_search(target_settings, target, "bread") == exported
    assert exported[0][1] == 0  # the clip showing FRESH BREAD
    only_first = SQL.replace("ORDER BY", f"WHERE video_id = '{video_ids[0]}' ORDER BY")
    assert query(target, SQL) == query(source, only_first)

    # Importing again leaves the video alone; named in ``replace`` it is replaced, not duplicated.
    before = target.table_version(target.clips)
    report = import_bundle(target, tmp_path / "bundle", models=configured_models(target_settings))
    assert report.imported == [] and report.kept == [video_ids[0]]
    assert target.table_version(target.clips) == before
    report = import_bundle(
        target, tmp_path / "bundle", models=configured_models(target_settings), replace=[video_ids[0]]
    )
    assert report.replaced == [video_ids[0]] and target.count(target.clips) == 2
    assert target.count(target.ledger) == len(stages())


def _unmarked(details_json: str | None) -> str | None:
    """A ledger row's details without the import mark, as the exporting store had them."""
    details = {k: v for k, v in json.loads(details_json or "{}").items() if k != ledger.IMPORTED_FROM}
    return json.dumps(details) if details else None


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


# ---------------------------------------------------------------- a bundle is untrusted input
#
# Each attack below is run through the real CLI against a store holding another video. The store
# must come out byte-for-byte unchanged, and the user must read one line: no traceback.

runner = CliRunner()


def store_digest(data_dir: Path) -> dict[str, str]:
    """A hash of every file under the data dir's tables: any write, even a no-op commit, shows."""
    return {
        str(p.relative_to(data_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((data_dir / "lance").rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def library(built, tmp_path_factory) -> dict[str, Any]:
    """Bundles of the two videos, and a data dir holding only the second (by a genuine import)."""
    settings, (first, second) = built
    folder = tmp_path_factory.mktemp("library")
    source = open_store(settings)
    export_videos(source, [first], folder / "first", models=configured_models(settings))
    export_videos(source, [second], folder / "second", models=configured_models(settings))
    target = settings_in(folder / "target")
    import_bundle(open_store(target), folder / "second", models=configured_models(target))
    return {"first": first, "second": second, "bundles": folder, "target": target.data_dir}


@pytest.fixture()
def attack(library, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """A fresh copy of the target data dir and of the first video's bundle, and a way to run
    ``vidscope`` on them that asserts the store is unchanged afterwards."""
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data"
    shutil.copytree(library["target"], data)
    bundle = tmp_path / "bundle"
    shutil.copytree(library["bundles"] / "first", bundle)
    before = store_digest(data)

    def run(*args: str, env: dict[str, str] | None = None, changed: bool = False) -> Any:
        overrides.clear()
        result = runner.invoke(app, ["--data-dir", str(data), *args], env=env)
        overrides.clear()
        assert "Traceback" not in result.output
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        if not changed:
            assert store_digest(data) == before
        return result

    return SimpleNamespace(bundle=bundle, data=data, run=run, **library)


def edit_manifest(bundle: Path, **changes: Any) -> None:
    manifest = json.loads((bundle / MANIFEST).read_text())
    manifest.update(changes)
    (bundle / MANIFEST).write_text(json.dumps(manifest))


def rewrite(bundle: Path, table: str, rows: pa.Table) -> None:
    """Replace a table file of the bundle (and its row count in the manifest)."""
    pq.write_table(rows, bundle / f"{table}.parquet", compression="zstd")
    counts = json.loads((bundle / MANIFEST).read_text())["tables"]
    edit_manifest(bundle, tables={**counts, table: rows.num_rows})


def refused(result: Any, *words: str) -> None:
    """Exit 1 with one line naming the problem."""
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1, result.output
    for word in words:
        assert word in lines[0], lines[0]


def test_import_refuses_rows_of_a_video_the_manifest_does_not_name(attack) -> None:
    clips = pq.read_table(attack.bundle / "clips.parquet")
    # The first video's bundle, its clips relabelled as the second video's: a rewrite of them.
    ids = pa.array([attack.second] * clips.num_rows)
    rewrite(
        attack.bundle, "clips", clips.set_column(clips.schema.get_field_index("video_id"), "video_id", ids)
    )
    refused(attack.run("import", str(attack.bundle)), "clips.parquet", "does not name")


def test_import_refuses_a_manifest_naming_a_video_it_has_no_rows_for(attack) -> None:
    # Before: naming a stored video with no rows deleted every row of it.
    manifest = json.loads((attack.bundle / MANIFEST).read_text())
    edit_manifest(attack.bundle, videos=sorted([*manifest["videos"], attack.second]))
    refused(attack.run("import", str(attack.bundle)), "no videos row", attack.second[:12])
    refused(attack.run("import", "--replace", attack.second[:12], str(attack.bundle)), "no videos row")


def test_import_leaves_a_video_already_here_alone_unless_replace_names_it(attack) -> None:
    bundle = attack.bundles / "second"
    clips = Store(attack.data).rows(Store(attack.data).clips).to_pylist()
    result = attack.run("import", str(bundle))
    assert result.exit_code == 0 and "imported 0 videos" in result.output
    assert "left 1 video already here alone" in result.output

    refused(attack.run("import", "--replace", "0" * 12, str(bundle)), "--replace", "names none")

    result = attack.run("import", "--replace", attack.second[:8], str(bundle), changed=True)
    assert result.exit_code == 0 and "imported 1 video (1 replaced)" in result.output, result.output
    store = Store(attack.data)
    assert store.rows(store.clips).to_pylist() == clips
    assert store.count(store.ledger, attack.second) == len(stages())


def test_import_refuses_duplicate_keys_before_writing(attack) -> None:
    # Before: the duplicate failed the upsert after the deletes had begun (140 frames lost).
    frames = pq.read_table(attack.bundle / "frames.parquet")
    rewrite(attack.bundle, "frames", pa.concat_tables([frames, frames.slice(0, 1)]))
    refused(attack.run("import", "--replace", attack.first[:12], str(attack.bundle)), "repeats a key")


def test_import_bounds_the_decoded_size_of_a_tiny_parquet_file(attack) -> None:
    ocr = pq.read_table(attack.bundle / "ocr_items.parquet")
    row = ocr.slice(0, 1).to_pylist()[0]
    bomb = pa.Table.from_pylist(
        [{**row, "item_index": i, "text": "a" * 100_000} for i in range(2_000)], schema=ocr.schema
    )
    rewrite(attack.bundle, "ocr_items", bomb)
    assert (attack.bundle / "ocr_items.parquet").stat().st_size < 20_000  # 200 MB once decoded
    result = attack.run("import", str(attack.bundle), env={"VIDSCOPE_BUNDLE__MAX_BYTES": str(20_000_000)})
    refused(result, "ocr_items.parquet", "bundle.max_bytes")


def test_import_refuses_too_many_videos_or_rows(attack) -> None:
    manifest = json.loads((attack.bundle / MANIFEST).read_text())
    fake = [f"{i:064x}" for i in range(1, 4)]
    edit_manifest(attack.bundle, videos=sorted([*manifest["videos"], *fake]))
    result = attack.run("import", str(attack.bundle), env={"VIDSCOPE_BUNDLE__MAX_VIDEOS": "3"})
    refused(result, "4 videos", "bundle.max_videos")

    edit_manifest(attack.bundle, videos=manifest["videos"])
    # The first video has 20 frames.
    result = attack.run("import", str(attack.bundle), env={"VIDSCOPE_BUNDLE__MAX_ROWS_PER_VIDEO": "10"})
    refused(result, "frames", "bundle.max_rows_per_video")
    # Named beside a second video, the table fits 2 x 10 rows, but not 20 of them for one video.
    edit_manifest(attack.bundle, videos=sorted([*manifest["videos"], fake[0]]))
    result = attack.run("import", str(attack.bundle), env={"VIDSCOPE_BUNDLE__MAX_ROWS_PER_VIDEO": "10"})
    refused(result, "frames.parquet gives one video 20 rows", "bundle.max_rows_per_video")
    edit_manifest(attack.bundle, videos=manifest["videos"])
    assert (
        attack.run(
            "import", str(attack.bundle), env={"VIDSCOPE_BUNDLE__MAX_ROWS_PER_VIDEO": "20"}, changed=True
        ).exit_code
        == 0
    )


@pytest.mark.parametrize("damage", ["truncated", "empty", "symlinked", "folder", "garbage"])
def test_import_refuses_a_damaged_or_linked_parquet_file(attack, tmp_path, damage: str) -> None:
    path = attack.bundle / "clips.parquet"
    content = path.read_bytes()
    path.unlink()
    if damage == "truncated":
        path.write_bytes(content[: len(content) // 2])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "symlinked":
        (tmp_path / "elsewhere.parquet").write_bytes(content)
        path.symlink_to(tmp_path / "elsewhere.parquet")
    elif damage == "folder":
        path.mkdir()
    else:
        path.write_bytes(b"PAR1" + b"\xff" * 200 + b"PAR1")
    words = {"empty": "is empty", "symlinked": "symbolic link", "folder": "not a regular file"}
    refused(attack.run("import", str(attack.bundle)), "clips.parquet", words.get(damage, "damaged"))


def test_import_refuses_a_linked_or_huge_manifest(attack, tmp_path) -> None:
    manifest = attack.bundle / MANIFEST
    (tmp_path / "m.json").write_bytes(manifest.read_bytes())
    manifest.unlink()
    manifest.symlink_to(tmp_path / "m.json")
    refused(attack.run("import", str(attack.bundle)), "symbolic link")
    manifest.unlink()
    manifest.write_text(" " * 5000 + (tmp_path / "m.json").read_text())
    result = attack.run("import", str(attack.bundle), env={"VIDSCOPE_BUNDLE__MAX_MANIFEST_BYTES": "4096"})
    refused(result, "bundle.max_manifest_bytes")


@pytest.mark.parametrize("target", ["/dev/null", "/dev/null/bundle", "/proc/version"])
def test_export_to_a_bad_target_prints_one_line(attack, target: str) -> None:
    refused(
        attack.run("export", attack.second[:12], "--to", target),
        "bundle" if "bundle" in target else "not a folder",
    )


def test_a_bundle_claiming_the_hash_of_a_file_not_ingested_here_is_replaced_by_the_file(
    attack, tmp_path
) -> None:
    """Identity by content hash is earned by the content: a bundle naming the hash of a real file,
    with rows of another video (10 s, 2 clips, FRESH BREAD), is replaced once that file is ingested.
    Before: ``ingest`` said "1 up to date" and kept the forged duration, clips and text."""
    from vidscope.tasks.probe import content_hash

    real = text_video(tmp_path / "real.mp4", duration=3.0, texts=[(0.0, 3.0, "LOCAL SIGN")])
    real_id = content_hash(real)
    manifest = json.loads((attack.bundle / MANIFEST).read_text())
    for file in sorted(attack.bundle.glob("*.parquet")):
        table = pq.read_table(file)
        if "video_id" not in table.column_names:
            continue
        table = table.set_column(
            table.schema.get_field_index("video_id"), "video_id", pa.array([real_id] * table.num_rows)
        )
        if file.stem == "videos":  # claim the very file, where it lies
            for column, value in (("path", str(real.resolve())), ("file_name", real.name)):
                table = table.set_column(
                    table.schema.get_field_index(column), column, pa.array([value] * table.num_rows)
                )
        pq.write_table(table, file)
    edit_manifest(attack.bundle, videos=[real_id], stages={real_id: manifest["stages"][attack.first]})
    assert attack.run("import", str(attack.bundle), changed=True).exit_code == 0
    store = Store(attack.data)
    forged = store.video_record(real_id)
    assert forged is not None and forged.duration > 9 and store.count(store.clips, real_id) == 2

    result = attack.run("ingest", str(real), changed=True)
    assert result.exit_code == 0 and "1 up to date" not in result.output, result.output
    record = store.video_record(real_id)
    assert record is not None and record.duration == pytest.approx(3.0, abs=0.2)
    clips = store.rows(store.clips, video_id=real_id).to_pylist()
    assert len(clips) == 1 and clips[0]["end"] == pytest.approx(record.duration, abs=0.2)
    texts = " ".join(r["text"] for r in store.rows(store.ocr, video_id=real_id).to_pylist())
    assert "LOCAL" in texts and "BREAD" not in texts
    rows = store.rows(store.ledger, video_id=real_id).to_pylist()
    assert rows and not any(ledger.imported(row) for row in rows)
    # The other video, and a second ingest of the file, find it all current.
    assert store.count(store.clips, attack.second) > 0
    again = attack.run("ingest", str(real), changed=True)
    assert again.exit_code == 0 and "1 up to date" in again.output, again.output


@pytest.mark.parametrize(
    ("table", "column", "value"),
    [
        ("videos", "duration", float("nan")),
        ("clips", "end", float("inf")),
        ("frames", "t", -2.5),
        ("ocr_items", "score", -0.5),
        ("ledger", "seconds", float("-inf")),
        ("clips", "text_embedding", float("nan")),  # inside a vector (which may hold negatives)
    ],
)
def test_import_refuses_nan_infinite_and_negative_numbers(
    attack, table: str, column: str, value: float
) -> None:
    """Before: they were stored; ``show`` then printed a traceback and ``ask`` failed with "cannot
    convert float NaN to integer"."""
    rows = pq.read_table(attack.bundle / f"{table}.parquet")
    index = rows.schema.get_field_index(column)
    values = rows.column(column).to_pylist()
    values[-1] = [value, *values[-1][1:]] if isinstance(values[-1], list) else value
    rewrite(
        attack.bundle,
        table,
        rows.set_column(index, rows.schema.field(index), pa.array(values, rows.schema.field(index).type)),
    )
    refused(attack.run("import", str(attack.bundle)), f"{table}.parquet", f"column {column}", "finite")
    refused(attack.run("import", "--replace", attack.first[:12], str(attack.bundle)), f"column {column}")


def test_import_refuses_a_list_bomb_from_the_parquet_metadata_before_decoding(attack) -> None:
    """A small file whose few rows hold millions of list items (run-length encoded): before, it was
    decoded in one batch (2.7 GB for 100 M items) and imported; now the metadata refuses it."""
    spec = Store(attack.data).subjects
    items = 2_000_000
    span = spec.schema.field("spans").type.value_type
    spans = pa.StructArray.from_arrays(
        [pa.repeat(pa.scalar(1.0), items), pa.repeat(pa.scalar(2.0), items)], fields=list(span)
    )
    path = attack.bundle / "subjects.parquet"
    with pq.ParquetWriter(path, spec.schema, compression="zstd") as writer:
        for index in range(4):
            row: dict[str, list[Any]] = {name: [None] for name in spec.schema.names}
            row.update(video_id=[attack.first], subject_index=[index], name=["a"])
            columns = [
                pa.ListArray.from_arrays(pa.array([0, items], pa.int32()), spans)
                if name == "spans"
                else pa.array(row[name], spec.schema.field(name).type)
                for name in spec.schema.names
            ]
            writer.write_table(pa.Table.from_arrays(columns, schema=spec.schema))
    assert path.stat().st_size < 200_000  # 8 M items
    counts = json.loads((attack.bundle / MANIFEST).read_text())["tables"]
    edit_manifest(attack.bundle, tables={**counts, "subjects": 4})

    result = attack.run("import", str(attack.bundle))
    refused(result, "subjects.parquet", "column spans", "bundle.max_list_items")
    # Allowed that many items, it must still fit the byte budget, also judged from the metadata.
    env = {"VIDSCOPE_BUNDLE__MAX_LIST_ITEMS": str(items), "VIDSCOPE_BUNDLE__MAX_BYTES": str(50_000_000)}
    refused(attack.run("import", str(attack.bundle), env=env), "subjects.parquet", "bundle.max_bytes")


def test_a_list_bomb_costs_its_import_under_500_mb(attack) -> None:
    """Peak memory of ``vidscope import`` (a process of its own) on 40 M list items in 40 rows, a
    few hundred KB of Parquet: 1.3 GB peak before the metadata check, refused under 500 MB now."""
    spec = Store(attack.data).subjects
    items, rows = 1_000_000, 40
    span = spec.schema.field("spans").type.value_type
    values = pa.StructArray.from_arrays(
        [pa.repeat(pa.scalar(1.0), items), pa.repeat(pa.scalar(2.0), items)], fields=list(span)
    )
    spans = pa.ListArray.from_arrays(pa.array([0, items], pa.int32()), values)
    path = attack.bundle / "subjects.parquet"
    with pq.ParquetWriter(path, spec.schema, compression="zstd") as writer:
        for index in range(rows):
            row: dict[str, list[Any]] = {name: [None] for name in spec.schema.names}
            row.update(video_id=[attack.first], subject_index=[index], name=["a"])
            columns = [
                spans if name == "spans" else pa.array(row[name], spec.schema.field(name).type)
                for name in spec.schema.names
            ]
            writer.write_table(pa.Table.from_arrays(columns, schema=spec.schema))
    assert path.stat().st_size < 2_000_000
    counts = json.loads((attack.bundle / MANIFEST).read_text())["tables"]
    edit_manifest(attack.bundle, tables={**counts, "subjects": rows})
    before = store_digest(attack.data)

    ran = run_vidscope(attack.data.parent, "--data-dir", str(attack.data), "import", str(attack.bundle))

    assert ran.returncode == 1 and "bundle.max_list_items" in ran.stderr, ran.stderr
    assert ran.peak_bytes < 500 * MB, f"peak {ran.peak_bytes / MB:.0f} MB"
    assert store_digest(attack.data) == before
