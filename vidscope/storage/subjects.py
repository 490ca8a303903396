"""The ``subjects`` table: who and what recurs in a video, as read from its clip captions.

One row per subject (a person, an animal, a vehicle, a named object) after the ``subjects`` stage
has merged its running registry at the end of the video: how it looks, who or what it is, what it
does, and the time spans in which it is seen or mentioned.
"""

from __future__ import annotations

import pyarrow as pa

from vidscope.storage.schema import TableSpec, versioned

#: A time range in seconds from the start of the video.
SPAN = pa.struct([pa.field("start", pa.float64()), pa.field("end", pa.float64())])

SUBJECTS = TableSpec(
    name="subjects",
    schema=versioned(
        [
            pa.field("video_id", pa.string(), nullable=False),
            # Order of first appearance (0 = the subject seen first).
            pa.field("subject_index", pa.int32(), nullable=False),
            pa.field("name", pa.string(), nullable=False),
            pa.field("appearance", pa.string()),
            pa.field("identity", pa.string()),
            pa.field("actions", pa.list_(pa.string())),
            # Sorted, non-overlapping, within [0, duration].
            pa.field("spans", pa.list_(SPAN)),
            pa.field("first_seen", pa.float64()),
            # How many caption windows reported the subject: a rough measure of its importance.
            pa.field("mentions", pa.int32()),
        ]
    ),
    keys=("video_id", "subject_index"),
    text_columns=("name", "appearance", "identity"),
)
