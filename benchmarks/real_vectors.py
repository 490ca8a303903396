"""Are the moment-search benchmark's synthetic vectors as hard for an IVF index as real ones?

``search_scale.py --clips N --moments`` measures recall@50 of the IVF-PQ ranking on vectors made by
``clip_ann.generate``: one centre per 400 clips, each vector its centre plus Gaussian noise of
norm ~1.18. Every clip of a centre is then a near-tie for a query near it, so its 50 exact
neighbours are a noise-decided pick among ~400, which the IVF partitions scatter (issue 44: 0.48 at
10M with 32 of 549 partitions probed). This script asks whether real text embeddings behave so.

Real vectors: the embedded MiniLM's embeddings of real video-moment sentences — ActivityNet
Captions val_1 (17,505 sentences describing moments, in their videos' order) and MLVU's questions as
the corpus, Charades-STA's and MSR-VTT's moment queries (texts not in the corpus) as the queries,
all from ``../shared/benchmarks`` (read, never copied). Synthetic vectors: ``clip_ann.generate``'s
distribution at the same size, and queries drawn the way ``search_scale.py`` draws them.

For each set, at the same size and with the same index shape, it prints:

* the neighbour profile: a query's cosine to its 1st, 10th, 50th, 200th and 1,000th nearest
  corpus vector (median over queries), i.e. whether the 50 best stand out or tie with hundreds;
* recall@50 of an IVF ranking against the exact one, for the share of the corpus the probes
  visit: k-means partitions (cosine) of about as many vectors as the shipped index's 549 at 10M
  hold per probe share, every vector in a probed partition scored exactly, so only the partitions'
  scatter of the neighbours is measured (PQ's error is beside it, see RESULTS).

    .venv/bin/python benchmarks/real_vectors.py [--partitions 549] [--kmeans-iterations 20]

The real vectors are cached in ``benchmarks/out/real_vectors/`` (gitignored): embedding them takes a
minute or two on two cores.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
SHARED = BENCH.parent.parent / "shared" / "benchmarks"
OUT = BENCH / "out" / "real_vectors"
#: The k-th nearest neighbours whose cosine the profile prints.
PROFILE_RANKS = (1, 10, 50, 200, 1000)
RECALL_DEPTH = 50
#: Shares of the partitions probed (32 of 549 is the shipped index at 10M: 5.8 %).
PROBE_SHARES = (0.03, 32 / 549, 0.12, 0.25)


def corpus_texts() -> list[str]:
    """ActivityNet Captions val_1 sentences (video by video, in time order) and MLVU's questions."""
    texts: list[str] = []
    captions = json.loads((SHARED / "activitynet_captions" / "val_1.json").read_text())
    for video in captions.values():
        texts += [s.strip() for s in video["sentences"] if s.strip()]
    for path in sorted((SHARED / "mlvu").glob("*.json")):
        texts += [item["question"].strip() for item in json.loads(path.read_text()) if item.get("question")]
    return list(dict.fromkeys(texts))


def query_texts(corpus: set[str]) -> list[str]:
    """Charades-STA test and MSR-VTT 1k-A moment queries that are not corpus texts."""
    queries = []
    for line in (SHARED / "charades_sta" / "charades_sta_test.txt").read_text().splitlines():
        if "##" in line:
            queries.append(line.split("##", 1)[1].strip())
    with (SHARED / "msrvtt" / "MSRVTT_JSFUSION_test.csv").open(newline="") as handle:
        queries += [row["sentence"].strip() for row in csv.DictReader(handle)]
    return [q for q in dict.fromkeys(queries) if q and q not in corpus]


def real_vectors() -> tuple[np.ndarray, np.ndarray]:
    """(corpus, queries) unit vectors from the embedded MiniLM, cached."""
    cached = OUT / "minilm.npz"
    if cached.exists():
        data = np.load(cached)
        return data["corpus"], data["queries"]
    from vidscope.core.settings import Settings
    from vidscope.models import registry

    embedder = registry.text_embedder(Settings())
    if embedder is None:
        raise SystemExit("no text embedder: the embedded MiniLM is missing")
    corpus = corpus_texts()
    queries = query_texts(set(corpus))
    started = time.perf_counter()
    vectors = []
    for texts in (corpus, queries):
        rows = [
            np.asarray(embedder.embed(texts[i : i + 256]), dtype=np.float32)
            for i in range(0, len(texts), 256)
        ]
        vectors.append(_unit(np.concatenate(rows)))
    print(
        f"embedded {len(corpus):,} corpus and {len(queries):,} query texts "
        f"in {time.perf_counter() - started:.0f} s"
    )
    OUT.mkdir(parents=True, exist_ok=True)
    np.savez(cached, corpus=vectors[0], queries=vectors[1])
    return vectors[0], vectors[1]


def synthetic_vectors(size: int, queries: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``clip_ann.generate``'s vectors at ``size``, and queries as ``search_scale.py`` draws them."""
    sys.path.insert(0, str(BENCH))
    from clip_ann import DIM

    rng = np.random.default_rng(seed)
    centres = _unit(rng.normal(size=(max(1, size // 400), DIM))).astype(np.float32)
    owners = rng.integers(0, len(centres), size=size)
    corpus = _unit(centres[owners] + rng.normal(scale=0.06, size=(size, DIM)).astype(np.float32))
    asked = rng.integers(0, len(centres), size=queries)
    query = _unit(centres[asked] + rng.normal(scale=0.06, size=(queries, DIM)).astype(np.float32))
    return corpus, query


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def profile(corpus: np.ndarray, queries: np.ndarray) -> dict[int, float]:
    """Median cosine of each query's k-th nearest corpus vector, for k in :data:`PROFILE_RANKS`."""
    scores = -np.sort(-(queries @ corpus.T), axis=1)
    return {k: float(np.median(scores[:, k - 1])) for k in PROFILE_RANKS if k <= corpus.shape[0]}


def kmeans(corpus: np.ndarray, partitions: int, iterations: int, seed: int) -> np.ndarray:
    """Spherical k-means centroids (cosine, as the shipped index's IVF is trained)."""
    rng = np.random.default_rng(seed)
    centroids = corpus[rng.choice(len(corpus), size=partitions, replace=False)].copy()
    for _ in range(iterations):
        owner = np.argmax(corpus @ centroids.T, axis=1)
        sums = np.zeros_like(centroids)
        np.add.at(sums, owner, corpus)
        counts = np.bincount(owner, minlength=partitions)
        empty = counts == 0
        sums[empty] = corpus[rng.choice(len(corpus), size=int(empty.sum()), replace=False)]
        centroids = _unit(sums)
    return centroids


def ivf_recall(corpus: np.ndarray, queries: np.ndarray, centroids: np.ndarray, probes: int) -> float:
    """recall@50 of scoring exactly only the vectors of each query's ``probes`` nearest partitions."""
    owner = np.argmax(corpus @ centroids.T, axis=1)
    scores = queries @ corpus.T
    exact = np.argsort(-scores, axis=1)[:, :RECALL_DEPTH]
    nearest = np.argsort(-(queries @ centroids.T), axis=1)[:, :probes]
    found = 0
    for i in range(len(queries)):
        visited = np.isin(owner, nearest[i])
        candidates = np.flatnonzero(visited)
        best = candidates[np.argsort(-scores[i, candidates])[:RECALL_DEPTH]]
        found += len(set(best.tolist()) & set(exact[i].tolist()))
    return found / (len(queries) * RECALL_DEPTH)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--partitions", type=int, default=549, help="IVF partitions (549: the shipped index at 10M)"
    )
    parser.add_argument("--kmeans-iterations", type=int, default=20)
    parser.add_argument(
        "--queries", type=int, default=500, help="queries per set (a sample of the real ones)"
    )
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    real_corpus, real_queries = real_vectors()
    rng = np.random.default_rng(args.seed)
    real_queries = real_queries[
        rng.choice(len(real_queries), size=min(args.queries, len(real_queries)), replace=False)
    ]
    synthetic = synthetic_vectors(len(real_corpus), len(real_queries), args.seed)
    sets = {
        "real (MiniLM, moment sentences)": (real_corpus, real_queries),
        "synthetic (clip_ann.generate)": synthetic,
    }
    print(f"{len(real_corpus):,} corpus vectors, {len(real_queries)} queries, {args.partitions} partitions")
    print(
        f"{'':34}"
        + "".join(f"{'cos@' + str(k):>9}" for k in PROFILE_RANKS)
        + "".join(f"{f'{s:.1%}':>9}" for s in PROBE_SHARES)
    )
    for name, (corpus, queries) in sets.items():
        centroids = kmeans(corpus, args.partitions, args.kmeans_iterations, args.seed)
        cosines = profile(corpus, queries)
        recalls = [
            ivf_recall(corpus, queries, centroids, max(1, round(share * args.partitions)))
            for share in PROBE_SHARES
        ]
        print(
            f"{name:34}"
            + "".join(f"{cosines.get(k, float('nan')):>9.3f}" for k in PROFILE_RANKS)
            + "".join(f"{r:>9.3f}" for r in recalls)
        )
    print(
        f"(cos@k: median cosine of the k-th nearest; then recall@{RECALL_DEPTH} "
        "with that share of the partitions probed)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
