"""The ``ocr_items`` table: on-screen text, one row per text that stays on screen for a span."""

from __future__ import annotations

import pyarrow as pa

from vidscope.storage.schema import TableSpec, versioned

OCR_ITEMS = TableSpec(
    name="ocr_items",
    schema=versioned(
        [
            pa.field("video_id", pa.string(), nullable=False),
            pa.field("item_index", pa.int32(), nullable=False),
            pa.field("t", pa.float64(), nullable=False),
            pa.field("t_end", pa.float64(), nullable=False),
            pa.field("text", pa.string(), nullable=False),
            # Four corner points (x1, y1, ..., x4, y4) in stored-frame pixels.
            pa.field("box", pa.list_(pa.float32(), 8), nullable=False),
            pa.field("score", pa.float32(), nullable=False),
        ]
    ),
    keys=("video_id", "item_index"),
    text_columns=("text",),
)

#: Burned-in clock readings (issue 44): what a clock region of the frame showed at a video second,
#: parsed into a naive wall time (a clock shows no zone). Added with its own table, so a store made
#: before it opens unchanged: the table is created when the ``ocr`` stage first writes one.
CLOCK_READINGS = TableSpec(
    name="clock_readings",
    schema=versioned(
        [
            pa.field("video_id", pa.string(), nullable=False),
            pa.field("reading_index", pa.int32(), nullable=False),
            pa.field("t", pa.float64(), nullable=False),
            pa.field("text", pa.string(), nullable=False),
            pa.field("wall", pa.timestamp("us"), nullable=False),
            # False: the clock showed only the time of day (the wall's date is a placeholder).
            pa.field("dated", pa.bool_(), nullable=False),
            pa.field("box", pa.list_(pa.float32(), 8), nullable=False),
        ]
    ),
    keys=("video_id", "reading_index"),
)
