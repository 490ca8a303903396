"""Measures over a video's entity graph: super-nodes (spectral clustering) and node importance.

Pure functions over graph rows as the store returns them (``graph_nodes`` / ``graph_edges`` rows as
dicts), plus :func:`load_graph` to get a video's graph as a networkx ``MultiDiGraph``. Nothing here
calls a model; the query embedding for :func:`node_importance` is computed by the caller.

Super-nodes. The affinity of two entities is ``S_ij = sim(n_i, n_j) · 1[path(n_i, n_j) ≤ 2 hops]``
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

Importance. ``w(n) = 0.4·freq + 0.3·centrality + 0.3·query_rel`` with
``freq = clip_count / total_clips · log(1 + appearance_seconds)``,
``centrality = 0.5·degree / max degree + 0.5·betweenness`` (distinct neighbours and normalised
betweenness on the undirected simple graph, self-loops ignored) and ``query_rel`` the cosine of the
node's name embedding and the query embedding (0 without a query or an embedding).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vidscope.tasks.spans import merge_spans

if TYPE_CHECKING:
    import networkx as nx

    from vidscope.storage import Store

#: Eigengap search range for the number of clusters (the issue's 3–8).
K_MIN = 3
K_MAX = 8
#: A cluster becomes a super-node only with at least this many entities ("more than 3").
MIN_SUPERNODE_SIZE = 4
#: Two entities are related for clustering when an undirected path of at most this many edges joins them.
MAX_HOPS = 2
#: Importance weights: frequency, centrality, query relevance.
W_FREQ, W_CENTRALITY, W_QUERY = 0.4, 0.3, 0.3
_KMEANS_ITERATIONS = 100


# ============================================================================ helpers


def _unit(vector: Sequence[float] | np.ndarray | None) -> np.ndarray | None:
    if vector is None:
        return None
    array = np.asarray(vector, dtype=np.float64)
    norm = float(np.linalg.norm(array))
    return array / norm if norm > 0 else None


def cosine(a: Sequence[float] | None, b: Sequence[float] | None) -> float:
    """Cosine similarity of two vectors; 0 when either is missing or zero."""
    ua, ub = _unit(a), _unit(b)
    if ua is None or ub is None or ua.shape != ub.shape:
        return 0.0
    return float(np.dot(ua, ub))


def row_spans(row: dict[str, Any]) -> list[tuple[float, float]]:
    """A node row's ``spans`` column as (start, end) tuples."""
    return [(float(s["start"]), float(s["end"])) for s in row.get("spans") or []]


def _undirected_pairs(node_ids: Sequence[str], edges: Iterable[dict[str, Any]]) -> set[tuple[int, int]]:
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
    for i, j in _undirected_pairs(node_ids, edges):
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


# ============================================================================ importance


def centrality(nodes: Sequence[dict[str, Any]], edges: Iterable[dict[str, Any]]) -> dict[str, float]:
    """``0.5 · degree / max degree + 0.5 · betweenness`` per node_id on the undirected simple graph."""
    import networkx as nx

    ids = [r["node_id"] for r in nodes]
    graph = nx.Graph()
    graph.add_nodes_from(ids)
    graph.add_edges_from((ids[i], ids[j]) for i, j in _undirected_pairs(ids, edges))
    degrees = dict(graph.degree())
    top = max(degrees.values(), default=0)
    betweenness = nx.betweenness_centrality(graph, normalized=True)
    return {n: 0.5 * (degrees[n] / top if top else 0.0) + 0.5 * float(betweenness.get(n, 0.0)) for n in ids}


def frequency(node: dict[str, Any], total_clips: int) -> float:
    """``clips mentioning n / all clips · log(1 + appearance seconds)``."""
    if total_clips <= 0:
        return 0.0
    share = float(node.get("clip_count") or 0) / total_clips
    return share * math.log1p(max(0.0, float(node.get("appearance_seconds") or 0.0)))


def node_importance(
    nodes: list[dict[str, Any]],
    edges: list[dict[str, Any]],
    total_clips: int,
    query_embedding: Sequence[float] | None = None,
) -> dict[str, float]:
    """Importance ``w(n) = 0.4·freq + 0.3·centrality + 0.3·query_rel`` of every node, by node_id.

    ``nodes`` are ``graph_nodes`` rows (``node_id``, ``clip_count``, ``appearance_seconds``,
    ``name_embedding``), ``edges`` ``graph_edges`` rows (``source``, ``target``), ``total_clips``
    the number of clips of the video. ``query_rel`` is the cosine of the node's name embedding and
    ``query_embedding`` (0 when either is missing). See the module docstring for each term.
    """
    central = centrality(nodes, edges)
    weights = {}
    for node in nodes:
        query_rel = (
            cosine(node.get("name_embedding"), query_embedding) if query_embedding is not None else 0.0
        )
        weights[node["node_id"]] = (
            W_FREQ * frequency(node, total_clips)
            + W_CENTRALITY * central[node["node_id"]]
            + W_QUERY * query_rel
        )
    return weights


# ============================================================================ loading


def load_graph(store: Store, video_id: str) -> nx.MultiDiGraph:
    """The stored graph of ``video_id`` as a networkx ``MultiDiGraph``.

    Nodes are keyed by ``node_id`` and carry their ``graph_nodes`` row as attributes (``name``,
    ``kind``, ``aliases``, ``attributes``, ``actions``, ``appearance``, ``spans``,
    ``appearance_seconds``, ``clip_count``, ``name_embedding``); edges are keyed by ``edge_id`` and
    carry ``relation``, ``t_start``, ``t_end`` and ``clip_index``. ``graph.graph`` holds
    ``video_id`` and ``supernodes`` (the ``graph_supernodes`` rows). Empty when the video has none.
    """
    import networkx as nx

    graph = nx.MultiDiGraph(video_id=video_id)
    for row in store.rows(store.graph_nodes, video_id=video_id).to_pylist():
        row.pop("video_id", None)
        graph.add_node(row["node_id"], **row)
    for row in store.rows(store.graph_edges, video_id=video_id).to_pylist():
        if row["source"] not in graph or row["target"] not in graph:
            continue
        graph.add_edge(
            row["source"],
            row["target"],
            key=row["edge_id"],
            relation=row["relation"],
            t_start=row["t_start"],
            t_end=row["t_end"],
            clip_index=row["clip_index"],
        )
    graph.graph["supernodes"] = [
        {k: v for k, v in row.items() if k != "video_id"}
        for row in store.rows(store.graph_supernodes, video_id=video_id).to_pylist()
    ]
    return graph
