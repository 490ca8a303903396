"""The stage ledger: what each ingestion stage did to each video, the truth for resumption.

A stage is *current* for a video when its last run succeeded with the same stage version and
config hash; anything else (missing, failed, running when a process died, changed) runs again.
"""

from __future__ import annotations

import pyarrow as pa

from vidscope.storage.schema import TableSpec, versioned

STATUS_RUNNING = "running"
STATUS_DONE = "done"
STATUS_FAILED = "failed"
STATUS_SKIPPED = "skipped"  # the stage does not apply (e.g. speech recognition on a silent video)

LEDGER = TableSpec(
    name="ledger",
    schema=versioned(
        [
            pa.field("video_id", pa.string(), nullable=False),
            pa.field("stage", pa.string(), nullable=False),
            pa.field("stage_version", pa.int32(), nullable=False),
            pa.field("config_hash", pa.string(), nullable=False),
            pa.field("status", pa.string(), nullable=False),
            pa.field("error", pa.string()),
            pa.field("started_at", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("finished_at", pa.timestamp("us", tz="UTC")),
            pa.field("seconds", pa.float64()),
            pa.field("rows", pa.int64()),
            pa.field("details_json", pa.string()),
        ]
    ),
    keys=("video_id", "stage"),
)
