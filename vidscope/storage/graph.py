"""The entity graph of a video: entities (nodes), time-bounded relations (edges), where each entity
is mentioned (node ↔ clip), the per-clip extraction the graph is built from, and super-nodes.

Written by the ``graph`` ingestion stage. Each clip's extraction is kept with the hash of the text
it was extracted from, so a re-captioned clip or a new video re-asks the chat model only for what
changed; entity resolution and the derived tables are then rebuilt from the stored extractions.
"""

from __future__ import annotations

import pyarrow as pa

from vidscope.storage.schema import TableSpec, vector_type, versioned
from vidscope.storage.subjects import SPAN

#: The chat model's reply for one clip, as parsed JSON, with the hash of the text it came from.
GRAPH_EXTRACTIONS = TableSpec(
    name="graph_extractions",
    schema=versioned(
        [
            pa.field("video_id", pa.string(), nullable=False),
            pa.field("clip_index", pa.int32(), nullable=False),
            pa.field("text_hash", pa.string(), nullable=False),
            pa.field("model", pa.string()),
            # {"entities": [...], "relations": [...]} after validation (never half-parsed).
            pa.field("extraction_json", pa.string(), nullable=False),
        ]
    ),
    keys=("video_id", "clip_index"),
)


def graph_nodes_spec(text_dim: int) -> TableSpec:
    """Resolved entities of a video, with a ``text_dim``-dimensional embedding of their name."""
    return TableSpec(
        name="graph_nodes",
        schema=versioned(
            [
                pa.field("video_id", pa.string(), nullable=False),
                # Stable within a video: derived from the canonical name.
                pa.field("node_id", pa.string(), nullable=False),
                pa.field("name", pa.string(), nullable=False),
                pa.field("kind", pa.string()),  # person, animal, object, place, …
                pa.field("aliases", pa.list_(pa.string())),
                pa.field("attributes", pa.list_(pa.string())),
                pa.field("actions", pa.list_(pa.string())),
                pa.field("appearance", pa.string()),
                # Sorted, merged time spans in which the entity is mentioned or seen.
                pa.field("spans", pa.list_(SPAN)),
                pa.field("appearance_seconds", pa.float64()),
                pa.field("clip_count", pa.int32()),
                pa.field("name_embedding", vector_type(text_dim)),
            ]
        ),
        keys=("video_id", "node_id"),
        vector_column="name_embedding",
        text_columns=("name", "appearance"),
    )


#: Directed relations "source —relation→ target" holding during [t_start, t_end].
GRAPH_EDGES = TableSpec(
    name="graph_edges",
    schema=versioned(
        [
            pa.field("video_id", pa.string(), nullable=False),
            pa.field("edge_id", pa.string(), nullable=False),
            pa.field("source", pa.string(), nullable=False),  # node_id
            pa.field("target", pa.string(), nullable=False),  # node_id
            pa.field("relation", pa.string(), nullable=False),
            pa.field("t_start", pa.float64(), nullable=False),
            pa.field("t_end", pa.float64(), nullable=False),
            pa.field("clip_index", pa.int32()),
        ]
    ),
    keys=("video_id", "edge_id"),
)

#: Which clips mention which entity.
GRAPH_MENTIONS = TableSpec(
    name="graph_mentions",
    schema=versioned(
        [
            pa.field("video_id", pa.string(), nullable=False),
            pa.field("node_id", pa.string(), nullable=False),
            pa.field("clip_index", pa.int32(), nullable=False),
            pa.field("start", pa.float64(), nullable=False),
            pa.field("end", pa.float64(), nullable=False),
        ]
    ),
    keys=("video_id", "node_id", "clip_index"),
)

#: Clusters of related entities (spectral clustering), each with the union of its members' spans.
GRAPH_SUPERNODES = TableSpec(
    name="graph_supernodes",
    schema=versioned(
        [
            pa.field("video_id", pa.string(), nullable=False),
            pa.field("supernode_index", pa.int32(), nullable=False),
            pa.field("label", pa.string()),
            pa.field("members", pa.list_(pa.string())),  # node_ids
            pa.field("spans", pa.list_(SPAN)),
        ]
    ),
    keys=("video_id", "supernode_index"),
)
