"""CrossVid PSS: the segments of one video, cut into clips that an agent sees as separate videos.

A PSS record names one video and its steps' times in shuffled order (``extra["segments"]``, read
by :mod:`vidscope.evaluation.loaders.multivideo`). As the paper's prompt shows the segments as
separate clips ("Segment 1:", "Segment 2:", ...), the ``evaluate`` flow cuts each segment into a
file of its own under the run's folder (:data:`FOLDER`) and asks the item about those files, in
the record's order: segment k is the k-th video of the request. A clip's name is a hash of its
source file and times, so neither the name nor the file (re-encoded from 0 s, no metadata;
:func:`~vidscope.tasks.cut.cut_clip`) tells where the segment sat in the video or which came
first. Clips already cut (same source, same times) are reused, also across runs' resumptions.

A segment that ends after the video, or a video that cannot be cut, fails that item with one
line (the run's per-item failure: reported, and scored 0 like an unanswered question).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import av

from vidscope.core.hashing import stable_hash
from vidscope.evaluation.items import BenchmarkItem
from vidscope.evaluation.loaders.multivideo import SEGMENTS
from vidscope.tasks.cut import cut_clip
from vidscope.tasks.decode import UndecodableVideo, probe

#: Where a run keeps its cut segments (under the run directory).
FOLDER = "segments"
#: A segment may end this far after the probed duration: annotations round times, and a video's
#: duration is its last frame's time plus one frame.
DURATION_SLACK_S = 0.5


def clip_name(source: Path, start: float, end: float) -> str:
    """A neutral file name for the segment ``[start, end]`` of the file ``source``: it reveals
    neither; a source replaced by another file (size or modification time) gets new clips."""
    stat = source.stat()
    return f"segment-{stable_hash(str(source), stat.st_size, stat.st_mtime_ns, start, end)}.mp4"


@dataclass
class SegmentClips:
    """Items with their segments as clips, where each clip is, and the items that failed."""

    items: list[BenchmarkItem]
    found: dict[str, Path] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)


def cut_segments(items: Sequence[BenchmarkItem], found: Mapping[str, Path], folder: Path) -> SegmentClips:
    """``items`` with each segmented item's videos replaced by clips of its segments (cut into
    ``folder`` unless already there), in its segments' order; other items pass unchanged.
    ``found``: where each benchmark video is. A segment outside its video, or a video that cannot
    be cut, is a failure of that item (one line), and the item is left out."""
    out = SegmentClips(items=[])
    durations: dict[str, float | str] = {}  # source -> duration, or why it cannot be read
    for item in items:
        segments = item.extra.get(SEGMENTS)
        if not segments:
            out.items.append(item)
            continue
        source = item.video_ids[0]
        try:
            names = [_clip(source, found[source], start, end, folder, durations) for start, end in segments]
        except _SegmentError as exc:
            out.failures[item.question_id] = str(exc)
            continue
        for name in names:
            out.found[name] = folder / name
        out.items.append(item.model_copy(update={"video_ids": tuple(names)}))
    return out


class _SegmentError(ValueError):
    pass


def _clip(
    source: str, path: Path, start: float, end: float, folder: Path, durations: dict[str, float | str]
) -> str:
    """The clip of ``[start, end]`` of ``source`` (at ``path``), cut when not there yet."""
    if source not in durations:
        try:
            durations[source] = probe(path).duration
        except (OSError, UndecodableVideo) as exc:
            durations[source] = f"video {source} cannot be read ({exc})"
    duration = durations[source]
    if isinstance(duration, str):
        raise _SegmentError(duration)
    if end > duration + DURATION_SLACK_S:
        raise _SegmentError(
            f"segment {start:g}-{end:g} s is outside the video {source} ({duration:.1f} s long)"
        )
    name = clip_name(path, start, end)
    if not (folder / name).is_file():
        try:
            cut_clip(path, folder / name, start, min(end, duration))
        except (OSError, ValueError, av.FFmpegError) as exc:
            reason = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise _SegmentError(f"segment {start:g}-{end:g} s of {source} cannot be cut ({reason})") from exc
    return name
