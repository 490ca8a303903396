"""Corpus search at scale: the MAVIS library on a generated 100k-video corpus.

Generates a library of ``--videos`` videos (one parsed window each: a caption, its embedding and
scene/object/action tags) into real :class:`~vidscope.storage.Store` tables under
``benchmarks/out/search_scale`` (gitignored), then runs ``--queries`` generated queries through the
search pipeline (rule planner; no chat model, no image–text model) and reports:

* lookup latency of the library (plan + proposals + fusion) vs a full scan (exact cosine over every
  caption embedding, what the store does without the library) and their ratio;
* the candidate pool size and the videos reaching the fine stage vs brute force (every video);
* recall@1/5/10 of the returned ranking for each fusion mode, and of the full scan's ranking.

The vectors are **synthetic**: 384-d (MiniLM's size), random but clustered. Every concept belongs
to a family ("dog3", "dog7" are siblings); a concept's vector mixes its family's centroid and its own
direction (siblings have cosine 0.5, other concepts ~0). A caption's embedding is the normalised sum of
its concepts' vectors plus noise; the benchmark's text embedder embeds a text the same way from the
concept names in it. So a matching sub-intent scores φ ≈ 0.5–0.58 against a caption, a sibling
concept ≈ 0.29 and anything else ≈ 0, i.e. the scale of the MAVIS paper's thresholds (τ_soft 0.5,
τ_hard 0.3), which the benchmark uses (:data:`SPACE_THRESHOLDS`; the defaults, 0.3 / 0.15, are
calibrated for MiniLM, whose scores are lower). Nothing here measures embedding quality; it
measures the library's work at scale.

Run: ``.venv/bin/python benchmarks/search_scale.py [--videos 100000] [--queries 30] [--windows 1]``
(``--windows``: parsed windows per video; the full scan grows with windows, the library's look-up
with candidate videos). ``--clips 1000000`` instead measures corpus-wide clip ANN against an exact
scan (``benchmarks/clip_ann.py``); ``--clips 1000000 --moments [--reuse] [--queries 200]
[--recall-queries 50]`` measures moment search across the library at that size
(:func:`moment_scale`: build time, indexes, size on disk, p50/p95 latency and peak RSS of a fresh
query process, the ANN ranking's recall@50 against a batched exact scan). ``--calibrate
[--embedder SPEC]`` instead prints how a text embedder (the embedded MiniLM by default) scores
short sub-intents against matching and other captions and word pairs, and the thresholds that
follow as a ``[search.thresholds."SPEC"]`` block.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from vidscope.agents.mavis.search import FUSIONS, Library, search_library
from vidscope.core.settings import SearchSettings
from vidscope.evaluation.metrics import recall_at_k
from vidscope.storage.schema import sql_quote
from vidscope.storage.store import Store

DIM = 384


def _words(text: str) -> list[str]:
    return text.split()


#: (dimension, family names, concepts per family)
FAMILIES = {
    "scene": (
        _words(
            "beach kitchen park street forest office stadium lake city garden restaurant desert airport "
            "market church studio farm bridge harbor cave"
        ),
        10,
    ),
    "object": (
        _words(
            "dog cat car bicycle ball guitar phone laptop horse bird boat tree table chair cup bottle "
            "book umbrella hat drone camera bus train truck pizza cake child woman man baby robot "
            "kite skateboard surfboard knife piano violin flag lamp clock door window bag shoe "
            "sofa bed mirror balloon fire rope"
        ),
        10,
    ),
    "action": (
        _words(
            "running jumping swimming cooking dancing singing driving climbing throwing catching "
            "eating drinking reading writing sleeping fighting laughing crying riding painting"
        ),
        10,
    ),
}
SIBLING_COSINE = 0.5
NOISE = 0.3
#: Share of tags the (simulated) parser misses: not indexed, though the caption mentions them.
TAG_MISS = 0.1
#: Weight of a video's second object in its caption embedding (less salient than the first).
SECOND_OBJECT_WEIGHT = 0.5
BATCH = 20_000
#: Thresholds for this space's scale (a match ≈ 0.55, a sibling ≈ 0.27): the MAVIS paper's.
SPACE_THRESHOLDS = {"tau_soft": 0.5, "tau_hard": 0.3}


# ============================================================================ the synthetic space


class ConceptSpace:
    """Clustered random concept vectors and an embedder over texts made of concept names."""

    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.names: dict[str, list[str]] = {}
        vectors: dict[str, np.ndarray] = {}
        alpha, beta = SIBLING_COSINE**0.5, (1 - SIBLING_COSINE) ** 0.5
        for dimension, (families, size) in FAMILIES.items():
            self.names[dimension] = []
            for family in families:
                centroid = _unit(rng.standard_normal(DIM))
                for i in range(size):
                    name = f"{family}{i}"
                    vectors[name] = _unit(alpha * centroid + beta * _unit(rng.standard_normal(DIM)))
                    self.names[dimension].append(name)
        self.vectors = vectors

    def noise(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        return NOISE * _unit(np.random.default_rng(seed).standard_normal(DIM))

    def embed_concepts(
        self, concepts: Sequence[str], text: str, weights: Sequence[float] | None = None
    ) -> np.ndarray:
        weights = weights or [1.0] * len(concepts)
        total = sum((w * self.vectors[c] for c, w in zip(concepts, weights, strict=True)), np.zeros(DIM))
        return _unit(total + self.noise(text)).astype(np.float32)


class SyntheticEmbedder:
    """The benchmark's text embedder: the concept names in a text, summed, plus per-text noise."""

    name = "synthetic-clustered-384"
    dim = DIM

    def __init__(self, space: ConceptSpace) -> None:
        self.space = space

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = []
        for text in texts:
            concepts = [w for w in re.findall(r"[a-z]+[0-9]+", text.lower()) if w in self.space.vectors]
            rows.append(self.space.embed_concepts(concepts, text))
        return np.stack(rows) if rows else np.zeros((0, DIM), dtype=np.float32)


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


# ============================================================================ the corpus


def video_id(i: int) -> str:
    return hashlib.sha256(f"video-{i}".encode()).hexdigest()


def generate(
    store: Store, space: ConceptSpace, videos: int, seed: int, windows: int = 1
) -> dict[str, list[list[str]]]:
    """Write ``videos`` parsed videos of ``windows`` windows each into the store; returns each
    window's true tags per dimension (window ``w`` of video ``i`` at ``i * windows + w``: what its
    caption says; about :data:`TAG_MISS` of them are missing from the index)."""
    rng = np.random.default_rng(seed + 1)
    tags: dict[str, list[list[str]]] = {"scene": [], "object": [], "action": []}
    names = {d: np.array(space.names[d]) for d in FAMILIES}
    now = datetime.now(UTC)
    vocab = {d: set() for d in FAMILIES}
    for start in range(0, videos, BATCH):
        stop = min(videos, start + BATCH)
        ids = [video_id(i) for i in range(start, stop)]
        captions, vectors, parses, index, rows = [], [], [], [], []
        windowed = [(offset, vid, w) for offset, vid in enumerate(ids) for w in range(windows)]
        for offset, vid, window in windowed:
            scene = [str(rng.choice(names["scene"]))]
            objects = [
                str(o) for o in rng.choice(names["object"], size=1 + (rng.random() < 0.3), replace=False)
            ]
            action = [str(rng.choice(names["action"]))]
            # The parser misses a tag now and then; the caption still says it.
            indexed = {}
            for d, t in (("scene", scene), ("object", objects), ("action", action)):
                tags[d].append(t)
                indexed[d] = [c for c in t if rng.random() >= TAG_MISS]
                vocab[d].update(indexed[d])
                index.extend((d, concept, vid, window) for concept in indexed[d])
            caption = f"a {' and a '.join(objects)} {action[0]} in the {scene[0]}"
            captions.append(caption)
            # A second object is less salient in the caption than the first.
            weights = [1.0, 1.0, *([SECOND_OBJECT_WEIGHT] * (len(objects) - 1)), 1.0]
            vectors.append(space.embed_concepts([*scene, *objects, *action], caption, weights))
            parses.append((vid, caption, indexed["scene"], indexed["object"], indexed["action"], window))
            if window == 0:
                rows.append((vid, f"video_{start + offset:06d}.mp4"))
        matrix = np.stack(vectors)
        store.upsert(
            store.video_parses,
            pa.table(
                {
                    "video_id": [p[0] for p in parses],
                    "window_index": pa.array([p[5] for p in parses], pa.int32()),
                    "start": [60.0 * p[5] for p in parses],
                    "end": [60.0 * (p[5] + 1) for p in parses],
                    "caption": captions,
                    "scene": [p[2] for p in parses],
                    "objects": [p[3] for p in parses],
                    "actions": [p[4] for p in parses],
                    "parser": ["synthetic"] * len(parses),
                    "caption_embedding": pa.FixedSizeListArray.from_arrays(
                        pa.array(matrix.reshape(-1), pa.float32()), DIM
                    ),
                }
            ),
        )
        store.upsert(
            store.concept_index,
            pa.table(
                {
                    "dimension": [r[0] for r in index],
                    "concept": [r[1] for r in index],
                    "video_id": [r[2] for r in index],
                    "window_index": pa.array([r[3] for r in index], pa.int32()),
                    "surface": [r[1] for r in index],
                }
            ),
        )
        store.upsert(
            store.videos,
            pa.table(
                {
                    "video_id": [r[0] for r in rows],
                    "path": [f"/corpus/{r[1]}" for r in rows],
                    "file_name": [r[1] for r in rows],
                    "size_bytes": [1] * len(rows),
                    "duration": [60.0 * windows] * len(rows),
                    "fps": [25.0] * len(rows),
                    "width": pa.array([640] * len(rows), pa.int32()),
                    "height": pa.array([360] * len(rows), pa.int32()),
                    "rotation": pa.array([0] * len(rows), pa.int32()),
                    "has_audio": [False] * len(rows),
                    "added_at": pa.array([now] * len(rows), pa.timestamp("us", tz="UTC")),
                }
            ),
        )
        print(f"  generated {stop:,} / {videos:,} videos", flush=True)
    concepts = [(d, c) for d in FAMILIES for c in sorted(vocab[d])]
    store.upsert(
        store.concepts,
        [
            {
                "dimension": d,
                "concept": c,
                "aliases": [],
                "embedding": space.vectors[c].astype(np.float32).tolist(),
                "confirmed_by": "synthetic",
            }
            for d, c in concepts
        ],
    )
    return tags


# ============================================================================ the measurements


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--videos", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--windows", type=int, default=1, help="Parsed windows (captions) per video.")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "search_scale")
    parser.add_argument(
        "--calibrate", action="store_true", help="Only the threshold calibration of --embedder."
    )
    parser.add_argument(
        "--embedder", default="minilm:embedded", help="Text embedder spec to calibrate (--calibrate)."
    )
    parser.add_argument(
        "--clips",
        type=int,
        default=0,
        help="Instead: corpus clip ANN vs exact at this many clips (clip_ann.py).",
    )
    parser.add_argument(
        "--moments",
        action="store_true",
        help="With --clips: only moment search at that size (latency p50/p95 and where it goes).",
    )
    parser.add_argument("--reuse", action="store_true", help="With --clips: keep a store of that size.")
    parser.add_argument(
        "--recall-queries",
        type=int,
        default=50,
        help="With --clips --moments: queries whose ANN recall@50 is checked against an exact scan.",
    )
    parser.add_argument("--query-only", action="store_true", help=argparse.SUPPRESS)  # the child run
    args = parser.parse_args(argv)
    if args.calibrate:
        calibrate(args.embedder)
        return 0
    if args.clips and args.moments:
        return moment_scale(
            args.clips,
            args.queries,
            args.seed,
            args.out.parent / "clip_ann",
            args.reuse,
            recall_queries=args.recall_queries,
            query_only=args.query_only,
        )
    if args.clips:
        from clip_ann import run as clip_ann_run  # a sibling script (benchmarks/ is not a package)

        return clip_ann_run(
            args.clips, args.queries, args.seed, args.out.parent / "clip_ann", reuse=args.reuse
        )

    space = ConceptSpace(args.seed)
    embedder = SyntheticEmbedder(space)
    started = time.perf_counter()
    shutil.rmtree(args.out, ignore_errors=True)
    store = Store(args.out, text_dim=DIM)
    print(
        f"library: {args.videos:,} videos x {args.windows} window(s), 384-d synthetic clustered vectors, "
        f"in {args.out}"
    )
    tags = generate(store, space, args.videos, args.seed, args.windows)
    store.optimize()
    print(
        f"  ready in {time.perf_counter() - started:.1f} s "
        f"({store.count(store.concept_index):,} index rows, {store.count(store.concepts)} concepts)"
    )

    # Queries: a random window's scene, first object and action as a sentence; gold = the videos
    # with a window whose content (caption) has all three, whether or not the parser indexed them.
    rng = np.random.default_rng(args.seed + 2)
    ids = [video_id(i) for i in range(args.videos)]
    by_concept: dict[tuple[str, str], set[int]] = {}
    for d, per_window in tags.items():
        for i, concepts in enumerate(per_window):
            for c in concepts:
                by_concept.setdefault((d, c), set()).add(i)
    queries, gold = {}, {}
    for q, i in enumerate(rng.choice(args.videos * args.windows, size=args.queries, replace=False)):
        scene, obj, action = tags["scene"][i][0], tags["object"][i][0], tags["action"][i][0]
        queries[f"q{q}"] = f"a {obj} {action} in the {scene}"
        matching = by_concept[("scene", scene)] & by_concept[("object", obj)] & by_concept[("action", action)]
        gold[f"q{q}"] = {ids[j // args.windows] for j in matching}

    # Warm both paths once (Lance opens files and builds caches on first use).
    first = next(iter(queries.values()))
    search_library(store, first, embedder=embedder, options=SearchSettings(**SPACE_THRESHOLDS))
    store.nearest(store.video_parses, embedder.embed([first])[0], 10, columns=["video_id"])
    index_vs_tag_scan(store, queries)

    print(
        f"\n{len(queries)} queries, e.g. {first!r}; gold videos per query: "
        f"{statistics.mean(len(g) for g in gold.values()):.1f} on average"
    )
    scan_seconds, scan_rankings = [], {}
    for qid, text in queries.items():
        seconds, scan_rankings[qid] = full_scan(store, embedder, text, args.windows)
        scan_seconds.append(seconds)
    scan = statistics.median(scan_seconds)
    header = (
        f"{'fusion':<16}{'lookup ms':>10}{'scan ms':>9}{'scan/lookup':>12}{'pool':>8}{'fine':>8}"
        f"{'fine %':>9}{'R@1':>6}{'R@5':>6}{'R@10':>6}"
    )
    print(
        f"full scan (exact cosine over {args.videos * args.windows:,} caption embeddings): median "
        f"{scan * 1000:.1f} ms, p95 {_p95(scan_seconds) * 1000:.1f} ms; brute-force fine stage: "
        f"{args.videos:,} videos per query"
    )
    recall = recall_at_k(scan_rankings, gold)
    print(
        f"full-scan ranking recall: R@1 {recall['R@1']:.2f}  R@5 {recall['R@5']:.2f}  "
        f"R@10 {recall['R@10']:.2f}\n"
    )
    print(header)
    configs = [(f, SearchSettings(fusion=f, **SPACE_THRESHOLDS)) for f in FUSIONS]
    configs += [
        # The concept floor off: all 5 nearest concepts per intent (the behaviour before the floor).
        ("veto, 5 c/i", SearchSettings(concept_min_similarity=0.0, **SPACE_THRESHOLDS)),
        # The defaults, calibrated for MiniLM, on this space (a sibling, 0.27, passes τ_hard 0.15).
        ("veto, τ 0.3/.15", SearchSettings()),
    ]
    veto_stages: dict[str, float] = {}
    for label, options in configs:
        lookups, scans, pools, fines, rankings, stages = [], [], [], [], {}, []
        for qid, text in queries.items():
            # The scan runs right before the look-up, so both see the same load on the machine.
            scans.append(full_scan(store, embedder, text, args.windows)[0])
            result = search_library(store, text, embedder=embedder, options=options)
            lookups.append(result.stages["plan"] + result.stages["propose"] + result.stages["fuse"])
            stages.append(result.stages)
            pools.append(result.pool_size)
            fines.append(result.fine_comparisons)
            rankings[qid] = [h.video_id for h in result.hits]
        lookup = statistics.median(lookups)
        ratio = statistics.median(s / x for s, x in zip(scans, lookups, strict=True))
        r = recall_at_k(rankings, gold)
        fine_share = 100 * statistics.mean(fines) / args.videos
        print(
            f"{label:<16}{lookup * 1000:>10.1f}{statistics.median(scans) * 1000:>9.1f}{ratio:>12.2f}"
            f"{statistics.mean(pools):>8.0f}"
            f"{statistics.mean(fines):>8.1f}{fine_share:>8.3f}%{r['R@1']:>6.2f}{r['R@5']:>6.2f}"
            f"{r['R@10']:>6.2f}"
        )
        if label == "veto":
            veto_stages = {k: statistics.median(s[k] for s in stages) * 1000 for k in stages[0]}
    print(
        "\nlookup = plan + proposals + fusion (median); scan = the full scan run just before each look-up "
        "(median); scan/lookup = median of the per-query ratios; pool and fine = mean videos per query; "
        "fine % = share of the corpus reaching the fine stage (goal < 1%); rows use τ_soft 0.5 / "
        "τ_hard 0.3 (this space's scale) and the default concept floor 0.6 (here: 1 concept per intent) "
        "unless named; "
        "'5 c/i' = no floor, 5 concepts per intent."
    )
    print("veto, median per stage: " + ", ".join(f"{k} {v:.1f} ms" for k, v in veto_stages.items()))
    print(f"total {time.perf_counter() - started:.1f} s")
    return 0


#: Realistic captions and, per sub-intent, the captions that match it (the calibration set).
CAPTIONS = {
    "dog_beach": "a dog running on the beach",
    "puppy": "a puppy sprints along the shore at sunset",
    "sunbathers": "people sunbathing on a sandy beach",
    "dog_sofa": "a dog sleeping on a sofa in the living room",
    "cook": "a man cooking pasta in a kitchen",
    "kids": "children playing football in a park",
    "car": "a red car driving down a city street at night",
    "reader": "a woman reading a book in a cafe",
    "horse": "a horse galloping across a field",
    "surfer": "a surfer riding a wave in the ocean",
    "guitar": "a man playing guitar on a stage",
    "cat": "a cat jumping onto a kitchen table",
}
INTENTS = {
    "dog": "dog_beach puppy dog_sofa", "dogs": "dog_beach puppy dog_sofa",
    "beach": "dog_beach puppy sunbathers", "running": "dog_beach puppy", "kitchen": "cook cat",
    "cooking": "cook", "man": "cook guitar", "pasta": "cook", "car": "car", "driving": "car",
    "city street": "car", "street": "car", "woman": "reader", "reading": "reader", "book": "reader",
    "cafe": "reader", "horse": "horse", "field": "horse", "park": "kids", "children": "kids",
    "playing football": "kids", "surfing": "surfer", "ocean": "surfer", "guitar": "guitar",
    "cat": "cat", "jumping": "cat", "sofa": "dog_sofa", "sleeping": "dog_sofa",
    "living room": "dog_sofa", "red car": "car", "a dog running": "dog_beach puppy",
    "on the beach": "dog_beach puppy sunbathers",
}  # fmt: skip
#: Word pairs (for ``concept_min_similarity``): synonyms, which one concept should gather; related
#: things, left to the veto; distinct things, which the floor should keep out.
SYNONYMS = "dog/puppy sofa/couch car/vehicle running/jogging beach/shore running/sprinting"
RELATED = "dog/cat car/truck beach/ocean"
DISTINCT = "kitchen/restaurant running/walking car/bicycle beach/kitchen man/woman running/cooking"
PAIRS = f"{SYNONYMS} {RELATED} {DISTINCT}"
#: Share of matching (sub-intent, caption) pairs τ_soft should propose, and τ_hard should keep.
PROPOSE_SHARE, KEEP_SHARE = 0.8, 0.95


def calibrate(spec: str) -> None:
    """φ of short sub-intents against matching and other captions with the text embedder ``spec``,
    and the thresholds that follow, as a ``[search.thresholds]`` block for ``vidscope.toml``.

    τ_soft is the highest threshold (0.01 steps) that still proposes :data:`PROPOSE_SHARE` of the
    matching pairs, τ_hard the highest that keeps :data:`KEEP_SHARE` of them (vetoes at most 1 in
    20 true matches), the concept floor halfway between the best distinct pair and the worst
    synonym pair. For the embedded MiniLM this rule prints 0.28 / 0.18 / 0.65; the shipped MiniLM
    entry keeps the hand-set 0.3 / 0.15 / 0.6 (same table, read before the rule existed), which the
    search tests are written against.
    """
    from vidscope.core.settings import ModelSettings, Settings
    from vidscope.models import registry

    embedder = registry.text_embedder(Settings(models=ModelSettings(chat=None, text_embedder=spec)))
    if embedder is None:
        raise SystemExit(f"no text embedder for {spec!r}")
    names = list(CAPTIONS)
    captions = np.stack([_unit(v) for v in np.asarray(embedder.embed([CAPTIONS[n] for n in names]))])
    intents = np.stack([_unit(v) for v in np.asarray(embedder.embed(list(INTENTS)))])
    scores = intents @ captions.T
    matching, other = [], []
    for i, good in enumerate(INTENTS.values()):
        for j, name in enumerate(names):
            (matching if name in good.split() else other).append(float(scores[i, j]))
    pos, neg = np.array(matching), np.array(other)
    print(f"{spec} ({embedder.name}, {embedder.dim}-d): {len(INTENTS)} sub-intents x {len(names)} captions")
    print(
        f"matching pairs ({len(pos)}): min {pos.min():.2f}, median {np.median(pos):.2f}, "
        f"max {pos.max():.2f}; "
        f"other pairs ({len(neg)}): median {np.median(neg):.2f}, max {neg.max():.2f}"
    )
    print(f"{'threshold':>10}{'matching >=':>13}{'other >=':>10}")
    for tau in (0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5):
        print(f"{tau:>10.2f}{np.mean(pos >= tau):>13.2f}{np.mean(neg >= tau):>10.3f}")
    words = sorted({w for pair in PAIRS.split() for w in pair.split("/")})
    vectors = {w: _unit(v) for w, v in zip(words, np.asarray(embedder.embed(words)), strict=True)}

    def sims(pairs: str) -> list[float]:
        return [float(vectors[a] @ vectors[b]) for a, b in (p.split("/") for p in pairs.split())]

    for label, pairs in (("synonyms", SYNONYMS), ("related", RELATED), ("distinct", DISTINCT)):
        shown = ", ".join(f"{p} {v:.2f}" for p, v in zip(pairs.split(), sims(pairs), strict=True))
        print(f"{label} word pairs: {shown}")
    grid = np.round(np.arange(-0.2, 1.0, 0.01), 2)
    tau_soft = max(t for t in grid if np.mean(pos >= t) >= PROPOSE_SHARE)
    tau_hard = max(t for t in grid if np.mean(pos >= t) >= KEEP_SHARE)
    floor = round((max(sims(DISTINCT)) + min(sims(SYNONYMS))) / 2, 2)
    print(
        f"τ_soft {tau_soft:.2f}: proposes {np.mean(pos >= tau_soft):.0%} of matching, "
        f"{np.mean(neg >= tau_soft):.1%} of other pairs; τ_hard {tau_hard:.2f}: vetoes "
        f"{np.mean(neg < tau_hard):.0%} of other, {np.mean(pos < tau_hard):.0%} of matching pairs"
    )
    print("\nfor vidscope.toml:")
    print(f'[search.thresholds."{spec}"]')
    print(f"tau_soft = {tau_soft:.2f}\ntau_hard = {tau_hard:.2f}\nconcept_min_similarity = {floor:.2f}")


def full_scan(store: Store, embedder: SyntheticEmbedder, text: str, windows: int) -> tuple[float, list[str]]:
    """Seconds of an exact cosine scan over every caption embedding, and its 10 best videos."""
    t0 = time.perf_counter()
    # The nearest windows, enough of them for 10 distinct videos.
    rows = store.nearest(store.video_parses, embedder.embed([text])[0], 10 * windows, columns=["video_id"])
    return time.perf_counter() - t0, list(dict.fromkeys(r["video_id"] for r in rows))[:10]


def index_vs_tag_scan(store: Store, queries: dict[str, str]) -> None:
    """Candidate lookup for each query's concepts: the inverted index vs scanning every video's tags."""
    library = Library(store)
    index_s, scan_s, sizes = [], [], []
    for text in queries.values():
        obj, action, scene = re.findall(r"[a-z]+[0-9]+", text)
        wanted = {"scene": [scene], "object": [obj], "action": [action]}
        t0 = time.perf_counter()
        via_index = library.videos_for(wanted)
        index_s.append(time.perf_counter() - t0)
        where = " OR ".join(
            f"array_has({column}, {sql_quote(concept)})"
            for column, concept in (("scene", scene), ("objects", obj), ("actions", action))
        )
        t0 = time.perf_counter()
        via_scan = store.rows(store.video_parses, where=where, columns=["video_id"], order_by=())
        scan_s.append(time.perf_counter() - t0)
        found = set().union(*(v.keys() for v in via_index.values()))
        if found != set(via_scan.column("video_id").to_pylist()):
            raise AssertionError("the index and the tag scan disagree")
        sizes.append(len(found))
    index, scan = statistics.median(index_s), statistics.median(scan_s)
    print(
        f"candidate lookup of a query's 3 concepts ({statistics.mean(sizes):.0f} videos): inverted index "
        f"{index * 1000:.1f} ms vs full scan of every video's tags {scan * 1000:.1f} ms "
        f"(scan/index {scan / index:.1f}x)"
    )


def moment_scale(
    clips: int,
    queries: int,
    seed: int,
    out: Path,
    reuse: bool,
    *,
    recall_queries: int = 50,
    query_only: bool = False,
) -> int:
    """Moment search (``agents/moments.py``) over ``clips`` synthetic clips in a real store.

    The store is :func:`clip_ann.generate`'s (clustered 384-d vectors, 12 made-up words of speech
    per clip, on-screen text on one in five), indexed by ``Store.optimize`` as ingestion does
    (IVF-RQ on the vectors, FTS on caption, speech and on-screen text, BTree on ``video_id``). The
    build prints its time (write, then indexes), the indexes and their parameters, the store's
    size on disk and the build's peak RSS. The queries then run in a fresh process (this script
    again, ``--query-only``), as a search would after ingestion, so its peak RSS is the query
    side's alone: see :func:`moment_queries`.
    """
    if query_only:
        return moment_queries(clips, queries, seed, out, recall_queries)
    from clip_ann import DIM as CLIP_DIM
    from clip_ann import disk_bytes
    from clip_ann import generate as generate_clips

    from vidscope.storage.store import ann_partitions, ann_probes

    print(f"moment search: {clips:,} synthetic clips in {out}")
    store = Store(out, text_dim=CLIP_DIM) if reuse and out.exists() else None
    written = 0.0
    if store is None or store.count(store.clips) != clips:
        shutil.rmtree(out, ignore_errors=True)
        store = Store(out, text_dim=CLIP_DIM)
        started = time.perf_counter()
        generate_clips(store, clips, seed)
        written = time.perf_counter() - started
        print(f"  written in {written:.0f} s")
    started = time.perf_counter()
    done = store.optimize()
    indexed = time.perf_counter() - started
    print(f"  optimize: {done.get('clips', 'nothing')} in {indexed:.0f} s")
    usage = resource.getrusage(resource.RUSAGE_SELF)  # CPU seconds: wall time here depends on the load
    print(
        f"  build (write + indexes): {written + indexed:.0f} s wall, "
        f"{usage.ru_utime + usage.ru_stime:.0f} s CPU, peak RSS {_peak_rss_mb():,.0f} MB"
    )
    table = store.table(store.clips)
    for ix in sorted(table.list_indices(), key=lambda ix: ix.name):
        print(f"  index {ix.name}: {ix.index_type} on {', '.join(ix.columns)}")
    vectors = table.count_rows("text_embedding IS NOT NULL")
    print(
        f"  vector index asked for: IVF-RQ, cosine, {ann_partitions(vectors):,} partitions (for "
        f"{vectors:,} vectors); queried with {ann_probes(store.ann_partitions_of(store.clips) or 1)} "
        "probes, refine factor "
        f"{_moments().ANN_REFINE_FACTOR}"
    )
    print(f"  vector index as built: {_ivf_shape(store)}")
    print(
        f"  on disk: clips table {disk_bytes(store.lance_dir / 'clips.lance') / 1e9:.2f} GB, "
        f"store {disk_bytes(out) / 1e9:.2f} GB"
    )
    del store, table
    child = [sys.executable, str(Path(__file__).resolve()), "--clips", str(clips), "--moments"]
    child += ["--query-only", "--queries", str(queries), "--seed", str(seed)]
    child += ["--recall-queries", str(recall_queries), "--out", str(out.parent / "search_scale")]
    return subprocess.run(child, check=False).returncode


def _ivf_shape(store: Store) -> str:
    """The clip vector index as Lance reports it after ``optimize``: partitions, their sizes, codes.

    ``table.optimize()`` (run by ``Store.optimize`` after the index is built) rebalances IVF
    partitions in Lance 14, so the partitions asked for are not those that stay.
    """
    os.environ.setdefault("LANCE_INCLUDE_VECTOR_CENTROIDS", "false")  # sizes only, not centroids
    dataset = store.existing_dataset(store.clips)
    names = [ix.name for ix in store.table(store.clips).list_indices() if ix.columns == ["text_embedding"]]
    if dataset is None or not names:
        return "none"
    shapes = []
    for index in dataset.stats.index_stats(names[0])["indices"]:
        sizes = [p["size"] for p in index["partitions"]]
        sub = index.get("sub_index", {})
        codes = (
            f"{sub.get('num_sub_vectors')} sub-vectors of {sub.get('nbits')} bits"
            if "num_sub_vectors" in sub
            else f"{sub.get('index_type')} codes of {sub.get('code_dim')} x {sub.get('num_bits')} bit"
        )
        shapes.append(
            f"{index['index_type']}, {index['num_partitions']:,} partitions of {min(sizes):,}-"
            f"{max(sizes):,} vectors, {codes}"
        )
    return "; ".join(shapes)


def _moments() -> Any:
    from vidscope.agents import moments

    return moments


def _peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MB (Linux reports KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def moment_queries(clips: int, queries: int, seed: int, out: Path, recall_queries: int) -> int:
    """The query side of :func:`moment_scale`, in a process of its own.

    Each query is three words of a stored clip's speech with a noisy copy of a stored vector (the
    query embedding is given, so MiniLM's ~5-10 ms per query is not included). Per query,
    interleaved: the real ``search_moments`` (the product's path: ANN and FTS rankings concurrent,
    fused, merged) and the same with the rankings one after the other, then each part alone (ANN,
    FTS, fusion + merge, file names), so every number comes from the same load. Without and with a
    one-video filter. Prints p50/p95 and ratios, the process's peak RSS after them, then the ANN
    ranking's recall@50 against an exact scan (:func:`ann_depth_recall`).
    """
    from clip_ann import DIM as CLIP_DIM
    from clip_ann import GivenVectors

    moment_search = _moments()
    store = Store(out, text_dim=CLIP_DIM)
    if store.count(store.clips) != clips:
        print(f"no store of {clips:,} clips in {out}: run without --query-only first", file=sys.stderr)
        return 2
    rng = np.random.default_rng(seed + 2)
    pool = max(20_000, queries, recall_queries)
    sample = (
        store.table(store.clips)
        .search()
        .where("text_embedding IS NOT NULL")
        .select(["video_id", "transcript_text", "text_embedding"])
        .limit(pool)
        .to_list()
    )
    count = max(queries, recall_queries)
    rows = [sample[i] for i in rng.choice(len(sample), size=count, replace=False)]
    noisy = [_unit(np.asarray(r["text_embedding"]) + rng.normal(scale=0.03, size=CLIP_DIM)) for r in rows]
    texts = [" ".join(r["transcript_text"].split()[-3:]) for r in rows]
    columns = moment_search._CLIP_COLUMNS  # what the real search selects
    parts = ("concurrent", "sequential", "ANN", "FTS", "fuse+merge", "file names")
    print(
        f"\n{queries} queries (fresh process), top 10 moments "
        f"(ANN depth {moment_search.MIN_DEPTH} + FTS, fused, merged); concurrent = search_moments as shipped"
    )
    print(f"{'filter':>10}" + "".join(f"{p + ' p50':>17}" for p in parts[:2]) + f"{'p95':>8}{'p95':>8}")
    breakdown: dict[str, dict[str, list[float]]] = {}
    for label in ("none", "one video"):
        times: dict[str, list[float]] = {p: [] for p in parts}
        found = []
        for i, (text, row, vector) in enumerate(
            zip(texts[:queries], rows[:queries], noisy[:queries], strict=True)
        ):
            embedder = GivenVectors({text: vector})
            filters = moment_search.MomentFilters(videos=[row["video_id"]]) if label == "one video" else None
            where = moment_search._where(store, filters) if filters else None
            if i < 3:  # warm files, indexes and caches; every query below is timed once per way
                moment_search.search_moments(store, text, embedder=embedder, k=10, filters=filters)
            for way in ("concurrent", "sequential"):
                moment_search.PARALLEL_RANKINGS = way == "concurrent"
                t0 = time.perf_counter()
                result = moment_search.search_moments(store, text, embedder=embedder, k=10, filters=filters)
                times[way].append(time.perf_counter() - t0)
            moment_search.PARALLEL_RANKINGS = True
            found.append(len(result.moments))
            t0 = time.perf_counter()
            by_meaning = store.nearest(
                store.clips,
                vector,
                moment_search.MIN_DEPTH,
                where=where,
                columns=columns,
                refine_factor=moment_search.ANN_REFINE_FACTOR,
            )
            times["ANN"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            by_words = store.text_search(
                store.clips, text, moment_search.MIN_DEPTH, where=where, columns=columns
            )
            times["FTS"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            merged = moment_search._merge(*moment_search._fuse(by_meaning, by_words))
            times["fuse+merge"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            moment_search._file_names(store, sorted({m["video_id"] for _, m in merged[:10]}))
            times["file names"].append(time.perf_counter() - t0)
        breakdown[label] = times
        ratio = statistics.median(
            s / c for s, c in zip(times["sequential"], times["concurrent"], strict=True)
        )
        print(
            f"{label:>10}{statistics.median(times['concurrent']) * 1000:>17.1f}"
            f"{statistics.median(times['sequential']) * 1000:>17.1f}"
            f"{_p95(times['concurrent']) * 1000:>8.1f}{_p95(times['sequential']) * 1000:>8.1f}"
            f"   sequential/concurrent {ratio:.2f}x, {statistics.mean(found):.1f} moments"
        )
    print("\nwhere the time goes (each part alone, ms p50 / p95):")
    print(f"{'filter':>10}" + "".join(f"{p:>16}" for p in parts[2:]))
    for label, times in breakdown.items():
        cells = "".join(
            f"{statistics.median(times[p]) * 1000:>8.1f} /{_p95(times[p]) * 1000:>6.1f}" for p in parts[2:]
        )
        print(f"{label:>10}{cells}")
    print(f"\npeak RSS of the query process after the searches: {_peak_rss_mb():,.0f} MB")
    ann_depth_recall(store, noisy[:recall_queries], moment_search.MIN_DEPTH, columns)
    print(f"peak RSS of the query process with the exact scan: {_peak_rss_mb():,.0f} MB")
    return 0


def ann_depth_recall(store: Store, vectors: Sequence[np.ndarray], depth: int, columns: Sequence[str]) -> None:
    """Latency and recall@``depth`` of the corpus ANN ranking per refine factor, against an exact
    scan of the same vectors (how ``moments.ANN_REFINE_FACTOR`` was chosen).

    The exact answer is :func:`clip_ann.exact_top`: brute force over every stored vector in
    batches, all queries sharing one read, so memory stays bounded at any corpus size. The refine
    factors take turns per query, in rotating order, so none always runs first.
    """
    from clip_ann import exact_top

    started = time.perf_counter()
    truths = exact_top(store, np.stack(vectors), depth)
    exact_s = time.perf_counter() - started
    shipped = _moments().ANN_REFINE_FACTOR
    print(
        f"\nANN ranking {depth} deep, {len(vectors)} queries, against an exact scan of every vector "
        f"({exact_s:.0f} s for all, batched): refine factor, ms p50 / p95, recall@{depth}"
    )
    _sweep(store, vectors, truths, depth, columns, "refine_factor", (5, 10, 20, shipped), shipped, {})
    # The partitions probed, at the shipped refine factor: whether the candidates or their
    # ranking limit recall; the shipped count is a share of the partitions (store.ann_probes).
    from vidscope.storage.store import ANN_MIN_PROBES, ann_probes

    partitions = store.ann_partitions_of(store.clips) or 1
    print(
        f"\nthe same, refine factor {shipped}: partitions probed (of {partitions:,}), "
        f"ms p50 / p95, recall@{depth}"
    )
    probes = (ANN_MIN_PROBES, *(max(1, round(partitions * share)) for share in (0.125, 0.25, 0.5, 1.0)))
    refine = {"refine_factor": shipped}
    _sweep(store, vectors, truths, depth, columns, "nprobes", probes, ann_probes(partitions), refine)


def _sweep(
    store: Store,
    vectors: Sequence[np.ndarray],
    truths: Sequence[set[tuple[str, int]]],
    depth: int,
    columns: Sequence[str],
    name: str,
    values: Sequence[int],
    shipped: int,
    fixed: dict[str, Any],
) -> None:
    """One row per value of the ``store.nearest`` keyword ``name`` (the others ``fixed``): ms p50
    / p95 and recall against ``truths``. The values take turns per query, in rotating order, so
    none always runs first."""
    ordered = tuple(sorted(set(values)))
    times: dict[int, list[float]] = {v: [] for v in ordered}
    recalls: dict[int, list[float]] = {v: [] for v in ordered}
    for i, (vector, truth) in enumerate(zip(vectors, truths, strict=True)):
        turn = i % len(ordered)
        for value in ordered[turn:] + ordered[:turn]:
            t0 = time.perf_counter()
            found = store.nearest(store.clips, vector, depth, columns=columns, **fixed, **{name: value})
            times[value].append(time.perf_counter() - t0)
            recalls[value].append(len(truth & {(r["video_id"], r["clip_index"]) for r in found}) / len(truth))
    for value in ordered:
        p50, p95 = statistics.median(times[value]) * 1000, _p95(times[value]) * 1000
        label = "  (moment search)" if value == shipped else ""
        print(f"{value:>10}{p50:>9.1f}{p95:>9.1f}{statistics.mean(recalls[value]):>8.3f}{label}")


def _p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


if __name__ == "__main__":
    sys.exit(main())
