"""Super-nodes of a video's entity graph (spectral clustering), for the ``graph`` stage.

Pure functions over graph rows as the store returns them (``graph_nodes`` / ``graph_edges`` rows as
dicts); nothing here calls a model. The query-time measures over the same graph (node importance)
are in :mod:`vidscope.agents.graph_importance`.

The affinity of two entities is ``S_ij = sim(n_i, n_j) · 1[path(n_i, n_j) ≤ 2 hops]``
over the *undirected* edges, ``sim`` the cosine of their name embeddings clipped at 0 (1 when either
has no embedding: without an embedder, structure alone decides), and ``S_ii = 1``. The number of
clusters ``k`` is the eigengap of the normalised Laplacian ``I − D^-½ S D^-½`` searched in
``[K_MIN, K_MAX] = [3, 8]``. Small graphs: only clusters of more than 3 entities become super-nodes,
so a graph of ``n`` entities can hold at most ``n // 4`` of them; the lower end of the search is
lowered to ``max(1, n // 4)`` when that is below 3 (``n < 12``) — otherwise two clearly separate
groups of 5 would be forced into 3 clusters and one of them lost — and the upper end is capped at
``n − 1`` (the gap after ``k`` needs eigenvalue ``k + 1``). A graph of fewer than 4 entities has no
super-nodes. Clusters are found by k-means on the row-normalised first ``k`` eigenvectors (Ng–Jordan–
Weiss) with a deterministic farthest-point start, so the same graph always gives the same result.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from vidscope.tasks.spans import merge_spans

#: Eigengap search range for the number of clusters (the issue's 3–8).
K_MIN = 3
K_MAX = 8
#: A cluster becomes a super-node only with at least this many entities ("more than 3").
MIN_SUPERNODE_SIZE = 4
#: Two entities are related for clustering when an undirected path of at most this many edges joins them.
MAX_HOPS = 2
_KMEANS_ITERATIONS = 100


# ============================================================================ helpers


def _unit(vector: Sequence[float] | np.ndarray | None) -> np.ndarray | None:
    if vector is None:
        return None
    array = np.asarray(vector, dtype=np.float64)
    norm = float(np.linalg.norm(array))
    return array / norm if norm > 0 else None


def cosine(a: Sequence[float] | np.ndarray | None, b: Sequence[float] | np.ndarray | None) -> float:
    """Cosine similarity of two vectors; 0 when either is missing or zero."""
    ua, ub = _unit(a), _unit(b)
    if ua is None or ub is None or ua.shape != ub.shape:
        return 0.0
    return float(np.dot(ua, ub))


def row_spans(row: dict[str, Any]) -> list[tuple[float, float]]:
    """A node row's ``spans`` column as (start, end) tuples."""
    return [(float(s["start"]), float(s["end"])) for s in row.get("spans") or []]


def undirected_pairs(node_ids: Sequence[str], edges: Iterable[dict[str, Any]]) -> set[tuple[int, int]]:
    """Index pairs (i < j) joined by at least one edge, self-loops and unknown nodes ignored."""
    index = {n: i for i, n in enumerate(node_ids)}
    pairs: set[tuple[int, int]] = set()
    for edge in edges:
        i, j = index.get(edge["source"]), index.get(edge["target"])
        if i is None or j is None or i == j:
            continue
        pairs.add((min(i, j), max(i, j)))
    return pairs


# ============================================================================ super-nodes


def within_hops(node_ids: Sequence[str], edges: Iterable[dict[str, Any]], hops: int = MAX_HOPS) -> np.ndarray:
    """Boolean matrix: an undirected path of at most ``hops`` edges joins node i and node j
    (the diagonal is true: a node is 0 hops from itself)."""
    n = len(node_ids)
    adjacency = np.zeros((n, n), dtype=np.int64)
    for i, j in undirected_pairs(node_ids, edges):
        adjacency[i, j] = adjacency[j, i] = 1
    reach = np.eye(n, dtype=bool)
    frontier = np.eye(n, dtype=np.int64)
    for _ in range(hops):
        frontier = (frontier @ adjacency > 0).astype(np.int64)
        reach |= frontier > 0
    return reach


def affinity_matrix(
    nodes: Sequence[dict[str, Any]], edges: Iterable[dict[str, Any]]
) -> tuple[list[str], np.ndarray]:
    """``(node_ids sorted, S)`` with ``S_ij = sim(n_i, n_j) · 1[path ≤ 2 hops]`` (see the module)."""
    ordered = sorted(nodes, key=lambda r: r["node_id"])
    ids = [r["node_id"] for r in ordered]
    n = len(ids)
    units = [_unit(r.get("name_embedding")) for r in ordered]
    sim = np.ones((n, n), dtype=np.float64)
    have = [i for i, u in enumerate(units) if u is not None]
    if have and len({units[i].shape for i in have}) == 1:  # type: ignore[union-attr]
        matrix = np.array([units[i] for i in have])
        sim[np.ix_(have, have)] = np.clip(matrix @ matrix.T, 0.0, None)
    affinity = sim * within_hops(ids, edges)
    np.fill_diagonal(affinity, 1.0)
    return ids, affinity


def laplacian_spectrum(affinity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (ascending) and eigenvectors of the normalised Laplacian ``I − D^-½ S D^-½``."""
    degree = affinity.sum(axis=1)
    inv_sqrt = np.where(degree > 0, 1.0 / np.sqrt(np.maximum(degree, 1e-300)), 0.0)
    laplacian = np.eye(len(affinity)) - inv_sqrt[:, None] * affinity * inv_sqrt[None, :]
    values, vectors = np.linalg.eigh((laplacian + laplacian.T) / 2)
    return np.clip(values, 0.0, None), vectors


def cluster_range(n: int) -> tuple[int, int]:
    """The eigengap search range ``(lo, hi)`` for ``n`` entities (the small-graph rule above)."""
    lo = max(1, min(K_MIN, n // MIN_SUPERNODE_SIZE))
    hi = max(lo, min(K_MAX, n - 1))
    return lo, hi


def eigengap_k(eigenvalues: Sequence[float] | np.ndarray, n: int | None = None) -> int:
    """The number of clusters: the ``k`` in :func:`cluster_range` with the largest gap
    ``λ_{k+1} − λ_k`` (eigenvalues ascending, 1-based); ties go to the smaller ``k``."""
    values = np.sort(np.asarray(eigenvalues, dtype=np.float64))
    size = len(values) if n is None else n
    if size <= 1:
        return max(size, 0)
    lo, hi = cluster_range(size)
    hi = min(hi, len(values) - 1)
    best_k, best_gap = lo, -math.inf
    for k in range(lo, hi + 1):
        gap = values[k] - values[k - 1]
        if gap > best_gap + 1e-12:
            best_k, best_gap = k, gap
    return best_k


def _kmeans(points: np.ndarray, k: int) -> np.ndarray:
    """Lloyd's k-means with a deterministic farthest-point start; returns a label per row."""
    n = len(points)
    if k >= n:
        return np.arange(n)
    centres = [points[0]]
    distance = np.linalg.norm(points - points[0], axis=1)
    for _ in range(1, k):
        chosen = int(np.argmax(distance))
        centres.append(points[chosen])
        distance = np.minimum(distance, np.linalg.norm(points - points[chosen], axis=1))
    centre_array = np.array(centres)
    labels = np.full(n, -1)
    for _ in range(_KMEANS_ITERATIONS):
        d = np.linalg.norm(points[:, None, :] - centre_array[None, :, :], axis=2)
        new = np.argmin(d, axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
        for c in range(k):
            members = points[labels == c]
            if len(members):
                centre_array[c] = members.mean(axis=0)
    return labels


def spectral_clusters(nodes: Sequence[dict[str, Any]], edges: Iterable[dict[str, Any]]) -> list[list[str]]:
    """The entities partitioned into clusters (node_ids, each cluster sorted; clusters by first id)."""
    ids, affinity = affinity_matrix(nodes, list(edges))
    n = len(ids)
    if n == 0:
        return []
    if n == 1:
        return [ids]
    values, vectors = laplacian_spectrum(affinity)
    k = eigengap_k(values, n)
    embedding = vectors[:, :k]
    norms = np.linalg.norm(embedding, axis=1, keepdims=True)
    embedding = embedding / np.where(norms > 0, norms, 1.0)
    labels = _kmeans(embedding, k)
    clusters: dict[int, list[str]] = {}
    for node_id, label in zip(ids, labels, strict=True):
        clusters.setdefault(int(label), []).append(node_id)
    return sorted((sorted(c) for c in clusters.values()), key=lambda c: c[0])


def supernodes(nodes: Sequence[dict[str, Any]], edges: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Super-nodes: ``{"members": [node_id…], "spans": [(start, end)…]}`` for each spectral cluster
    of at least :data:`MIN_SUPERNODE_SIZE` entities, ordered by their first span."""
    if len(nodes) < MIN_SUPERNODE_SIZE:
        return []
    by_id = {r["node_id"]: r for r in nodes}
    result: list[dict[str, Any]] = []
    for members in spectral_clusters(nodes, edges):
        if len(members) < MIN_SUPERNODE_SIZE:
            continue
        spans = merge_spans(s for m in members for s in row_spans(by_id[m]))
        result.append({"members": members, "spans": spans})
    result.sort(key=lambda s: (s["spans"][0][0] if s["spans"] else math.inf, s["members"][0]))
    return result
