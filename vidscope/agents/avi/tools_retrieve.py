"""AVI Retrieve tools: find where to look — clip_retrieve, clip_merge, global_explore and
graph_retrieve, over the clip database and the entity graph built at ingestion."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, Field

from vidscope.agents import prompts
from vidscope.agents.answers import Support
from vidscope.agents.evidence import ClipSearchResult, load_clips, search_clips
from vidscope.agents.graph_importance import load_graph, node_importance
from vidscope.agents.perception import (
    checked_range,
)
from vidscope.agents.tools import ToolContext, ToolError, ToolResult, tool
from vidscope.core.lexicon import keywords
from vidscope.core.timecodes import fmt_time
from vidscope.models.json_tools import quote_data
from vidscope.models.protocols.chat import ChatMessage, Usage
from vidscope.tasks.stage import stage_failure

log = logging.getLogger(__name__)

#: Output limits that keep results within the model's token budget.
EXPLORE_PARTS = 12
EXPLORE_SEGMENTS = 6
EXPLORE_CAPTION_CHARS = 160
MERGE_TEXT_CHARS = 240
GRAPH_SEEDS = 3
#: Other entities count as matches when they score at least this share of the best match.
SEED_RATIO = 0.8
GRAPH_HOPS = 2
GRAPH_SPANS = 8
GRAPH_RELATIONS = 40


# ============================================================================ retrieve


@tool(version=1, uses_embedder=True)
def clip_retrieve(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video to search."],
    query: Annotated[str, "What to look for: an event, object, action, scene, words spoken or shown."],
    k: Annotated[int, Field(description="How many clips to return (1-50).", ge=1, le=50)] = 16,
) -> ClipSearchResult:
    """Retrieve the k clips of a video most relevant to a query (caption embeddings fused with
    keyword matches in speech, on-screen text and captions), in time order with their start/end
    times, caption, speech and on-screen text. Follow with clip_merge to join clips of one event."""
    ctx.video(video_id)
    return search_clips(ctx, video_id, query, k)


class MergedEvent(BaseModel):
    """Adjacent or near clips joined into one event."""

    start: float
    end: float
    clip_indices: list[int]
    text: str = Field("", description="The joined clips' captions (shortened).")


class ClipMergeResult(ToolResult):
    """Time ranges joined where they touch, or are near and describe the same event."""

    video_id: str
    events: list[MergedEvent]
    merged_from: int

    def support(self) -> list[Support]:
        # Ranges the model gave clip_merge, joined: nothing looked at them.
        return [
            Support(video_id=self.video_id, start=e.start, end=e.end, level="echoed", found="merged ranges")
            for e in self.events
        ]

    def summary(self) -> str:
        where = ", ".join(f"{fmt_time(e.start)}-{fmt_time(e.end)}" for e in self.events[:4])
        return f"{self.merged_from} ranges -> {len(self.events)} events: {where}"


def _cosine(a: np.ndarray | None, b: np.ndarray | None) -> float | None:
    if a is None or b is None:
        return None
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b / norm) if norm > 0 else None


@tool(version=1)
def clip_merge(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video the clips belong to."],
    clips: Annotated[
        list[list[float]],
        Field(
            description="Time ranges [[start, end], ...] in seconds, e.g. from clip_retrieve.",
            min_length=1,
            max_length=100,
        ),
    ],
    max_gap: Annotated[
        float, Field(description="Largest gap in seconds between ranges of one event.", ge=0, le=120)
    ] = 5.0,
    min_similarity: Annotated[
        float,
        Field(
            description=(
                "How alike (0-1, description similarity) two ranges separated by a gap must be to "
                "count as one event; 0 joins by time alone. Touching ranges always join."
            ),
            ge=0,
            le=1,
        ),
    ] = 0.3,
) -> ClipMergeResult:
    """Join time ranges that overlap or touch, and near ones (gap up to max_gap) that describe the
    same event, into events with their clips and joined captions. Use it on clip_retrieve results
    to get whole events instead of 5-second pieces."""
    record = ctx.video(video_id)
    ranges: list[tuple[float, float]] = []
    for pair in clips:
        if len(pair) != 2:
            raise ToolError(f"each range must be [start, end], got {pair}")
        ranges.append(checked_range(record, pair))
    ranges.sort()
    stored = load_clips(ctx, video_id, with_embeddings=True)

    def covered(start: float, end: float) -> list[dict[str, Any]]:
        return [c for c in stored if c["start"] < end and c["end"] > start] or [
            c for c in stored if c["start"] <= start <= c["end"]
        ]

    def meaning(members: list[dict[str, Any]]) -> np.ndarray | None:
        vectors = [
            np.asarray(c["text_embedding"], dtype=np.float64)
            for c in members
            if c.get("text_embedding") is not None
        ]
        return np.mean(vectors, axis=0) if vectors else None

    groups: list[list[tuple[float, float]]] = []
    for start, end in ranges:
        if groups:
            last_end = max(e for _, e in groups[-1])
            gap = start - last_end
            if gap <= 1e-6:
                groups[-1].append((start, end))
                continue
            if gap <= max_gap:
                # The clips on either side of the gap: are they about the same thing?
                tail = covered(*groups[-1][-1])
                similarity = _cosine(meaning(tail), meaning(covered(start, end)))
                if min_similarity <= 0 or similarity is None or similarity >= min_similarity:
                    groups[-1].append((start, end))
                    continue
        groups.append([(start, end)])
    events = []
    for group in groups:
        start, end = group[0][0], max(e for _, e in group)
        members = covered(start, end)
        text = " | ".join(c["caption"] for c in members if c.get("caption"))
        events.append(
            MergedEvent(
                start=round(start, 2),
                end=round(end, 2),
                clip_indices=[int(c["clip_index"]) for c in members],
                text=text[:MERGE_TEXT_CHARS],
            )
        )
    return ClipMergeResult(video_id=video_id, events=events, merged_from=len(ranges))


class TimelinePart(BaseModel):
    """One of the equal parts global_explore splits a video into."""

    start: float
    end: float
    relevance: float = Field(description="Best clip relevance inside the part (0 when none).")
    caption: str | None = None


class ExploreSegment(BaseModel):
    """A run of relevant clips: where the answer most likely is."""

    start: float
    end: float
    relevance: float
    caption: str | None = None


class ExploreResult(ToolResult):
    """A query-focused look at a whole video: its timeline, and the segments likely to answer."""

    video_id: str
    query: str
    duration: float
    summary_text: str | None = Field(None, description="The model's summary; absent without a chat model.")
    segments: list[ExploreSegment] = Field(default_factory=list, description="Most relevant first.")
    timeline: list[TimelinePart] = Field(default_factory=list)
    usage: Usage | None = None

    # An overview of the whole timeline is not evidence for any one moment (no support): citing a
    # range it only pointed at stays unverified until a clip, frame or text tool looked there.

    def summary(self) -> str:
        where = ", ".join(f"{fmt_time(s.start)}-{fmt_time(s.end)}" for s in self.segments[:3])
        kind = "summary" if self.summary_text else "timeline only"
        return f"{kind}; likely segments {where or 'none'}"

    def model_usage(self) -> Usage | None:
        return self.usage

    def for_model(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"usage"})


def _short(text: str | None, limit: int) -> str | None:
    if not text:
        return None
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@tool(version=1, uses_chat=True, uses_embedder=True, settings=("max_tokens", "temperature"))
def global_explore(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video to explore."],
    query: Annotated[str, "What the exploration should focus on (the question, or a part of it)."],
) -> ExploreResult:
    """Explore a whole video for a query: its timeline in equal parts (caption and relevance of
    each), the segments most likely to answer the query, and (with a language model) a summary of
    the relevant events in order with their times. Use it first to see where to look."""
    record = ctx.video(video_id)
    clips = load_clips(ctx, video_id)
    if not clips:
        raise ToolError(f"video {video_id} has no clips yet; ingest it first (vidscope ingest)")
    hits = search_clips(ctx, video_id, query, min(len(clips), 50)).clips
    relevance = {h.clip_index: h.score for h in hits}
    top = max(relevance.values(), default=0.0) or 1.0
    # Segments: the best third of the hits (at least 3), with touching clips joined.
    best = sorted(hits, key=lambda h: -h.score)[: max(3, len(hits) // 3)]
    segments: list[ExploreSegment] = []
    for hit in sorted(best, key=lambda h: h.start):
        score = round(hit.score / top, 3)
        if segments and hit.start - segments[-1].end <= 1e-6:
            last = segments[-1]
            last.end = hit.end
            if score > last.relevance:
                last.relevance, last.caption = score, _short(hit.caption, EXPLORE_CAPTION_CHARS)
            continue
        segments.append(
            ExploreSegment(
                start=hit.start,
                end=hit.end,
                relevance=score,
                caption=_short(hit.caption, EXPLORE_CAPTION_CHARS),
            )
        )
    segments = sorted(segments, key=lambda s: -s.relevance)[:EXPLORE_SEGMENTS]
    duration = float(record.duration) or float(clips[-1]["end"])
    parts = min(EXPLORE_PARTS, len(clips))
    timeline = []
    for p in range(parts):
        start, end = duration * p / parts, duration * (p + 1) / parts
        inside = [c for c in clips if c["start"] < end and c["end"] > start] or [clips[0]]
        pick = max(inside, key=lambda c: (relevance.get(int(c["clip_index"]), 0.0), -abs(c["start"] - start)))
        timeline.append(
            TimelinePart(
                start=round(start, 2),
                end=round(end, 2),
                relevance=round(max(relevance.get(int(c["clip_index"]), 0.0) for c in inside) / top, 3),
                caption=_short(
                    pick["caption"] or pick["transcript_text"] or pick["ocr_text"], EXPLORE_CAPTION_CHARS
                ),
            )
        )
    result = ExploreResult(
        video_id=video_id, query=query, duration=duration, segments=segments, timeline=timeline
    )
    if ctx.chat is None:
        return result
    data = {
        "timeline": [p.model_dump() for p in timeline],
        "likely_segments": [s.model_dump() for s in segments],
    }
    reply = ctx.chat.chat(
        [
            ChatMessage(role="system", content=prompts.EXPLORE_SYSTEM),
            ChatMessage(
                role="user",
                content=(
                    f"Query: {query}\nVideo duration: {duration:.1f}s.\n{quote_data(data, compact=False)}"
                ),
            ),
        ],
        max_tokens=ctx.config.max_tokens,
        temperature=ctx.config.temperature,
    )
    result.summary_text = (reply.text or "").strip() or None
    result.usage = reply.usage
    return result


class GraphEntity(BaseModel):
    """An entity of the video's graph, with when it is seen."""

    name: str
    kind: str | None = None
    importance: float
    appearance: str | None = None
    attributes: list[str] = Field(default_factory=list)
    actions: list[str] = Field(default_factory=list)
    spans: list[list[float]] = Field(default_factory=list, description="[start, end] seconds seen.")


class GraphRelation(BaseModel):
    """A relation "source —relation→ target" holding during [t_start, t_end]."""

    source: str
    relation: str
    target: str
    t_start: float
    t_end: float


class GraphGroup(BaseModel):
    """A super-node: a cluster of related entities (a group, a scene) and when it is seen."""

    label: str | None = None
    members: list[str]
    spans: list[list[float]] = Field(default_factory=list)


class GraphRetrieveResult(ToolResult):
    """Entities matching a query and their important neighbours, with relations and times; for a
    path question, the chain of entities and relations connecting two entities."""

    video_id: str
    entity_query: str
    entities: list[GraphEntity]
    relations: list[GraphRelation]
    matched: list[str] = Field(default_factory=list, description="The entities the query matched.")
    groups: list[GraphGroup] = Field(
        default_factory=list,
        description="Super-nodes (groups, scenes) the query matched or that hold the matches.",
    )
    to_entity: str | None = None
    path: list[str] = Field(
        default_factory=list,
        description="Entity names from the query's match to to_entity's; empty if unconnected.",
    )

    def support(self) -> list[Support]:
        # Spans of graph entities: where the captions placed them, not a look.
        found = [
            Support(video_id=self.video_id, start=a, end=b, level="echoed", found=f"graph entity {e.name!r}")
            for e in self.entities
            for a, b in e.spans
        ]
        return found + [
            Support(
                video_id=self.video_id, start=r.t_start, end=r.t_end, level="echoed", found="graph relation"
            )
            for r in self.relations
        ]

    def summary(self) -> str:
        return (
            f"{len(self.entities)} entities ({', '.join(self.matched) or 'no match'}), "
            f"{len(self.relations)} relations"
        )


@tool(version=2, uses_embedder=True)  # v2: super-nodes as seeds and groups; path questions
def graph_retrieve(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video whose entity graph to search."],
    entity_query: Annotated[
        str, "The person, animal, object, place or group/scene to look up (a name or description)."
    ],
    max_entities: Annotated[
        int,
        Field(description="Most entities to return (the matches plus important neighbours).", ge=1, le=40),
    ] = 12,
    to_entity: Annotated[
        str | None,
        "A second entity, for a path question (how is A related to B?): the chain of relations "
        "connecting the two is returned first.",
    ] = None,
) -> GraphRetrieveResult:
    """Look up entities of the video's entity graph matching a query (entities, or super-nodes:
    groups and scenes of related entities), then walk to related entities, keeping the most
    important ones. With to_entity, also the chain of relations connecting the two entities.
    Returns the entities (kind, appearance, attributes, actions, when seen) and the relations
    between them with their times. Graph facts come from captions: hints to check, not proof."""
    ctx.video(video_id)
    graph = load_graph(ctx.store, video_id)
    if graph.number_of_nodes() == 0:
        failed = stage_failure(ctx.store, video_id, "graph")  # an optional stage: the video is usable
        why = (
            f"its graph stage failed at ingestion ({failed})"
            if failed
            else "it is built at ingestion only when a chat model is configured (models.chat)"
        )
        raise ToolError(
            f"video {video_id} has no entity graph: {why}. Use clip_retrieve or global_explore instead."
        )
    nodes = [dict(data, node_id=n) for n, data in graph.nodes(data=True)]
    edges = [dict(data, source=u, target=v, edge_id=k) for u, v, k, data in graph.edges(keys=True, data=True)]
    vector = np.asarray(ctx.embedder().embed([entity_query])[0], dtype=np.float64)
    importance = node_importance(nodes, edges, ctx.store.count(ctx.store.clips, video_id), vector)
    by_id = {n["node_id"]: n for n in nodes}
    words = set(keywords(entity_query))

    def match(node: dict[str, Any]) -> float:
        names = [node["name"], *(node.get("aliases") or [])]
        lexical = max(len(words & set(keywords(n))) / max(1, len(words)) for n in names)
        semantic = _cosine(
            vector,
            None
            if node.get("name_embedding") is None
            else np.asarray(node["name_embedding"], dtype=np.float64),
        )
        return lexical + (semantic or 0.0)

    scores = {n["node_id"]: match(n) for n in nodes}
    ranked = sorted(nodes, key=lambda n: (-scores[n["node_id"]], -importance.get(n["node_id"], 0.0)))
    best = scores[ranked[0]["node_id"]]
    # The best match, and others nearly as good (an entity named twice, "the dog" and "Rex").
    seeds = [n["node_id"] for n in ranked[:GRAPH_SEEDS] if scores[n["node_id"]] >= SEED_RATIO * best]
    # Super-nodes: a query naming a group or scene ("the kitchen scene") better than any one entity
    # seeds the walk with the group's members.
    supernodes = [g for g in graph.graph.get("supernodes", []) if g.get("members")]
    group_words = {i: set(keywords(g.get("label") or "")) for i, g in enumerate(supernodes)}
    group_scores = {i: len(words & w) / max(1, len(words)) for i, w in group_words.items()}
    strong = [i for i, v in group_scores.items() if v > 0 and v >= best]
    for i in sorted(strong, key=lambda i: -group_scores[i])[:1]:
        seeds += [m for m in supernodes[i]["members"] if m in by_id and m not in seeds]
    undirected = graph.to_undirected(as_view=True)
    path_ids: list[str] = []
    if to_entity:
        import networkx as nx

        target_words = set(keywords(to_entity))
        target_vector = np.asarray(ctx.embedder().embed([to_entity])[0], dtype=np.float64)

        def target_match(node: dict[str, Any]) -> float:
            names = [node["name"], *(node.get("aliases") or [])]
            lexical = max(len(target_words & set(keywords(n))) / max(1, len(target_words)) for n in names)
            emb = node.get("name_embedding")
            semantic = _cosine(target_vector, None if emb is None else np.asarray(emb, dtype=np.float64))
            return lexical + (semantic or 0.0)

        target = max(nodes, key=lambda n: (target_match(n), importance.get(n["node_id"], 0.0)))["node_id"]
        source = seeds[0]
        try:
            path_ids = list(nx.shortest_path(undirected, source, target))
        except nx.NetworkXNoPath:
            path_ids = []
    # The path first (it answers the question), then breadth-first from the matches; each hop
    # keeps only the most important new entities.
    kept = list(dict.fromkeys([*path_ids, *seeds]))
    frontier = list(seeds)
    for _ in range(GRAPH_HOPS):
        reached = {m for n in frontier for m in undirected.neighbors(n)} - set(kept)
        room = max_entities - len(kept)
        if room <= 0 or not reached:
            break
        frontier = sorted(reached, key=lambda m: (-importance.get(m, 0.0), m))[:room]
        kept += frontier
    kept = kept[:max_entities]
    entities = [
        GraphEntity(
            name=by_id[n]["name"],
            kind=by_id[n].get("kind"),
            importance=round(importance.get(n, 0.0), 3),
            appearance=_short(by_id[n].get("appearance"), EXPLORE_CAPTION_CHARS),
            attributes=list(by_id[n].get("attributes") or [])[:6],
            actions=list(by_id[n].get("actions") or [])[:6],
            spans=[[s["start"], s["end"]] for s in (by_id[n].get("spans") or [])][:GRAPH_SPANS],
        )
        for n in kept
    ]
    chosen = set(kept)
    on_path = {frozenset(pair) for pair in zip(path_ids, path_ids[1:], strict=False)}
    relations = [
        GraphRelation(
            source=by_id[e["source"]]["name"],
            relation=e["relation"],
            target=by_id[e["target"]]["name"],
            t_start=e["t_start"],
            t_end=e["t_end"],
        )
        # The path's relations first, so the cap never drops the chain the question asked for.
        for e in sorted(
            edges,
            key=lambda e: (frozenset((e["source"], e["target"])) not in on_path, e["t_start"], e["edge_id"]),
        )
        if e["source"] in chosen and e["target"] in chosen
    ][:GRAPH_RELATIONS]
    matched = [by_id[n]["name"] for n in seeds]
    groups = [
        GraphGroup(
            label=g.get("label"),
            members=[by_id[m]["name"] for m in g["members"] if m in by_id],
            spans=[[s["start"], s["end"]] for s in (g.get("spans") or [])][:GRAPH_SPANS],
        )
        for i, g in enumerate(supernodes)
        if i in strong or chosen & set(g["members"])
    ]
    return GraphRetrieveResult(
        video_id=video_id,
        entity_query=entity_query,
        entities=entities,
        relations=relations,
        matched=matched,
        groups=groups,
        to_entity=to_entity,
        path=[by_id[n]["name"] for n in path_ids],
    )
