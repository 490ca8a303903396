"""The structured semantic library (MAVIS): parsed captions and tags per video window, the
vocabulary of canonical concepts, and the inverted index concept → (video, window).

``video_parses`` is written by the ``parse`` ingestion stage (one row per chapter-sized window of
a video: a concise caption and scene/object/action keyword lists). The ``tags`` stage maps each
surface form to a canonical concept of the shared vocabulary (``concepts``, which grows as videos
arrive and is never rebuilt) and writes the video's rows of the inverted index (``concept_index``).

The three sub-libraries (scene, object, action) are the ``dimension`` column of the index; joined
with the parses they give concept -> (video, window, caption), e.g. with ``vidscope sql``::

    SELECT i.concept, i.video_id, p.start, p."end", p.caption
    FROM concept_index i JOIN video_parses p USING (video_id, window_index)
    WHERE i.dimension = 'action' AND i.concept = 'talking'

``video_parses`` and ``concept_index`` rows belong to a video and go with it; ``concepts`` belongs to
the library (see ``Store.library_specs``) and keeps every concept once learnt.
"""

from __future__ import annotations

import pyarrow as pa

from vidscope.core.lexicon import DIMENSIONS
from vidscope.storage.schema import TableSpec, vector_type, versioned

# DIMENSIONS is defined with the lexicon (canonical forms depend on it) and named here too:
# the sub-libraries are the `dimension` column of these tables.
__all__ = ["CONCEPT_INDEX", "DIMENSIONS", "concepts_spec", "video_parses_spec"]


def video_parses_spec(text_dim: int) -> TableSpec:
    """Per-window structured parse of a video, with an embedding of its caption."""
    return TableSpec(
        name="video_parses",
        schema=versioned(
            [
                pa.field("video_id", pa.string(), nullable=False),
                pa.field("window_index", pa.int32(), nullable=False),
                pa.field("start", pa.float64(), nullable=False),
                pa.field("end", pa.float64(), nullable=False),
                pa.field("caption", pa.string(), nullable=False),  # 5–20 words
                pa.field("scene", pa.list_(pa.string())),
                pa.field("objects", pa.list_(pa.string())),
                pa.field("actions", pa.list_(pa.string())),
                pa.field("parser", pa.string()),  # the model (or "signals") that wrote it
                pa.field("caption_embedding", vector_type(text_dim)),
            ]
        ),
        keys=("video_id", "window_index"),
        vector_column="caption_embedding",
        text_columns=("caption",),
    )


def concepts_spec(text_dim: int) -> TableSpec:
    """The vocabulary: one canonical concept per dimension with its aliases (not per video)."""
    return TableSpec(
        name="concepts",
        schema=versioned(
            [
                pa.field("dimension", pa.string(), nullable=False),  # scene | object | action
                pa.field("concept", pa.string(), nullable=False),  # canonical form
                pa.field("aliases", pa.list_(pa.string())),  # surface forms mapped to it
                pa.field("embedding", vector_type(text_dim)),
                pa.field("confirmed_by", pa.string()),  # "embedding" or the chat model's name
            ]
        ),
        keys=("dimension", "concept"),
        vector_column="embedding",
    )


#: Inverted index of the three sub-libraries: concept → (video, window) with the surface form seen.
CONCEPT_INDEX = TableSpec(
    name="concept_index",
    schema=versioned(
        [
            pa.field("dimension", pa.string(), nullable=False),
            pa.field("concept", pa.string(), nullable=False),
            pa.field("video_id", pa.string(), nullable=False),
            pa.field("window_index", pa.int32(), nullable=False),
            pa.field("surface", pa.string()),
        ]
    ),
    keys=("dimension", "concept", "video_id", "window_index"),
)
