"""Importance of the entities of a video's graph, at query time, and the graph as networkx.

Pure functions over graph rows as the store returns them (``graph_nodes`` / ``graph_edges`` rows as
dicts), plus :func:`load_graph` to get a video's graph as a networkx ``MultiDiGraph``. Nothing here
calls a model; the query embedding for :func:`node_importance` is computed by the caller. The
graph and its super-nodes are built at ingestion (:mod:`vidscope.tasks.graph`,
:mod:`vidscope.tasks.graph_supernodes`).

Importance. ``w(n) = 0.4·freq + 0.3·centrality + 0.3·query_rel`` with
``freq = f(n) / max_m f(m)``, ``f(n) = clip_count / total_clips · log(1 + appearance_seconds)``,
``centrality = 0.5·degree / max degree + 0.5·betweenness`` (distinct neighbours and normalised
betweenness on the undirected simple graph, self-loops ignored) and ``query_rel`` the cosine of the
node's name embedding and the query embedding (0 without a query or an embedding).

Deviation from the paper's formula: the paper uses ``f(n)`` as the frequency term directly. Its
``log(1 + seconds)`` factor is unbounded while centrality and query relevance lie in [0, 1], so
on a long video (a subject on screen for 3,000 s of 2 h scores ``0.5 · log 3001 ≈ 4``) frequency
swamps the other terms and the same few subjects rank first whatever the query asks. Dividing by
the video's largest ``f`` keeps the paper's ordering by frequency but bounds the term to [0, 1],
so the weights mean what they say on videos of any length.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vidscope.tasks.graph_supernodes import cosine, undirected_pairs

if TYPE_CHECKING:
    import networkx as nx

    from vidscope.storage import Store

#: Importance weights: frequency, centrality, query relevance.
W_FREQ, W_CENTRALITY, W_QUERY = 0.4, 0.3, 0.3


# ============================================================================ importance


def centrality(nodes: Sequence[dict[str, Any]], edges: Iterable[dict[str, Any]]) -> dict[str, float]:
    """``0.5 · degree / max degree + 0.5 · betweenness`` per node_id on the undirected simple graph."""
    import networkx as nx

    ids = [r["node_id"] for r in nodes]
    graph = nx.Graph()
    graph.add_nodes_from(ids)
    graph.add_edges_from((ids[i], ids[j]) for i, j in undirected_pairs(ids, edges))
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
    query_embedding: Sequence[float] | np.ndarray | None = None,
) -> dict[str, float]:
    """Importance ``w(n) = 0.4·freq + 0.3·centrality + 0.3·query_rel`` of every node, by node_id
    (``freq`` normalised by the video's largest, see the module docstring).

    ``nodes`` are ``graph_nodes`` rows (``node_id``, ``clip_count``, ``appearance_seconds``,
    ``name_embedding``), ``edges`` ``graph_edges`` rows (``source``, ``target``), ``total_clips``
    the number of clips of the video. ``query_rel`` is the cosine of the node's name embedding and
    ``query_embedding`` (0 when either is missing). See the module docstring for each term.
    """
    central = centrality(nodes, edges)
    raw_freq = {node["node_id"]: frequency(node, total_clips) for node in nodes}
    top_freq = max(raw_freq.values(), default=0.0)
    weights = {}
    for node in nodes:
        query_rel = (
            cosine(node.get("name_embedding"), query_embedding) if query_embedding is not None else 0.0
        )
        weights[node["node_id"]] = (
            W_FREQ * (raw_freq[node["node_id"]] / top_freq if top_freq > 0 else 0.0)
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
