"""The ``videos`` table: one row per distinct video content (its SHA-256 is the id)."""

from __future__ import annotations

from typing import Any, Protocol

import pyarrow as pa
from pydantic import BaseModel

from vidscope.storage.schema import TableSpec, versioned

VIDEOS = TableSpec(
    name="videos",
    schema=versioned(
        [
            pa.field("video_id", pa.string(), nullable=False),
            pa.field("path", pa.string(), nullable=False),
            pa.field("file_name", pa.string(), nullable=False),
            pa.field("size_bytes", pa.int64(), nullable=False),
            pa.field("duration", pa.float64(), nullable=False),
            pa.field("fps", pa.float64(), nullable=False),
            pa.field("width", pa.int32(), nullable=False),
            pa.field("height", pa.int32(), nullable=False),
            pa.field("rotation", pa.int32(), nullable=False),
            pa.field("has_audio", pa.bool_(), nullable=False),
            pa.field("video_codec", pa.string()),
            pa.field("audio_codec", pa.string()),
            pa.field("streams_json", pa.string()),
            pa.field("added_at", pa.timestamp("us", tz="UTC"), nullable=False),
        ]
    ),
    keys=("video_id",),
)


class VideoRecord(BaseModel):
    """A row of :data:`VIDEOS`. ``width``/``height`` are as displayed (after rotation)."""

    video_id: str
    path: str
    file_name: str
    size_bytes: int
    duration: float
    fps: float
    width: int
    height: int
    rotation: int
    has_audio: bool
    video_codec: str | None = None
    audio_codec: str | None = None
    streams_json: str | None = None
    added_at: object = None


class VideoNotFound(LookupError):
    """No stored video matches a reference, or the reference is ambiguous."""


class VideoRows(Protocol):
    """What :func:`find_video` reads: the store's video table (:class:`~vidscope.storage.store.Store`
    is one). A protocol, so this table module does not import the store, which imports it."""

    videos: TableSpec

    def rows(self, spec: TableSpec) -> Any:
        """The table's rows (an Arrow table)."""


def find_video(store: VideoRows, ref: str) -> VideoRecord:
    """Resolve ``ref`` to a stored video: a full id, an id prefix (6+ chars), a path, or a file name
    with or without its extension (``car-detection`` finds ``car-detection.mp4``).

    Raises :class:`VideoNotFound` naming the reference when nothing or more than one video matches.
    """
    from pathlib import Path

    if not ref or "\x00" in ref:
        raise VideoNotFound(f"{ref!r} is not a video id, path or file name")
    rows = store.rows(store.videos).to_pylist()
    try:
        ref_path = str(Path(ref).expanduser().resolve())
    except (RuntimeError, OSError):  # "~nosuchuser/…": no home to expand, so no stored path either
        ref_path = ""
    exact = [r for r in rows if r["video_id"] == ref or r["path"] == ref_path]
    if not exact and len(ref) >= 6:
        exact = [r for r in rows if r["video_id"].startswith(ref.lower())]
    if not exact:
        exact = [r for r in rows if r["file_name"] == ref or r["file_name"] == Path(ref).name]
    if not exact:  # a file name as people say it, without the extension
        exact = [
            r for r in rows if Path(r["file_name"]).stem == ref or Path(r["file_name"]).stem == Path(ref).name
        ]
    if not exact:
        raise VideoNotFound(f"no ingested video matches '{ref}' (see `vidscope videos`)")
    if len(exact) > 1:
        ids = ", ".join(r["video_id"][:12] for r in exact)
        raise VideoNotFound(f"'{ref}' matches several videos ({ids}); use an id prefix")
    return VideoRecord(**exact[0])
