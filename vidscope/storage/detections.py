"""The ``detections`` table: objects found in sampled frames, with tracker ids when tracked."""

from __future__ import annotations

import pyarrow as pa

from vidscope.storage.schema import TableSpec, versioned

DETECTIONS = TableSpec(
    name="detections",
    schema=versioned(
        [
            pa.field("video_id", pa.string(), nullable=False),
            pa.field("frame_index", pa.int32(), nullable=False),
            pa.field("det_index", pa.int32(), nullable=False),
            pa.field("t", pa.float64(), nullable=False),
            pa.field("label", pa.string(), nullable=False),
            # x1, y1, x2, y2 in stored-frame pixels.
            pa.field("box", pa.list_(pa.float32(), 4), nullable=False),
            pa.field("score", pa.float32(), nullable=False),
            pa.field("track_id", pa.int64()),
        ]
    ),
    keys=("video_id", "frame_index", "det_index"),
)
