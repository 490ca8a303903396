"""The moment-search scale benchmark's own machinery (benchmarks/clip_ann.py): the synthetic corpus
streams into one Lance write, and the batched exact scan that recall@50 is measured against finds
what a brute force over all vectors at once and Lance's own exact scan find."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np

from vidscope.storage.store import Store

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "clip_ann.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("clip_ann_bench", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_batched_exact_scan_matches_brute_force_and_lances_exact_scan(tmp_path: Path) -> None:
    bench = _script()
    store = Store(tmp_path / "store", text_dim=bench.DIM)
    bench.generate(store, 3_000, seed=5)
    dataset = store.existing_dataset(store.clips)
    assert dataset.count_rows() == 3_000
    assert len(dataset.get_fragments()) == 1  # one streamed write, not one commit per batch
    assert dataset.count_rows("text_embedding IS NULL") == 300  # one clip in ten not embedded

    table = dataset.to_table(columns=["video_id", "clip_index", "text_embedding"])
    embedded = table.filter(table.column("text_embedding").is_valid())
    matrix = np.asarray(embedded.column("text_embedding").to_pylist(), dtype=np.float32)
    keys = list(
        zip(embedded.column("video_id").to_pylist(), embedded.column("clip_index").to_pylist(), strict=True)
    )
    rng = np.random.default_rng(3)
    noise = rng.normal(scale=0.03, size=(4, bench.DIM))
    queries = matrix[rng.choice(len(matrix), size=4, replace=False)] + noise

    # Batches of 256 rows: the running top 50 is merged across a dozen batches, nulls among them.
    found = bench.exact_top(store, queries, 50, batch_rows=256)

    unit = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    for query, got in zip(unit, found, strict=True):
        best = np.argsort(-(matrix @ query))[:50]
        assert got == {keys[i] for i in best}
        lance_exact = store.table(store.clips).search(query.tolist(), vector_column_name="text_embedding")
        rows = lance_exact.distance_type("cosine").bypass_vector_index().limit(50).to_list()
        assert got == {(r["video_id"], r["clip_index"]) for r in rows}


def test_disk_bytes_counts_every_file_below_a_folder(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "x.bin").write_bytes(b"1" * 10)
    (tmp_path / "a" / "b" / "y.bin").write_bytes(b"2" * 32)
    assert _script().disk_bytes(tmp_path) == 42
