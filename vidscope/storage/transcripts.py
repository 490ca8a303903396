"""The ``transcript_segments`` table: speech recognised in a video, with word timings."""

from __future__ import annotations

import pyarrow as pa

from vidscope.storage.schema import TableSpec, versioned

WORD = pa.struct(
    [
        pa.field("word", pa.string()),
        pa.field("start", pa.float64()),
        pa.field("end", pa.float64()),
        pa.field("probability", pa.float32()),
    ]
)

TRANSCRIPT_SEGMENTS = TableSpec(
    name="transcript_segments",
    schema=versioned(
        [
            pa.field("video_id", pa.string(), nullable=False),
            pa.field("segment_index", pa.int32(), nullable=False),
            pa.field("start", pa.float64(), nullable=False),
            pa.field("end", pa.float64(), nullable=False),
            pa.field("text", pa.string(), nullable=False),
            pa.field("language", pa.string()),
            pa.field("avg_logprob", pa.float32()),
            pa.field("words", pa.list_(WORD)),
        ]
    ),
    keys=("video_id", "segment_index"),
    text_columns=("text",),
)
