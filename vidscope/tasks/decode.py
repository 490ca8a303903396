"""Video probing, frame sampling for ingestion, and random frame access by time.

Three entry points, each tuned for its caller:

* :func:`probe` reads the metadata and decodes one frame, so a file that merely *looks* like a
  video is rejected before ingestion spends time on it.
* :func:`sample_frames` streams frames on a fixed time grid (``k / fps``) for ingestion. It uses
  PyAV with threaded decoding and, when the target rate is well below the source rate, asks the
  decoder to skip non-reference frames (most B-frames), which are never needed to decode the rest.
  Frames are converted (and downscaled by swscale) only when they are actually used.
* :func:`frames_at` fetches a few frames at arbitrary times for query-time inspection through
  decord's batched, index-based access, with a PyAV seeking fallback.

All times are seconds from the start of the video stream (its ``start_time``), which is also what
decord reports, so both paths agree on what "frame at 12.5 s" means. Images are RGB ``uint8``
arrays (H, W, 3), rotated upright according to the display matrix.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np

__all__ = [
    "SampledFrame",
    "TruncatedVideo",
    "UndecodableVideo",
    "VideoInfo",
    "decodable_until",
    "frames_at",
    "merge_ranges",
    "probe",
    "sample_frames",
]

# Decoding stops this far (seconds) short of the metadata duration before we call it truncated;
# container durations are often a frame or an audio packet longer than the last video frame.
_TRUNCATION_SLACK_S = 1.0
_TRUNCATION_SLACK_FRACTION = 0.02
# Packets that fail to decode in a row before we give up on the rest of the file.
_MAX_CONSECUTIVE_DECODE_ERRORS = 50
# Full-size frames decord hands over per get_batch call in frames_at.
_DECORD_CHUNK = 8
# AVFMT_NOTIMESTAMPS: raw elementary streams (.h264, .m1v, ...) carry no timestamps.
_AVFMT_NOTIMESTAMPS = 0x0080


# ---------------------------------------------------------------------------- errors


class UndecodableVideo(ValueError):
    """A file that is not a decodable video; str() is a one-line reason naming the file."""

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class TruncatedVideo(UndecodableVideo):
    """Decoding stopped early; attributes: t_reached: float, duration: float."""

    def __init__(self, path: Path | str, t_reached: float, duration: float) -> None:
        self.t_reached = t_reached
        self.duration = duration
        super().__init__(
            path,
            f"decoding stopped at {t_reached:.2f} s of {duration:.2f} s "
            "(file truncated or corrupt; re-download or re-encode it)",
        )


# ---------------------------------------------------------------------------- data


@dataclass(frozen=True)
class VideoInfo:
    """What :func:`probe` learns about a video file."""

    duration: float
    fps: float  # average frame rate
    width: int  # as displayed, i.e. after rotation
    height: int
    rotation: int  # 0/90/180/270 degrees clockwise to display upright
    has_audio: bool
    video_codec: str | None
    audio_codec: str | None
    streams: list[dict[str, Any]]  # one JSON-serialisable dict per stream
    size_bytes: int


@dataclass(frozen=True)
class SampledFrame:
    """One frame chosen by :func:`sample_frames`."""

    index: int  # 0, 1, 2, ... in sampling order
    t: float  # presentation time (s) of the decoded frame actually used
    image: np.ndarray  # RGB uint8 (H, W, 3), upright, max(H, W) <= max_side


# ---------------------------------------------------------------------------- helpers


def _open(path: Path) -> av.container.InputContainer:
    """Open ``path`` for reading, turning every failure into a one-line UndecodableVideo."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such video file")
    if path.is_dir():
        raise UndecodableVideo(path, "is a directory, not a video file")
    if path.stat().st_size == 0:
        raise UndecodableVideo(path, "empty file (0 bytes)")
    try:
        container = av.open(str(path), mode="r")
    except av.FFmpegError as exc:
        raise UndecodableVideo(path, f"not a readable media file ({_ffmpeg_reason(exc)})") from exc
    if not container.streams.video:
        container.close()
        raise UndecodableVideo(path, "has no video stream (audio-only or data file?)")
    fmt = container.format.name
    if fmt == "image2" or fmt.endswith("_pipe"):
        # FFmpeg opens a lone JPEG/PNG as a one-frame "video"; ingesting it as one is a mistake.
        container.close()
        raise UndecodableVideo(path, f"is a still image ({fmt.removesuffix('_pipe')}), not a video")
    return container


def _ffmpeg_reason(exc: Exception) -> str:
    """FFmpeg's own short message, without PyAV's repetition of the file name."""
    return str(getattr(exc, "strerror", None) or exc).splitlines()[0]


def _stream_start(stream: av.video.stream.VideoStream) -> int:
    return int(stream.start_time) if stream.start_time is not None else 0


def _time_base(stream: av.video.stream.VideoStream) -> Fraction:
    """The stream's time base; demuxers always set one, the fallback only satisfies typing."""
    return stream.time_base or Fraction(1, 90_000)


def _frame_time(frame: av.VideoFrame, start_pts: int, time_base: Fraction) -> float | None:
    """Seconds from the stream start, or None when the decoder gave no timestamp."""
    pts = frame.pts
    if pts is None:
        return None
    return float((pts - start_pts) * time_base)


def _cw_rotation(frame: av.VideoFrame | None, stream: av.video.stream.VideoStream) -> int:
    """Clockwise degrees (0/90/180/270) that turn the coded picture upright.

    PyAV (>= 14) reports the display matrix angle counter-clockwise, as FFmpeg does; with older
    PyAV/FFmpeg pairs the demuxer exported the legacy ``rotate`` tag instead, which is clockwise.
    """
    ccw = getattr(frame, "rotation", None) if frame is not None else None
    if ccw is not None:
        return int(round(-float(ccw) / 90.0)) * 90 % 360
    tag = stream.metadata.get("rotate") if stream.metadata else None
    try:
        return int(round(float(tag) / 90.0)) * 90 % 360 if tag else 0
    except ValueError:
        return 0


def _scaled_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    """(w, h) with max(w, h) <= max_side, aspect kept, never upscaled."""
    if max_side <= 0:
        raise ValueError(f"max_side must be positive, got {max_side}")
    scale = min(1.0, max_side / max(width, height))
    if scale >= 1.0:
        return width, height
    return max(1, round(width * scale)), max(1, round(height * scale))


def _to_rgb(frame: av.VideoFrame, max_side: int, rotation_cw: int) -> np.ndarray:
    """Convert a decoded frame to an upright RGB array, downscaled by swscale (never upscaled)."""
    w, h = _scaled_size(frame.width, frame.height, max_side)
    if (w, h) == (frame.width, frame.height):
        image = frame.to_ndarray(format="rgb24")
    else:
        # Scale in YUV first (AREA averages source pixels, so no aliasing on big downscales), then
        # convert the small picture: ~35% cheaper than scaling in RGB, and as close to a box filter.
        small = frame.reformat(width=w, height=h, interpolation="AREA")
        image = small.to_ndarray(format="rgb24")
    return _upright(image, rotation_cw)


def _upright(image: np.ndarray, rotation_cw: int) -> np.ndarray:
    if rotation_cw == 0:
        return image
    # np.rot90 turns counter-clockwise for positive k.
    return np.ascontiguousarray(np.rot90(image, k=-(rotation_cw // 90)))


class _Progress:
    """How far demuxing got and whether anything failed, for telling truncation apart."""

    __slots__ = ("data_end", "failed", "lost")

    def __init__(self) -> None:
        self.data_end = 0.0  # end (s, from the video stream start) of the last packet of any stream
        self.failed = False  # a demux error, or packets that would not decode
        self.lost: list[tuple[float, float]] = []  # time ranges of video packets that would not decode


def _decoded_frames(
    container: av.container.InputContainer,
    stream: av.video.stream.VideoStream,
    progress: _Progress | None = None,
) -> Generator[av.VideoFrame, None, None]:
    """Decode the video stream, skipping packets that fail and stopping where demuxing fails.

    Packets of the other streams are read anyway (the demuxer interleaves them), so we note how
    far they reach: a file whose audio outlasts its video is not a truncated file.
    """
    progress = progress if progress is not None else _Progress()
    video_start = float(_stream_start(stream) * _time_base(stream))
    packets = container.demux()
    errors = 0
    while True:
        try:
            packet = next(packets)
        except StopIteration:
            return
        except av.FFmpegError:
            progress.failed = True
            return  # the container itself is broken from here on: nothing more to read
        if packet.pts is not None and packet.time_base is not None:
            end = float((packet.pts + (packet.duration or 0)) * packet.time_base) - video_start
            progress.data_end = max(progress.data_end, end)
        if packet.stream.index != stream.index:
            continue
        try:
            frames = packet.decode()
        except av.FFmpegError:
            progress.failed = True
            if packet.pts is not None and packet.time_base is not None:
                t0 = float(packet.pts * packet.time_base) - video_start
                progress.lost.append((t0, t0 + float((packet.duration or 0) * packet.time_base)))
            errors += 1
            if errors > _MAX_CONSECUTIVE_DECODE_ERRORS:
                return
            continue
        errors = 0
        for frame in frames:
            if isinstance(frame, av.VideoFrame):
                yield frame


def _duration_by_reading(path: Path, fps: float) -> float:
    """Duration when no metadata gives one: packet timestamps if present, else decoded frames.

    Opens the file afresh because such files (raw elementary streams) often cannot seek.
    """
    container = _open(path)
    try:
        stream = container.streams.video[0]
        start, time_base = _stream_start(stream), _time_base(stream)
        end, packets = 0, 0
        for packet in container.demux(stream):
            if packet.size:
                packets += 1
            if packet.pts is not None:
                end = max(end, packet.pts + (packet.duration or 0))
        if end:
            return float((end - start) * time_base)
        if fps <= 0:
            return 0.0
        # No timestamps at all: each packet of a raw stream is one frame.
        return packets / fps
    except av.FFmpegError:
        return 0.0
    finally:
        container.close()


def merge_ranges(ranges: Sequence[tuple[float, float]], gap: float = 0.5) -> list[tuple[float, float]]:
    """Time ranges sorted and joined where they touch or lie within ``gap`` seconds of each other."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1] + gap:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def decodable_until(path: Path) -> float | None:
    """Where the file's data end (s from the video stream's start), or None if no packet says.

    Reads packets of every stream without decoding them (cheap beside decoding), so a download cut
    short is found at probe time: its header promises the whole duration, its data stop early.
    Every stream counts, so a video track shorter than its audio is not mistaken for a cut file.
    """
    container = _open(path)
    try:
        video_start = float(
            _stream_start(container.streams.video[0]) * _time_base(container.streams.video[0])
        )
        end: float | None = None
        try:
            for packet in container.demux():
                if packet.pts is not None and packet.time_base is not None and packet.size:
                    t = float((packet.pts + (packet.duration or 0)) * packet.time_base) - video_start
                    end = t if end is None else max(end, t)
        except av.FFmpegError:
            pass  # the data stop here
        return end
    finally:
        container.close()


def _stream_dict(stream: Any) -> dict[str, Any]:
    """A small JSON-serialisable description of one stream."""
    ctx = stream.codec_context
    entry: dict[str, Any] = {
        "index": int(stream.index),
        "type": str(stream.type),
        "codec": ctx.name if ctx is not None else None,
    }
    if stream.duration is not None and stream.time_base is not None:
        entry["duration"] = round(float(stream.duration * stream.time_base), 6)
    if stream.type == "video":
        entry.update(
            width=int(ctx.width),
            height=int(ctx.height),
            pix_fmt=ctx.format.name if ctx.format is not None else None,
        )
        if stream.average_rate:
            entry["fps"] = round(float(stream.average_rate), 6)
    elif stream.type == "audio":
        entry.update(sample_rate=int(ctx.sample_rate), channels=int(ctx.channels))
    lang = stream.metadata.get("language") if stream.metadata else None
    if lang:
        entry["language"] = str(lang)
    return entry


# ---------------------------------------------------------------------------- probe


def probe(path: Path) -> VideoInfo:
    """Describe a video file, after checking that its first frame really decodes.

    Raises UndecodableVideo for empty, non-media or video-less files and for files whose first
    frame cannot be decoded; FileNotFoundError when the path does not exist.
    """
    path = Path(path)
    container = _open(path)
    try:
        stream = container.streams.video[0]
        try:
            first = next(_decoded_frames(container, stream), None)
        except av.FFmpegError:
            first = None
        if first is None:
            raise UndecodableVideo(path, "its first video frame cannot be decoded")
        rotation = _cw_rotation(first, stream)

        fps = float(stream.average_rate or stream.guessed_rate or 0)
        duration = 0.0
        if stream.duration is not None:
            duration = float(stream.duration * _time_base(stream))
        elif container.duration is not None:
            # Container duration is in AV_TIME_BASE (microseconds) from the container start.
            duration = container.duration / 1_000_000
        if duration <= 0:
            duration = _duration_by_reading(path, fps)
        if fps <= 0 and stream.frames and duration > 0:
            fps = stream.frames / duration

        width, height = first.width, first.height
        if rotation in (90, 270):
            width, height = height, width
        audio = container.streams.audio
        return VideoInfo(
            duration=duration,
            fps=fps,
            width=width,
            height=height,
            rotation=rotation,
            has_audio=bool(audio),
            video_codec=stream.codec_context.name,
            audio_codec=audio[0].codec_context.name if audio else None,
            streams=[_stream_dict(s) for s in container.streams],
            size_bytes=path.stat().st_size,
        )
    finally:
        container.close()


# ---------------------------------------------------------------------------- sampling


class _Candidate:
    """A decoded frame kept until we know whether a grid point wants it (conversion is lazy)."""

    __slots__ = ("frame", "t", "used")

    def __init__(self, frame: av.VideoFrame, t: float) -> None:
        self.frame, self.t, self.used = frame, t, False


def sample_frames(
    path: Path,
    *,
    fps: float = 2.0,
    max_side: int = 640,
    start: float = 0.0,
    end: float | None = None,
    lost: list[tuple[float, float]] | None = None,
) -> Iterator[SampledFrame]:
    """Stream frames nearest to the times ``k / fps`` in ``[start, end)``, upright and downscaled.

    Each source frame is used at most once, so a source slower than ``fps`` yields about one
    sample per source frame. Memory stays bounded: only the previous decoded frame is kept.
    Raises UndecodableVideo before yielding anything for unusable files, and TruncatedVideo after
    yielding what decodes when decoding stops well before the end. Packets that would not decode
    are skipped; their time ranges are appended to ``lost`` when it is given.
    """
    if not fps > 0:
        raise ValueError(f"fps must be positive, got {fps}")
    if max_side <= 0:
        raise ValueError(f"max_side must be positive, got {max_side}")
    if start < 0:
        raise ValueError(f"start must be >= 0 seconds, got {start}")
    path = Path(path)
    info = probe(path)
    stop = info.duration if end is None else min(end, info.duration)
    if start >= stop:
        return
    interval = 1.0 / info.fps if info.fps > 0 else 1.0 / 30.0

    container = _open(path)
    try:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"  # frame + slice threads; set before the decoder opens
        # Skipping non-reference frames widens the gaps between decoded frames to about two
        # source intervals with x264-style B-pyramids; that keeps every grid point within one
        # interval of a decoded frame only when grid points are at least two intervals apart.
        # Raw streams have no timestamps: frames are timed by counting, so none may be skipped.
        counted = bool(container.format.flags & _AVFMT_NOTIMESTAMPS)
        skip = info.fps >= 2.0 * fps and not counted
        if skip:
            stream.codec_context.skip_frame = "NONREF"
        start_pts, time_base = _stream_start(stream), _time_base(stream)
        if start > 0 and not counted:  # raw streams cannot seek: read them from the start
            container.seek(start_pts + int(start / time_base), stream=stream, backward=True)

        k = math.ceil(start * fps - 1e-9)
        grid = k / fps
        index = 0
        prev: _Candidate | None = None
        progress = _Progress()
        if lost is not None:
            progress.lost = lost  # the caller's list: ranges reach it even if decoding stops early
        frames = _decoded_frames(container, stream, progress)
        n_decoded = 0
        while grid < stop:
            try:
                frame = next(frames)
            except StopIteration:
                break
            t = _frame_time(frame, start_pts, time_base)
            if t is None:
                # Raw streams: every frame is decoded from the start, so its number times the
                # interval is its time (summing intervals would drift by float rounding).
                t = n_decoded * interval if counted else (prev.t + interval if prev else 0.0)
            n_decoded += 1
            if prev is not None and t <= prev.t:
                continue  # duplicate or re-decoded frame after a seek back
            cur = _Candidate(frame, t)
            if skip and prev is not None and t - prev.t > 2.0 * interval * 1.01 and prev.t < grid <= t:
                # This stream has runs of non-reference frames: a grid point fell into a gap
                # wider than we promised. Decode everything from here on, re-reading this gap.
                skip = False
                stream.codec_context.skip_frame = "DEFAULT"
                frames.close()
                container.seek(start_pts + int(prev.t / time_base), stream=stream, backward=True)
                frames = _decoded_frames(container, stream, progress)
                continue
            while grid < stop and t >= grid:
                chosen = prev if prev is not None and grid - prev.t <= t - grid else cur
                if not chosen.used:
                    chosen.used = True
                    yield SampledFrame(index, chosen.t, _to_rgb(chosen.frame, max_side, info.rotation))
                    index += 1
                k += 1
                grid = k / fps
            prev = cur

        if grid < stop:
            # The stream ended before the grid did: the last frame still covers its own interval.
            if prev is not None and not prev.used and grid - prev.t <= interval:
                prev.used = True
                yield SampledFrame(index, prev.t, _to_rgb(prev.frame, max_side, info.rotation))
            reached = prev.t + interval if prev is not None else 0.0
            slack = max(_TRUNCATION_SLACK_S, _TRUNCATION_SLACK_FRACTION * info.duration)
            # Without per-stream durations (Matroska/WebM) the duration is the container's, which
            # a longer audio track stretches; only data that ran out early, or failed, is damage.
            data_short = stop - progress.data_end > slack
            if stop - reached > slack and (progress.failed or data_short):
                raise TruncatedVideo(path, t_reached=reached, duration=info.duration)
    finally:
        container.close()


# ---------------------------------------------------------------------------- random access


def frames_at(path: Path, times: Sequence[float], *, max_side: int = 640) -> list[np.ndarray]:
    """Frames nearest to each of ``times`` (seconds), upright and resized like sample_frames.

    Uses decord's batched access by frame index; falls back to PyAV seeking when decord cannot
    open the file. Raises ValueError for a time outside [0, duration].
    """
    path = Path(path)
    info = probe(path)
    times = [float(t) for t in times]
    for t in times:
        if not (0.0 <= t <= info.duration) or math.isnan(t):
            raise ValueError(
                f"{path}: time {t} s is outside the video; valid range is [0, {info.duration:.3f}] s"
            )
    if not times:
        return []
    try:
        return _frames_at_decord(path, times, max_side, info)
    except _DecordUnavailable:
        return _frames_at_pyav(path, times, max_side, info)


class _DecordUnavailable(Exception):
    """decord is missing or cannot read this file."""


def _frames_at_decord(path: Path, times: list[float], max_side: int, info: VideoInfo) -> list[np.ndarray]:
    try:
        import decord
    except ImportError as exc:  # optional fast path
        raise _DecordUnavailable from exc
    # decord (0.6) applies the display matrix itself, so its frames are already upright (tests
    # pin this down for 90 degrees). Its own scaler aliases on big downscales, so take full-size
    # frames and shrink them with swscale's AREA filter, as sample_frames does.
    w, h = _scaled_size(info.width, info.height, max_side)
    by_index: dict[int, np.ndarray] = {}
    try:
        reader = decord.VideoReader(str(path), ctx=decord.cpu(0), num_threads=0)
        n = len(reader)
        if n == 0:
            raise _DecordUnavailable
        starts = reader.get_frame_timestamp(range(n))[:, 0].astype(np.float64)
        indices = [_nearest_index(starts, t) for t in times]
        # get_batch decodes each distinct index once, in order; small chunks bound the memory
        # that full-size frames take (a 4K frame is 25 MB).
        unique = sorted(set(indices))
        for k in range(0, len(unique), _DECORD_CHUNK):
            chunk = unique[k : k + _DECORD_CHUNK]
            for i, image in zip(chunk, reader.get_batch(chunk).asnumpy(), strict=True):
                by_index[i] = _shrink_rgb(image, w, h)
    except decord.DECORDError as exc:
        raise _DecordUnavailable from exc
    return [by_index[i].copy() for i in indices]


def _shrink_rgb(image: np.ndarray, width: int, height: int) -> np.ndarray:
    if image.shape[1] == width and image.shape[0] == height:
        return image
    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
    return frame.reformat(width=width, height=height, interpolation="AREA").to_ndarray()


def _nearest_index(starts: np.ndarray, t: float) -> int:
    """Index of the frame whose start time is nearest to ``t`` (starts sorted ascending).

    decord reports float32 times, so differences within float32 precision count as ties, and
    ties go to the earlier frame like in sample_frames.
    """
    i = int(np.searchsorted(starts, t))
    if i <= 0:
        return 0
    if i >= len(starts):
        return len(starts) - 1
    tolerance = 4e-7 * max(1.0, abs(t))
    return i if starts[i] - t < t - starts[i - 1] - tolerance else i - 1


class _ForwardReader:
    """Decodes forward from a seek point and finds the frame nearest to increasing times.

    Raw elementary streams (no timestamps, no seeking) are reopened and read from the start
    instead of seeking, and their frames are timed by counting.
    """

    def __init__(self, path: Path, info: VideoInfo) -> None:
        self.path, self.info = path, info
        self.interval = 1.0 / info.fps if info.fps > 0 else 1.0 / 30.0
        self.container = _open(path)
        self.container.streams.video[0].thread_type = "AUTO"  # before the decoder opens
        self.seekable = not (self.container.format.flags & _AVFMT_NOTIMESTAMPS)
        self.frames: Iterator[av.VideoFrame] | None = None
        self.progress = _Progress()
        self.prev: _Candidate | None = None  # the last frame read before the current target
        self.pending: _Candidate | None = None  # a frame read past the previous target
        self.count = 0  # frames decoded since the last restart

    def close(self) -> None:
        self.container.close()

    def _restart(self, target: float) -> None:
        if self.seekable:
            stream = self.container.streams.video[0]
            offset = int(target / _time_base(stream))
            self.container.seek(_stream_start(stream) + offset, stream=stream, backward=True)
        else:
            self.container.close()
            self.container = _open(self.path)
            self.container.streams.video[0].thread_type = "AUTO"
        stream = self.container.streams.video[0]
        self.progress = _Progress()
        self.frames = _decoded_frames(self.container, stream, self.progress)
        self.prev = self.pending = None
        self.count = 0

    def _next(self) -> _Candidate | None:
        if self.pending is not None:
            cur, self.pending = self.pending, None
            return cur
        assert self.frames is not None  # set by _restart before any read
        frame = next(self.frames, None)
        if frame is None:
            return None
        stream = self.container.streams.video[0]
        t = _frame_time(frame, _stream_start(stream), _time_base(stream))
        if t is None:  # only raw streams, which are always read from their start: count frames
            t = self.count * self.interval
        self.count += 1
        return _Candidate(frame, t)

    def nearest(self, target: float) -> _Candidate:
        """The decoded frame nearest to ``target``; ties go to the earlier frame."""
        prev = self.prev
        # Decoding forward is cheaper than seeking when the next time is close ahead.
        if (
            self.frames is None
            or prev is None
            or target < prev.t
            or (self.seekable and target - prev.t > 2.0)
        ):
            self._restart(target)
        while True:
            cur = self._next()
            if cur is None:  # end of the decodable data
                prev = self.prev
                damaged = self.progress.failed or self.progress.data_end < target - self.interval
                if prev is None or (target - prev.t > self.interval and damaged):
                    reached = prev.t + self.interval if prev is not None else 0.0
                    raise TruncatedVideo(self.path, t_reached=reached, duration=self.info.duration)
                return prev  # the video simply ends here (other streams run longer)
            if cur.t < target:
                self.prev = cur
                continue
            prev = self.prev
            if prev is not None and target - prev.t <= cur.t - target:
                self.pending = cur
                return prev
            self.prev = cur
            return cur


def _frames_at_pyav(path: Path, times: list[float], max_side: int, info: VideoInfo) -> list[np.ndarray]:
    """Seek to the keyframe before each time and decode forward to the nearest frame."""
    out: list[np.ndarray] = [np.empty(0, np.uint8)] * len(times)
    reader = _ForwardReader(path, info)
    try:
        last: _Candidate | None = None  # the frame chosen for the previous (smaller) time
        for i in sorted(range(len(times)), key=times.__getitem__):
            target = times[i]
            # Times are visited in order, so no frame lies between the previous time and
            # ``last``: when this time is not past it, ``last`` is the nearest frame again.
            if last is None or target > last.t:
                last = reader.nearest(target)
            out[i] = _to_rgb(last.frame, max_side, info.rotation)
        return out
    finally:
        reader.close()
