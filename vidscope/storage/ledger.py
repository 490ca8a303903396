"""The stage ledger: what each ingestion stage did to each video, the truth for resumption.

A stage is *current* for a video when its last run succeeded with the same stage version and
config hash; anything else (missing, failed, interrupted, changed) runs again.

A ``running`` row names the process that runs the stage (pid and start time, in its details). A
process that died without a word (SIGKILL, power cut) leaves such a row behind; :func:`shown_status`
reads it as ``interrupted`` once that process is gone, so ``status`` never shows a dead stage as
running forever.

A row a bundle brought carries :data:`IMPORTED_FROM` in its details (:func:`mark_imported`): the
stage ran on another machine over a file nobody hashed here, so the video's content-hash id is
only claimed, not earned. When a file with that hash is ingested here, :func:`earned` says no and
ingestion replaces every row of the video with the file's own.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from vidscope.storage.schema import TableSpec, versioned

STATUS_RUNNING = "running"
STATUS_DONE = "done"
STATUS_FAILED = "failed"
STATUS_SKIPPED = "skipped"  # the stage does not apply (e.g. speech recognition on a silent video)
STATUS_INTERRUPTED = "interrupted"  # stopped by a signal, or its process died
#: The details key marking a row written by a bundle import (its value: where the bundle was).
IMPORTED_FROM = "imported_from"

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


def owner() -> dict[str, Any]:
    """The details a ``running`` row carries: which process runs the stage."""
    import psutil  # here, not at import: a question reads the ledger but never writes a running row

    return {"pid": os.getpid(), "pid_started": psutil.Process().create_time()}


def owner_alive(details_json: str | None) -> bool:
    """Whether the process named in a ``running`` row's details still runs (True if unnamed).

    The start time guards against a pid the system has since given to another process.
    """
    try:
        details = json.loads(details_json or "{}")
        pid, started = int(details["pid"]), float(details["pid_started"])
    except (ValueError, KeyError, TypeError):
        return True  # a row from before owners were recorded: nothing to judge it by
    import psutil

    try:
        proc = psutil.Process(pid)
        return abs(proc.create_time() - started) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def shown_status(row: dict[str, Any]) -> str:
    """A ledger row's status as the user should see it: a dead process's stage is interrupted."""
    if row["status"] == STATUS_RUNNING and not owner_alive(row.get("details_json")):
        return STATUS_INTERRUPTED
    return str(row["status"])


def _details(details_json: str | None) -> dict[str, Any]:
    try:
        details = json.loads(details_json or "{}")
    except ValueError:
        return {}
    return details if isinstance(details, dict) else {}


def mark_imported(details_json: str | None, origin: str) -> str:
    """``details_json`` with the mark of a row a bundle brought from ``origin`` (details that are
    not a JSON object are dropped: they came from elsewhere)."""
    return json.dumps({**_details(details_json), IMPORTED_FROM: origin})


def imported(row: Mapping[str, Any]) -> bool:
    """Whether a ledger row was written by a bundle import, not by a stage run here."""
    return IMPORTED_FROM in _details(row.get("details_json"))


def earned(rows: Iterable[Mapping[str, Any]], first_stage: str) -> bool:
    """Whether a stored video's rows were made here from its file: its ledger has ``first_stage``
    (the probe, which registers the file) and no row a bundle brought."""
    rows = list(rows)
    return any(row["stage"] == first_stage for row in rows) and not any(imported(row) for row in rows)
