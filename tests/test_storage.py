"""The storage API: idempotent writes, per-video replacement, removal, schema checks, SQL."""

from __future__ import annotations

import math
import threading
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pytest

from vidscope.storage import Store, StoreError
from vidscope.storage.schema import SCHEMA_VERSION_KEY
from vidscope.storage.sql import SqlError, query
from vidscope.storage.store import lancedb_index
from vidscope.storage.videos import VideoNotFound, find_video


def clip_rows(video_id: str, n: int, caption: str = "c") -> list[dict]:
    return [
        {
            "video_id": video_id,
            "clip_index": i,
            "start": 5.0 * i,
            "end": 5.0 * i + 5,
            "caption": f"{caption}{i}",
        }
        for i in range(n)
    ]


def video_row(video_id: str, path: str, name: str) -> dict:
    return {
        "video_id": video_id,
        "path": path,
        "file_name": name,
        "size_bytes": 10,
        "duration": 12.0,
        "fps": 25.0,
        "width": 64,
        "height": 48,
        "rotation": 0,
        "has_audio": False,
        "added_at": datetime.now(UTC),
    }


@pytest.fixture()
def store(tmp_path) -> Store:
    return Store(tmp_path / "data")


def test_upsert_is_idempotent_and_updates_by_key(store: Store) -> None:
    store.upsert(store.clips, clip_rows("v1", 3))
    store.upsert(store.clips, clip_rows("v1", 3))
    assert store.count(store.clips) == 3
    store.upsert(store.clips, [clip_rows("v1", 1, caption="new")[0]])
    captions = store.rows(store.clips, video_id="v1").column("caption").to_pylist()
    assert captions == ["new0", "c1", "c2"]


def test_replace_video_rows_drops_stale_rows_of_that_video_only(store: Store) -> None:
    store.replace_video_rows(store.clips, "v1", clip_rows("v1", 4))
    store.replace_video_rows(store.clips, "v2", clip_rows("v2", 4))
    store.replace_video_rows(store.clips, "v1", clip_rows("v1", 2))
    assert store.count(store.clips, "v1") == 2
    assert store.count(store.clips, "v2") == 4
    store.replace_video_rows(store.clips, "v1", [])
    assert store.count(store.clips, "v1") == 0
    assert store.count(store.clips, "v2") == 4


def test_replace_refuses_rows_of_another_video(store: Store) -> None:
    with pytest.raises(ValueError, match="must all belong"):
        store.replace_video_rows(store.clips, "v1", clip_rows("v2", 1))


def test_duplicate_keys_in_one_write_are_refused(store: Store) -> None:
    rows = clip_rows("v1", 2)
    rows[1]["clip_index"] = 0
    with pytest.raises(ValueError, match="duplicate natural keys"):
        store.upsert(store.clips, rows)
    assert store.count(store.clips) == 0


def test_update_columns_leaves_other_columns_alone(store: Store) -> None:
    store.replace_video_rows(store.clips, "v1", clip_rows("v1", 2))
    vector = np.ones(store.text_dim, dtype=np.float32) / np.sqrt(store.text_dim)
    store.update_columns(
        store.clips,
        [
            {
                "video_id": "v1",
                "clip_index": 1,
                "ocr_text": "EXIT",
                "text_embedding": vector.tolist(),
            },
            {"video_id": "v1", "clip_index": 9, "ocr_text": "no such clip"},
        ],
    )
    rows = store.rows(store.clips, video_id="v1").to_pylist()
    assert [r["caption"] for r in rows] == ["c0", "c1"]
    assert [r["ocr_text"] for r in rows] == [None, "EXIT"]
    assert rows[0]["text_embedding"] is None
    assert np.allclose(rows[1]["text_embedding"], vector)
    assert store.count(store.clips) == 2


def test_delete_video_removes_rows_from_every_table(store: Store) -> None:
    for vid in ("v1", "v2"):
        store.upsert(store.videos, [video_row(vid, f"/x/{vid}.mp4", f"{vid}.mp4")])
        store.replace_video_rows(store.clips, vid, clip_rows(vid, 2))
        store.replace_video_rows(
            store.ocr,
            vid,
            [
                {
                    "video_id": vid,
                    "item_index": 0,
                    "t": 1.0,
                    "t_end": 2.0,
                    "text": "HI",
                    "box": [0.0] * 8,
                    "score": 0.9,
                }
            ],
        )
    store.delete_video("v1")
    for spec in (store.videos, store.clips, store.ocr):
        assert store.count(spec, "v1") == 0
        assert store.count(spec, "v2") > 0


def test_wrong_embedding_size_is_a_clear_error(tmp_path) -> None:
    Store(tmp_path / "d").upsert(Store(tmp_path / "d").clips, clip_rows("v1", 1))
    other = Store(tmp_path / "d", text_dim=1024)
    with pytest.raises(StoreError, match="different embedding model"):
        other.rows(other.clips)


def test_schema_version_mismatch_is_a_clear_error(tmp_path) -> None:
    import lancedb

    old = Store(tmp_path / "d").clips.schema.with_metadata({SCHEMA_VERSION_KEY: b"0"})
    lancedb.connect(str(tmp_path / "d" / "lance")).create_table("clips", schema=old)
    store = Store(tmp_path / "d")
    with pytest.raises(StoreError, match="schema version 0"):
        store.count(store.clips)


def test_sql_reads_every_table_and_refuses_file_access(store: Store) -> None:
    store.replace_video_rows(store.clips, "v1", clip_rows("v1", 3))
    columns, rows = query(store, "SELECT video_id, count(*) AS n FROM clips GROUP BY video_id")
    assert columns == ["video_id", "n"] and rows == [("v1", 3)]
    _, rows = query(store, "SELECT count(*) FROM ledger")
    assert rows == [(0,)]
    with pytest.raises(SqlError, match="disabled"):
        query(store, f"COPY clips TO '{store.data_dir / 'leak.csv'}'")
    assert not (store.data_dir / "leak.csv").exists()
    with pytest.raises(SqlError):
        query(store, "SET enable_external_access = true")
    with pytest.raises(SqlError):
        query(store, "SELECT * FROM no_such_table")


def test_find_video_by_id_prefix_path_and_name(store: Store) -> None:
    store.upsert(
        store.videos,
        [
            video_row("abcdef0123", "/videos/a b/ünï.mp4", "ünï.mp4"),
            video_row("abcdef9999", "/videos/other.mp4", "other.mp4"),
            video_row("abcdef7777", "/videos/talk.mp4", "talk.mp4"),
            video_row("abcdef8888", "/videos/talk.mkv", "talk.mkv"),
        ],
    )
    assert find_video(store, "abcdef01").video_id == "abcdef0123"
    assert find_video(store, "other").video_id == "abcdef9999"  # the name people say (issue 41)
    assert find_video(store, "ünï").video_id == "abcdef0123"
    with pytest.raises(VideoNotFound, match="several"):  # talk.mp4 and talk.mkv
        find_video(store, "talk")
    assert find_video(store, "/videos/a b/ünï.mp4").video_id == "abcdef0123"
    assert find_video(store, "other.mp4").video_id == "abcdef9999"
    with pytest.raises(VideoNotFound, match="several"):
        find_video(store, "abcdef")
    with pytest.raises(VideoNotFound, match="no ingested video"):
        find_video(store, "abcd")  # shorter than the 6-character minimum for a prefix
    with pytest.raises(VideoNotFound, match="no ingested video"):
        find_video(store, "missing.mp4")
    for bad in ("", "other.mp4\x00"):  # a NUL byte would make the path calls raise ValueError
        with pytest.raises(VideoNotFound, match="not a video id"):
            find_video(store, bad)


def test_video_version_changes_with_the_ledger(store: Store) -> None:
    before = store.video_version("v1")
    store.upsert(
        store.ledger,
        [
            {
                "video_id": "v1",
                "stage": "probe",
                "stage_version": 1,
                "config_hash": "x",
                "status": "done",
                "started_at": datetime.now(UTC),
                "finished_at": datetime.now(UTC),
            }
        ],
    )
    assert store.video_version("v1") != before
    assert store.video_version("v2") != store.video_version("v1")


def test_upsert_accepts_arrow_tables_and_fills_missing_columns(store: Store) -> None:
    table = pa.table(
        {"video_id": ["v1"], "clip_index": pa.array([0], pa.int32()), "start": [0.0], "end": [5.0]}
    )
    store.upsert(store.clips, table)
    assert store.rows(store.clips).column("caption").to_pylist() == [None]


def _random_clips(n_videos: int, per_video: int, dim: int, seed: int = 0) -> list[dict]:
    """Clip vectors around 50 topics (text embeddings cluster by topic; uniform noise would not)."""
    rng = np.random.default_rng(seed)
    topics = rng.normal(size=(50, dim))
    n = n_videos * per_video
    vectors = (topics[rng.integers(0, 50, n)] + 0.35 * rng.normal(size=(n, dim))).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [
        {
            "video_id": f"v{v:03d}",
            "clip_index": i,
            "start": 5.0 * i,
            "end": 5.0 * i + 5,
            "text_embedding": vectors[v * per_video + i].tolist(),
        }
        for v in range(n_videos)
        for i in range(per_video)
    ]


def test_per_video_search_is_exact_and_corpus_search_uses_the_ann_index(tmp_path) -> None:
    store = Store(tmp_path / "data", text_dim=64)
    rows = _random_clips(n_videos=40, per_video=100, dim=64)
    store.upsert(store.clips, rows)
    done = store.optimize(ann_min_rows=1000)
    assert "ivf_rq(text_embedding, 4,000 vectors)" in done["clips"]
    assert "text_embedding" in {c for ix in store.table(store.clips).list_indices() for c in ix.columns}

    matrix = np.array([r["text_embedding"] for r in rows])
    rng = np.random.default_rng(1)
    recalls = []
    for _ in range(10):
        query = matrix[rng.integers(0, len(rows))] + 0.1 * rng.normal(size=64)
        exact = {(rows[i]["video_id"], rows[i]["clip_index"]) for i in np.argsort(-(matrix @ query))[:10]}
        found = store.nearest(store.clips, query, 10, columns=["video_id", "clip_index"])
        recalls.append(len(exact & {(r["video_id"], r["clip_index"]) for r in found}) / 10)
        # Within one video: exactly k rows, all of that video, in exact order, despite the ANN index.
        mine = store.nearest(store.clips, query, 16, video_id="v007", columns=["video_id", "clip_index"])
        order = [i for i in np.argsort(-(matrix @ query)) if rows[i]["video_id"] == "v007"][:16]
        assert [r["clip_index"] for r in mine] == [rows[i]["clip_index"] for i in order]
    assert np.mean(recalls) >= 0.9, recalls


def test_corpus_ann_skips_clips_without_vectors_and_is_retrained_when_the_corpus_doubles(tmp_path) -> None:
    store = Store(tmp_path / "data", text_dim=64)
    rows = _random_clips(n_videos=20, per_video=100, dim=64)
    for row in rows[::5]:
        row["text_embedding"] = None  # clips not embedded yet
    store.upsert(store.clips, rows)
    assert "ivf_rq(text_embedding, 1,600 vectors)" in store.optimize(ann_min_rows=1000)["clips"]
    query = next(r["text_embedding"] for r in rows if r["text_embedding"] is not None)
    found = store.nearest(store.clips, query, 50, columns=["video_id", "clip_index"])
    unembedded = {(r["video_id"], r["clip_index"]) for r in rows[::5]}
    assert len(found) == 50 and not unembedded & {(r["video_id"], r["clip_index"]) for r in found}

    # A little growth is added to the existing index; doubling the vectors retrains it.
    store.upsert(store.clips, _random_clips(n_videos=25, per_video=100, dim=64, seed=3)[2000:])
    assert "ivf_rq" not in store.optimize(ann_min_rows=1000)["clips"]
    store.upsert(store.clips, _random_clips(n_videos=40, per_video=100, dim=64, seed=4)[2500:])
    assert "ivf_rq(text_embedding, 3,600 vectors) rebuilt" in store.optimize(ann_min_rows=1000)["clips"]
    names = [ix.name for ix in store.table(store.clips).list_indices() if ix.columns == ["text_embedding"]]
    assert names == ["text_embedding_ivfrq_3600"]


def test_corpus_queries_probe_a_share_of_the_partitions_the_index_has(tmp_path) -> None:
    """Recall follows the share of the vectors read (issue 44): a query probes ANN_PROBE_SHARE of the
    partitions Lance's index holds after optimize (which splits partitions: not those asked for),
    at least ANN_MIN_PROBES; an index of an earlier version (IVF-PQ) is used and kept."""
    from vidscope.storage.store import ANN_MIN_PROBES, ANN_PROBE_SHARE, ann_probes

    assert ann_probes(5) == 5 and ann_probes(40) == ANN_MIN_PROBES
    assert ann_probes(549) == math.ceil(ANN_PROBE_SHARE * 549) > ANN_MIN_PROBES

    store = Store(tmp_path / "data", text_dim=64)
    rows = _random_clips(n_videos=40, per_video=100, dim=64)
    store.upsert(store.clips, rows)
    assert store.ann_partitions_of(store.clips) is None  # no index yet
    store.optimize(ann_min_rows=1000)
    dataset = store.existing_dataset(store.clips)
    name = next(ix.name for ix in store.table(store.clips).list_indices() if ix.columns == ["text_embedding"])
    built = max(index["num_partitions"] for index in dataset.stats.index_stats(name)["indices"])
    assert store.ann_partitions_of(store.clips) == built

    # An IVF-PQ index built by an earlier version answers and is not rebuilt before the corpus doubles.
    table = store.table(store.clips)
    table.drop_index(name)
    table.create_index(
        "text_embedding",
        config=lancedb_index().IvfPq(distance_type="cosine", num_partitions=4),
        name="text_embedding_ivfpq_4000",
    )
    assert store.ann_partitions_of(store.clips) == 4
    query = np.asarray(rows[7]["text_embedding"])
    found = store.nearest(store.clips, query, 5, columns=["video_id", "clip_index"])
    assert (found[0]["video_id"], found[0]["clip_index"]) == ("v000", 7)
    assert "ivf_rq" not in store.optimize(ann_min_rows=1000)["clips"]


def test_a_read_while_another_thread_creates_the_table_waits_for_it(tmp_path) -> None:
    """The table's folder appears before its first commit: a read in that moment (two ingestion
    stages of a new data dir) used to fail with "Dataset ... was not found"."""
    failures: list[str] = []
    for attempt in range(15):
        store = Store(tmp_path / str(attempt))
        stop = threading.Event()

        def read(store: Store = store, stop: threading.Event = stop) -> None:
            while not stop.is_set():
                try:
                    store.count(store.clips)
                except (ValueError, OSError) as exc:
                    failures.append(str(exc)[:200])
                    return

        reader = threading.Thread(target=read)
        reader.start()
        store.table(store.clips)
        stop.set()
        reader.join()
    assert failures == []


def test_a_store_keeps_its_index_caches_and_still_reads_what_another_store_wrote(tmp_path) -> None:
    """Every dataset a store opens shares one ``lance.Session`` (indexes read once per process),
    and a read still sees the newest version: rows, a new full-text index and rewritten text
    committed by another store (another process, as the API beside an ingestion) are seen at once,
    never a cached older index."""
    reader, writer = Store(tmp_path / "data"), Store(tmp_path / "data")
    writer.upsert(writer.clips, clip_rows("v1", 4, caption="harbour ferry "))
    writer.optimize()
    columns = ["video_id", "clip_index"]
    assert {r["video_id"] for r in reader.text_search(reader.clips, "ferry", 10, columns=columns)} == {"v1"}
    first, second = reader.dataset(reader.clips), reader.dataset(reader.clips)
    assert first.session().is_same_as(second.session())  # one cache for every read

    writer.upsert(writer.clips, clip_rows("v2", 3, caption="ferry pier "))
    writer.replace_video_rows(writer.clips, "v1", clip_rows("v1", 4, caption="garden "))
    writer.optimize()
    found = reader.text_search(reader.clips, "ferry", 10, columns=columns)
    assert sorted((r["video_id"], r["clip_index"]) for r in found) == [("v2", 0), ("v2", 1), ("v2", 2)]
    assert reader.count(reader.clips) == 7
