"""Identify a video by its content and read its properties (the ``probe`` stage).

The content hash (SHA-256 of the file) is the video's id, so a renamed or copied file is the same
video. Probing decodes one frame to prove the file is a video at all, and refuses what vidscope
cannot ingest (too long, frames too large) with a reason.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from vidscope.core.settings import Settings
from vidscope.storage import Store
from vidscope.storage.videos import VideoRecord
from vidscope.tasks.decode import UndecodableVideo, VideoInfo, decodable_until, probe
from vidscope.tasks.stage import Stage, StageContext, StageOutcome

HASH_CHUNK = 8 * 1024 * 1024
#: A file whose data end this much (s) before its declared duration is stored as partial.
PARTIAL_SLACK_S = 1.0


def content_hash(path: Path) -> str:
    """SHA-256 of the file's bytes (hex): the video id. Raises a clear error for unreadable files."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if not path.is_file():
        raise UndecodableVideo(path, "not a regular file")
    if path.stat().st_size == 0:
        raise UndecodableVideo(path, "empty file (0 bytes)")
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def check_limits(path: Path, info: VideoInfo, settings: Settings) -> None:
    """Refuse videos beyond the configured duration and frame-size limits."""
    limits = settings.ingest
    if info.duration <= 0:
        raise UndecodableVideo(path, "the video has no duration (no frames?)")
    if info.duration > limits.max_video_seconds:
        raise UndecodableVideo(
            path,
            f"{info.duration / 3600:.1f} h is longer than the limit of "
            f"{limits.max_video_seconds / 3600:.1f} h (ingest.max_video_seconds)",
        )
    if info.width * info.height > limits.max_pixels:
        raise UndecodableVideo(
            path,
            f"frames of {info.width}x{info.height} exceed the limit of "
            f"{limits.max_pixels} pixels (ingest.max_pixels)",
        )


def real_duration(path: Path, info: VideoInfo) -> tuple[float, bool]:
    """(duration, partial): the declared duration, or where the data end when the file is cut short.

    A truncated download keeps its header, which promises the whole duration; clips, frames and
    transcripts must cover only what is there.
    """
    end = decodable_until(path)
    if end is not None and end > 0 and info.duration - end > PARTIAL_SLACK_S:
        return end, True
    return info.duration, False


def register_video(store: Store, settings: Settings, path: Path, video_id: str) -> VideoRecord:
    """Probe ``path`` and upsert its ``videos`` row (keeping the first ``added_at``).

    A file cut short is registered with the duration its data reach (see :func:`real_duration`).
    """
    info = probe(path)
    duration, _ = real_duration(path, info)
    info = replace(info, duration=duration)
    check_limits(path, info, settings)
    existing = store.rows(store.videos, video_id=video_id, columns=["added_at"]).to_pylist()
    record = VideoRecord(
        video_id=video_id,
        path=str(Path(path).resolve()),
        file_name=Path(path).name,
        size_bytes=info.size_bytes,
        duration=info.duration,
        fps=info.fps,
        width=info.width,
        height=info.height,
        rotation=info.rotation,
        has_audio=info.has_audio,
        video_codec=info.video_codec,
        audio_codec=info.audio_codec,
        streams_json=json.dumps(info.streams, default=str),
        added_at=existing[0]["added_at"] if existing else datetime.now(UTC),
    )
    store.upsert(store.videos, [record.model_dump()])
    return record


def _run(ctx: StageContext) -> StageOutcome:
    # The flow registers the video before any stage runs (it needs the record); this stage
    # re-probes so that a probe-version change refreshes the metadata, and records it in the ledger.
    record = register_video(ctx.store, ctx.settings, ctx.path, ctx.video.video_id)
    ctx.video = record
    declared = probe(ctx.path).duration
    details: dict[str, object] = {
        "duration": record.duration,
        "fps": record.fps,
        "size": f"{record.width}x{record.height}",
        "audio": record.has_audio,
        "rotation": record.rotation,
    }
    if declared - record.duration > PARTIAL_SLACK_S:
        details["partial"] = True
        details["note"] = f"partial: only {record.duration:.2f} s of {declared:.2f} s decode (file truncated)"
    return StageOutcome(rows=1, details=details)


PROBE = Stage(
    name="probe",
    version=1,
    run=_run,
    config=lambda s: {
        "max_video_seconds": s.ingest.max_video_seconds,
        "max_pixels": s.ingest.max_pixels,
    },
    description="duration, fps, size, rotation and audio presence; refuses undecodable files",
)
