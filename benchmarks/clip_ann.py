"""Corpus-wide clip ANN at scale: ``Store.nearest`` (IVF-PQ + refine) against an exact scan.

Writes ``--clips`` synthetic clip rows (384-d, MiniLM's size) into a real
:class:`~vidscope.storage.Store` under ``benchmarks/out/clip_ann`` (gitignored), builds the index the
way ingestion does (``Store.optimize``), then for ``--queries`` queries prints, side by side in one
run, the latency of the exact scan and of the ANN search and the ANN's recall@16 against the exact
top 16, for the default probe/refine settings and a sweep of others (what the defaults are chosen
from). Every query runs the exact scan right before the ANN search, so both see the same load.
Then it times moment search across the library (``agents/moments.py``: the ANN ranking fused with
Lance full-text search over the clips' speech and on-screen text, adjacent hits merged), warm, for
queries of three words taken from a stored clip's speech, without and with a video filter.

The vectors are **synthetic**: clustered (``clips / 400`` centres, each clip a centre plus noise, one
in ten clips without a vector, like clips not yet embedded) and queries are noisy copies of stored
vectors. Real caption embeddings cluster too, but recall here says nothing about embedding quality;
it measures what the index loses against an exact search of the same vectors. Clip texts are
synthetic too: 12 words per clip's speech (a Zipf-like draw from 20,000 made-up words), on-screen
text on one clip in five. The moment-search times exclude embedding the query (the query's vector is
given), which MiniLM adds once per query.

Run: ``.venv/bin/python benchmarks/search_scale.py --clips 1000000`` (or this file directly).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from vidscope.agents.moments import MomentFilters, search_moments
from vidscope.storage.store import ANN_REFINE_FACTOR, Store, ann_probes

DIM = 384
TOP_K = 16
#: Clips written per Lance commit while generating.
BATCH = 100_000
#: (nprobes, refine_factor) pairs measured beside the defaults.
SWEEP = ((16, 20), (32, 10), (32, 20), (32, 50), (64, 20), (64, 50))
#: Made-up words of the synthetic clip texts, and words per clip's speech.
VOCABULARY = 20_000
SPOKEN_WORDS = 12


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def generate(store: Store, clips: int, seed: int) -> np.ndarray:
    """Write ``clips`` rows (10 % without a vector); returns the centres the vectors came from.

    The rows stream to Lance in one write (batches of :data:`BATCH`, never the whole corpus in
    memory), so Lance cuts them into its own ~1M-row files: 100k-row commits left 100 small
    fragments at 10M that ``optimize`` then rewrote (every vector read and written again).
    """
    rng = np.random.default_rng(seed)
    centres = _unit(rng.normal(size=(max(1, clips // 400), DIM))).astype(np.float32)
    schema = store.clips.schema
    vector_type = schema.field("text_embedding").type

    def batches() -> Iterator[pa.RecordBatch]:
        written = 0
        while written < clips:
            n = min(BATCH, clips - written)
            owners = rng.integers(0, len(centres), size=n)
            vectors = _unit(centres[owners] + rng.normal(scale=0.06, size=(n, DIM)).astype(np.float32))
            index = np.arange(written, written + n)
            embedded = index % 10 != 0
            flat = pa.array(vectors.astype(np.float32).ravel())
            column = pa.FixedSizeListArray.from_arrays(flat, DIM, mask=pa.array(~embedded))
            clip_index = (index % 720).astype(np.int32)  # an hour of 5 s clips per video
            words = np.minimum(rng.zipf(1.3, size=(n, SPOKEN_WORDS)), VOCABULARY) - 1
            speech = [" ".join(f"w{w}" for w in row) for row in words]
            shown = [
                f"SIGN W{row[0]} W{row[1]}" if i % 5 == 0 else None
                for i, row in zip(index, words, strict=True)
            ]
            columns = {
                "video_id": pa.array([f"v{i // 720:07d}" for i in index]),
                "clip_index": pa.array(clip_index),
                "start": pa.array(clip_index * 5.0),
                "end": pa.array(clip_index * 5.0 + 5.0),
                "transcript_text": pa.array(speech),
                "ocr_text": pa.array(shown, pa.string()),
                "text_embedding": column.cast(vector_type),
                "embed_model": pa.array(["synthetic"] * n),
            }
            yield pa.RecordBatch.from_arrays(
                [columns.get(f.name, pa.nulls(n, type=f.type)).cast(f.type) for f in schema], schema=schema
            )
            written += n
            print(f"\r  {written:,} clips written", end="", flush=True)

    store.table(store.clips).add(pa.RecordBatchReader.from_batches(schema, batches()))
    print()
    return centres


def exact_top(
    store: Store, vectors: np.ndarray, k: int, batch_rows: int = 65_536
) -> list[set[tuple[str, int]]]:
    """The exact top ``k`` clips (cosine) of each query in ``vectors``, as (video_id, clip_index).

    Brute force over every stored vector in one pass of ``batch_rows`` rows at a time (the stored
    vectors are unit length, so cosine is a dot product): memory stays at one batch plus ``k``
    candidates per query whatever the corpus size, and every query shares the read.
    """
    queries = _unit(np.asarray(vectors, dtype=np.float32))
    best_scores = np.empty((len(queries), 0), dtype=np.float32)
    best_rows = np.empty((len(queries), 0), dtype=np.int64)  # row offsets in the dataset
    dataset = store.existing_dataset(store.clips)
    if dataset is None:
        return [set() for _ in queries]
    offset = 0
    # Little read-ahead: Lance's defaults buffered ~1.4 GB more at 1M clips (peak RSS 2.2 GB).
    batches = dataset.to_batches(
        columns=["text_embedding"], batch_size=batch_rows, batch_readahead=2, fragment_readahead=1
    )
    for batch in batches:
        column = batch.column("text_embedding")
        rows = np.flatnonzero(column.is_valid().to_numpy(zero_copy_only=False)) + offset
        offset += batch.num_rows
        if not len(rows):
            continue
        matrix = column.filter(column.is_valid()).flatten().to_numpy().reshape(len(rows), DIM)
        scores = np.concatenate([best_scores, queries @ matrix.T], axis=1)
        candidates = np.concatenate([best_rows, np.broadcast_to(rows, (len(queries), len(rows)))], axis=1)
        if scores.shape[1] > k:
            keep = np.argpartition(-scores, k - 1, axis=1)[:, :k]
            scores = np.take_along_axis(scores, keep, axis=1)
            candidates = np.take_along_axis(candidates, keep, axis=1)
        best_scores, best_rows = scores, candidates
    wanted = sorted({int(r) for r in best_rows.ravel()})
    keys: dict[int, tuple[str, int]] = {}
    if wanted:
        found = dataset.take(wanted, columns=["video_id", "clip_index"])
        ids = zip(found.column("video_id").to_pylist(), found.column("clip_index").to_pylist(), strict=True)
        keys = dict(zip(wanted, ids, strict=True))
    return [{keys[int(r)] for r in row} for row in best_rows]


def disk_bytes(path: Path) -> int:
    """Bytes of every file under ``path`` (what the store occupies on disk)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def exact(store: Store, vector: np.ndarray) -> tuple[float, list[tuple[str, int]]]:
    """Seconds and ids of the exact top ``TOP_K`` (the index bypassed: a flat scan)."""
    started = time.perf_counter()
    rows = (
        store.table(store.clips)
        .search(vector.tolist(), vector_column_name="text_embedding")
        .distance_type("cosine")
        .bypass_vector_index()
        .select(["video_id", "clip_index", "_distance"])
        .limit(TOP_K)
        .to_list()
    )
    return time.perf_counter() - started, [(r["video_id"], r["clip_index"]) for r in rows]


def ann(store: Store, vector: np.ndarray, nprobes: int, refine: int) -> tuple[float, list[tuple[str, int]]]:
    """Seconds and ids of ``Store.nearest`` across the corpus with these index settings."""
    started = time.perf_counter()
    rows = store.nearest(
        store.clips,
        vector.tolist(),
        TOP_K,
        columns=["video_id", "clip_index"],
        nprobes=nprobes,
        refine_factor=refine,
    )
    return time.perf_counter() - started, [(r["video_id"], r["clip_index"]) for r in rows]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clips", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "clip_ann")
    parser.add_argument("--reuse", action="store_true", help="Keep an existing store of this size.")
    args = parser.parse_args(argv)
    return run(args.clips, args.queries, args.seed, args.out, reuse=args.reuse)


def run(clips: int, queries: int, seed: int, out: Path, *, reuse: bool = False) -> int:
    """Generate (or reuse), index, and print exact vs ANN latency and recall@16."""
    print(f"clip ANN: {clips:,} synthetic clips, {DIM}-d clustered vectors, in {out}")
    store = Store(out, text_dim=DIM) if reuse and out.exists() else None
    if store is None or store.count(store.clips) != clips:
        shutil.rmtree(out, ignore_errors=True)
        store = Store(out, text_dim=DIM)
        started = time.perf_counter()
        generate(store, clips, seed)
        print(f"  written in {time.perf_counter() - started:.0f} s")
    started = time.perf_counter()
    done = store.optimize()
    print(f"  optimize: {done.get('clips', 'nothing')} in {time.perf_counter() - started:.0f} s")

    rng = np.random.default_rng(seed + 1)
    stored = store.table(store.clips).search().select(["text_embedding"]).limit(50_000).to_arrow()
    pool = [v for v in stored.column("text_embedding").to_pylist() if v is not None]
    picks = rng.choice(len(pool), size=queries, replace=False)
    vectors = _unit(np.asarray([pool[i] for i in picks]) + rng.normal(scale=0.03, size=(queries, DIM)))
    shipped = ann_probes(store.ann_partitions_of(store.clips) or 1)
    exact(store, vectors[0])  # warm the files and caches of both paths once
    ann(store, vectors[0], shipped, ANN_REFINE_FACTOR)

    print(f"\n{queries} queries, top {TOP_K}; exact = flat scan of every vector (index bypassed)")
    print(f"{'nprobes':>8}{'refine':>8}{'exact ms':>10}{'ANN ms':>9}{'exact/ANN':>11}{'recall@16':>11}")
    settings = [
        (shipped, ANN_REFINE_FACTOR),
        *(s for s in SWEEP if s != (shipped, ANN_REFINE_FACTOR)),
    ]
    for nprobes, refine in settings:
        exact_s, ann_s, recalls = [], [], []
        for vector in vectors:
            seconds, truth = exact(store, vector)
            exact_s.append(seconds)
            seconds, found = ann(store, vector, nprobes, refine)
            ann_s.append(seconds)
            recalls.append(len(set(truth) & set(found)) / len(truth))
        ratio = statistics.median(e / a for e, a in zip(exact_s, ann_s, strict=True))
        label = " (default)" if (nprobes, refine) == (shipped, ANN_REFINE_FACTOR) else ""
        print(
            f"{nprobes:>8}{refine:>8}{statistics.median(exact_s) * 1000:>10.1f}"
            f"{statistics.median(ann_s) * 1000:>9.1f}{ratio:>10.1f}x{statistics.mean(recalls):>11.3f}{label}"
        )
    print(
        "\nms = median per query; exact/ANN = median of the per-query ratios; recall = mean overlap of top 16"
    )
    moments(store, vectors, seed)
    return 0


class GivenVectors:
    """A text embedder that returns the vector given for each query text (the benchmark's queries)."""

    name = "given"
    dim = DIM

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts])


def moments(store: Store, vectors: np.ndarray, seed: int) -> None:
    """Print p50/p95 latency of warm moment searches (top 10), without and with a video filter."""
    rng = np.random.default_rng(seed + 2)
    sample = store.table(store.clips).search().select(["video_id", "transcript_text"]).limit(20_000).to_list()
    rows = [sample[i] for i in rng.choice(len(sample), size=len(vectors), replace=False)]
    texts = [" ".join(r["transcript_text"].split()[-3:]) + f" #{i}" for i, r in enumerate(rows)]
    embedder = GivenVectors(dict(zip(texts, vectors, strict=True)))
    print(f"\nmoment search, top 10 of {store.count(store.clips):,} clips (ANN + full text, fused, merged)")
    print(f"{'filter':>12}{'p50 ms':>9}{'p95 ms':>9}{'moments':>9}")
    for label in ("none", "one video"):
        times, found = [], []
        for i, (text, row) in enumerate(zip(texts, rows, strict=True)):
            filters = MomentFilters(videos=[row["video_id"]]) if label == "one video" else None
            if i < 3:  # warm files, indexes and caches on the first queries; every query is timed once
                search_moments(store, text, embedder=embedder, k=10, filters=filters)
            started = time.perf_counter()
            result = search_moments(store, text, embedder=embedder, k=10, filters=filters)
            times.append(time.perf_counter() - started)
            found.append(len(result.moments))
        p50, p95 = statistics.median(times) * 1000, sorted(times)[max(0, int(len(times) * 0.95) - 1)] * 1000
        print(f"{label:>12}{p50:>9.1f}{p95:>9.1f}{statistics.mean(found):>9.1f}")


if __name__ == "__main__":
    sys.exit(main())
