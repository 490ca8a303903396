"""The ``clips`` table: fixed-length segments of a video, the unit of retrieval.

Segmentation writes the time columns; captioning fills ``caption``/``caption_source`` and the
clip's transcript and on-screen text; the embedding stage fills ``text_embedding``.
"""

from __future__ import annotations

import pyarrow as pa

from vidscope.storage.schema import TableSpec, vector_type, versioned

#: ``caption_source`` of a caption that is a summary of the clip's own signals (no model wrote it).
SIGNALS_SUMMARY = "signals-summary"

#: A clip's time span and every text it is known by: what readers of clip texts select.
CLIP_TEXT_COLUMNS = (
    "clip_index",
    "start",
    "end",
    "caption",
    "caption_source",
    "transcript_text",
    "ocr_text",
)


def clips_spec(text_dim: int) -> TableSpec:
    """The clips table with ``text_dim``-dimensional text embeddings."""
    return TableSpec(
        name="clips",
        schema=versioned(
            [
                pa.field("video_id", pa.string(), nullable=False),
                pa.field("clip_index", pa.int32(), nullable=False),
                pa.field("start", pa.float64(), nullable=False),
                pa.field("end", pa.float64(), nullable=False),
                pa.field("caption", pa.string()),
                pa.field("caption_source", pa.string()),
                pa.field("transcript_text", pa.string()),
                pa.field("ocr_text", pa.string()),
                pa.field("text_embedding", vector_type(text_dim)),
                pa.field("embed_model", pa.string()),
            ]
        ),
        keys=("video_id", "clip_index"),
        vector_column="text_embedding",
        text_columns=("caption", "transcript_text", "ocr_text"),
    )


def clip_videos_spec(video_dim: int) -> TableSpec:
    """The ``clip_videos`` table: one ``video_dim``-d video–text embedding per clip (the
    ``clip_embed`` stage, ``models.video_text``), with the clip's span and the model that made it."""
    return TableSpec(
        name="clip_videos",
        schema=versioned(
            [
                pa.field("video_id", pa.string(), nullable=False),
                pa.field("clip_index", pa.int32(), nullable=False),
                pa.field("start", pa.float64(), nullable=False),
                pa.field("end", pa.float64(), nullable=False),
                pa.field("video_embedding", vector_type(video_dim)),
                pa.field("model", pa.string()),
            ]
        ),
        keys=("video_id", "clip_index"),
        vector_column="video_embedding",
    )
