"""The ``frames`` table: frames sampled at a fixed rate, stored as JPEG bytes, the unit of perception."""

from __future__ import annotations

import pyarrow as pa

from vidscope.storage.schema import TableSpec, vector_type, versioned


def frames_spec(image_dim: int) -> TableSpec:
    """The frames table with an optional ``image_dim``-dimensional image embedding."""
    return TableSpec(
        name="frames",
        schema=versioned(
            [
                pa.field("video_id", pa.string(), nullable=False),
                pa.field("frame_index", pa.int32(), nullable=False),
                pa.field("t", pa.float64(), nullable=False),
                pa.field("clip_index", pa.int32(), nullable=False),
                pa.field("width", pa.int32(), nullable=False),
                pa.field("height", pa.int32(), nullable=False),
                pa.field("jpeg", pa.binary(), nullable=False),
                pa.field("image_embedding", vector_type(image_dim)),
            ]
        ),
        keys=("video_id", "frame_index"),
        vector_column="image_embedding",
    )
