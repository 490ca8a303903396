"""Tests for vidscope.tasks.decode on the shared sample videos and on videos made here.

Generated videos come from ffmpeg's lavfi test sources (or PyAV for exact VFR timestamps) and are
small (320x240, a few seconds) so the module stays fast on 2 cores.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from vidscope.tasks.decode import (
    SampledFrame,
    TruncatedVideo,
    UndecodableVideo,
    _frames_at_pyav,
    frames_at,
    probe,
    sample_frames,
)

VIDEOS = Path("/work/shared/videos")
CAR = VIDEOS / "car-detection.mp4"  # 768x432, 12.5 fps, 30.2 s, with audio
BOTTLE = VIDEOS / "bottle-detection.mp4"  # 640x360, 29.8 fps, 39.9 s, no audio
MILK = VIDEOS / "milk.mkv"  # 640x480, 30 fps, 1.7 s, duration only in the container

needs_samples = pytest.mark.skipif(not CAR.exists(), reason="shared sample videos not present")
needs_ffmpeg = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg not installed")


def _ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-v", "error", "-y", *args], check=True, capture_output=True)


def _testsrc(
    path: Path,
    *,
    seconds: float = 4,
    rate: int = 25,
    size: str = "320x240",
    extra: tuple[str, ...] = (),
) -> Path:
    _ffmpeg(
        "-f",
        "lavfi",
        "-i",
        f"testsrc2=size={size}:rate={rate}",
        "-t",
        str(seconds),
        "-c:v",
        "libx264",
        "-preset",
        "veryfast",
        "-pix_fmt",
        "yuv420p",
        *extra,
        str(path),
    )
    return path


def _grid_errors(frames: list[SampledFrame], fps: float, start: float = 0.0) -> list[float]:
    """Distance of each sample from the grid point it was taken for, in seconds.

    Samples are taken for grid points in order, but a grid point may be skipped (no reuse of a
    frame), so compare each sample with its nearest grid point at or after ``start``.
    """
    return [abs(f.t - max(start, round(f.t * fps) / fps)) for f in frames]


# ---------------------------------------------------------------------------- probe


@needs_samples
def test_probe_sample_videos() -> None:
    car = probe(CAR)
    assert car.duration == pytest.approx(30.2, abs=0.1)
    assert car.fps == pytest.approx(12.5)
    assert (car.width, car.height, car.rotation) == (768, 432, 0)
    assert car.has_audio and car.video_codec == "h264" and car.audio_codec == "aac"
    assert [s["type"] for s in car.streams] == ["video", "audio"]
    assert car.size_bytes == CAR.stat().st_size
    json.dumps(car.streams)  # must be storable as JSON

    bottle = probe(BOTTLE)
    assert bottle.duration == pytest.approx(39.9, abs=0.1)
    assert bottle.fps == pytest.approx(29.8, abs=0.1)
    assert not bottle.has_audio and bottle.audio_codec is None

    milk = probe(MILK)  # mkv: no stream duration, only the container's
    assert milk.duration == pytest.approx(1.7, abs=0.1)
    assert (milk.width, milk.height) == (640, 480)


@needs_ffmpeg
def test_probe_rejects_bad_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    text = tmp_path / "notes.mp4"
    text.write_text("this is not a video\n" * 50)
    audio = tmp_path / "tone.m4a"
    _ffmpeg("-f", "lavfi", "-i", "sine=frequency=440:duration=1", "-c:a", "aac", str(audio))
    photo = tmp_path / "photo.jpg"
    _ffmpeg("-f", "lavfi", "-i", "testsrc2=size=320x240", "-frames:v", "1", str(photo))
    photo = photo.rename(tmp_path / "photo.mp4")

    cases = [
        (empty, "empty"),
        (text, "not a readable"),
        (audio, "no video stream"),
        (photo, "still image"),
    ]
    for path, words in cases:
        with pytest.raises(UndecodableVideo) as info:
            probe(path)
        message = str(info.value)
        assert path.name in message and words in message and "\n" not in message
        with pytest.raises(UndecodableVideo):
            next(sample_frames(path))
    with pytest.raises(FileNotFoundError):
        probe(tmp_path / "missing.mp4")


@needs_ffmpeg
def test_probe_rejects_undecodable_first_frame(tmp_path: Path) -> None:
    """A valid container whose video packets are garbage must fail at probe time."""
    good = _testsrc(tmp_path / "good.mkv", seconds=1)
    data = bytearray(good.read_bytes())
    # Overwrite everything after the header region with noise: the mkv still opens, but the
    # H.264 packets (SPS/PPS included in the first keyframe) are destroyed.
    rng = np.random.default_rng(0)
    cut = 600
    data[cut:] = rng.integers(0, 256, len(data) - cut, dtype=np.uint8).tobytes()
    broken = tmp_path / "broken.mkv"
    broken.write_bytes(bytes(data))
    with pytest.raises(UndecodableVideo) as info:
        probe(broken)
    assert "broken.mkv" in str(info.value)


# ---------------------------------------------------------------------------- sample_frames


@needs_samples
@pytest.mark.parametrize("path", [CAR, BOTTLE, MILK], ids=lambda p: p.name)
def test_sample_frames_grid(path: Path) -> None:
    info = probe(path)
    frames = list(sample_frames(path, fps=2.0, max_side=320))
    assert abs(len(frames) - info.duration * 2.0) <= 1
    assert [f.index for f in frames] == list(range(len(frames)))
    interval = 1.0 / info.fps
    for f in frames:
        # Sample k is the nearest usable frame to k / 2: within one source-frame interval.
        assert abs(f.t - f.index / 2.0) <= interval + 1e-3, (f.index, f.t)
        h, w, c = f.image.shape
        assert c == 3 and f.image.dtype == np.uint8
        assert max(h, w) == 320
        assert w / h == pytest.approx(info.width / info.height, abs=0.01)
    assert len({f.t for f in frames}) == len(frames)


@needs_samples
def test_sample_frames_never_reuses_frames_when_source_is_slower() -> None:
    # car-detection is 12.5 fps; asking for 25 fps must give each source frame once at most.
    frames = list(sample_frames(CAR, fps=25.0, max_side=160))
    times = [f.t for f in frames]
    assert times == sorted(set(times))
    assert abs(len(frames) - 377) <= 1  # 377 source frames
    assert max(_grid_errors(frames, 25.0)) <= 1 / 12.5


@needs_samples
def test_sample_frames_window_and_no_upscaling() -> None:
    frames = list(sample_frames(CAR, fps=1.0, max_side=4000, start=10.0, end=20.0))
    assert [round(f.t) for f in frames] == list(range(10, 20))
    assert all(f.image.shape == (432, 768, 3) for f in frames)  # native size, not upscaled
    assert not list(sample_frames(CAR, start=40.0))  # past the end: nothing
    for bad in ({"fps": 0.0}, {"max_side": 0}, {"start": -1.0}):
        with pytest.raises(ValueError):
            next(sample_frames(CAR, **bad))  # type: ignore[arg-type]


@needs_ffmpeg
def test_skip_fallback_with_runs_of_non_reference_frames(tmp_path: Path) -> None:
    """Three non-reference B-frames in a row leave gaps of 4 frames when skipped; the sampler
    must notice a grid point inside such a gap and decode fully instead of drifting."""
    path = _testsrc(
        tmp_path / "flat_b.mp4",
        seconds=4,
        rate=30,
        extra=("-x264-params", "bframes=3:b-pyramid=0:b-adapt=0:scenecut=0"),
    )
    frames = list(sample_frames(path, fps=2.0, max_side=160))
    assert len(frames) == 8
    # Frame 15 (t=0.5) is a B-frame; exact nearest frames are on the grid itself.
    assert max(_grid_errors(frames, 2.0)) <= 0.5 / 30 + 1e-6


@needs_ffmpeg
def test_rotation_upright_matches_ffmpeg(tmp_path: Path) -> None:
    plain = _testsrc(tmp_path / "plain.mp4", seconds=1, size="320x240")
    rotated = tmp_path / "rotated.mp4"
    _ffmpeg("-i", str(plain), "-c", "copy", "-metadata:s:v", "rotate=90", str(rotated))
    info = probe(rotated)
    assert (info.width, info.height) == (240, 320)
    assert info.rotation in (90, 270)

    # What ffmpeg shows a viewer (it auto-rotates) is the ground truth for "upright".
    raw = subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-i",
            str(rotated),
            "-frames:v",
            "1",
            "-f",
            "rawvideo",
            "-pix_fmt",
            "rgb24",
            "-",
        ],
        check=True,
        capture_output=True,
    ).stdout
    upright = np.frombuffer(raw, np.uint8).reshape(320, 240, 3).astype(int)

    first = next(sample_frames(rotated, max_side=640))
    assert first.image.shape == (320, 240, 3)
    assert np.abs(first.image.astype(int) - upright).mean() < 3.0
    # Turned the other way it would not match: the check above can fail.
    assert np.abs(np.rot90(first.image, 2).astype(int) - upright).mean() > 20.0

    small = next(sample_frames(rotated, max_side=160))
    assert small.image.shape == (160, 120, 3)
    (via_decord,) = frames_at(rotated, [first.t], max_side=640)
    assert np.abs(via_decord.astype(int) - upright).mean() < 3.0


def _write_vfr(path: Path, pts_ms: list[int]) -> None:
    """An H.264 video whose frames sit exactly at ``pts_ms`` (variable frame rate)."""
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 160, 120, "yuv420p"
        stream.options = {"bf": "0"}  # no reordering: the muxer then gets exact durations
        stream.time_base = Fraction(1, 1000)
        stream.codec_context.time_base = Fraction(1, 1000)
        # Each frame lasts until the next one (the last as long as the one before it), so the
        # muxer writes a stream duration that ends at the last frame's end.
        ends = [*pts_ms[1:], pts_ms[-1] + (pts_ms[-1] - pts_ms[-2])]
        lasts = {pts: end - pts for pts, end in zip(pts_ms, ends, strict=True)}

        def mux(packets: list[av.Packet]) -> None:
            for packet in packets:
                packet.duration = lasts[int(packet.pts or 0)]
                out.mux(packet)

        for i, pts in enumerate(pts_ms):
            image = np.full((120, 160, 3), (i * 9) % 256, np.uint8)
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            frame.pts, frame.time_base = pts, Fraction(1, 1000)
            mux(stream.encode(frame))
        mux(stream.encode())


def test_vfr_sampling_picks_nearest_frames(tmp_path: Path) -> None:
    # Bursts at 50 fps alternating with stretches at 5 fps, 6 s in all.
    pts: list[int] = []
    t = 0
    while t < 6000:
        step = 20 if (t // 1000) % 2 == 0 else 200
        pts.append(t)
        t += step
    path = tmp_path / "vfr.mp4"
    _write_vfr(path, pts)
    info = probe(path)
    assert info.duration == pytest.approx(6.0, abs=0.25)

    frames = list(sample_frames(path, fps=4.0, max_side=640))
    times = np.array(pts) / 1000.0
    for f in frames:
        # Every sample is a real frame time, and the nearest one to its grid point.
        assert np.min(np.abs(times - f.t)) < 1e-6
    assert len(frames) == pytest.approx(24, abs=1)
    assert [f.t for f in frames] == sorted({f.t for f in frames})
    for k, f in enumerate(frames):
        g = round(f.t * 4) / 4
        assert abs(f.t - g) <= np.min(np.abs(times - g)) + 1e-6, (k, f.t)

    # Random access at the grid times lands on the same frames (each has its own grey level).
    grid = [round(f.t * 4) / 4 for f in frames]
    for got, want in zip(frames_at(path, grid), frames, strict=True):
        assert abs(float(got.mean()) - float(want.image.mean())) < 2.0


@needs_ffmpeg
def test_raw_h264_stream_without_timestamps(tmp_path: Path) -> None:
    """A raw .h264 elementary stream has no timestamps, no duration and cannot seek."""
    mp4 = _testsrc(tmp_path / "src.mp4", seconds=4, rate=25)
    raw = tmp_path / "stream.h264"
    _ffmpeg("-i", str(mp4), "-c", "copy", str(raw))
    info = probe(raw)
    assert info.duration == pytest.approx(4.0, abs=0.05) and info.fps == pytest.approx(25)
    frames = list(sample_frames(raw, fps=2.0, max_side=160))
    assert len(frames) == 8
    assert max(_grid_errors(frames, 2.0)) <= 0.5 / 25 + 1e-9
    # Same pictures as the mp4 it came from, at the same times (the PyAV path scales the same
    # way, so the saturated test pattern compares exactly).
    reference = _frames_at_pyav(mp4, [f.t for f in frames], 160, probe(mp4))
    for got, want in zip(frames, reference, strict=True):
        assert np.abs(got.image.astype(int) - want.astype(int)).mean() < 1.0
    later = list(sample_frames(raw, fps=2.0, max_side=160, start=2.0))
    assert [round(f.t, 2) for f in later] == [round(f.t, 2) for f in frames[4:]]
    picks = [frames[6], frames[1]]  # backwards: the reader must restart from the beginning
    for got, want in zip(frames_at(raw, [f.t for f in picks], max_side=160), picks, strict=True):
        assert np.abs(got.astype(int) - want.image.astype(int)).mean() < 1.0


# ---------------------------------------------------------------------------- truncation


@needs_ffmpeg
def test_truncated_faststart_mp4_yields_then_raises(tmp_path: Path) -> None:
    full = _testsrc(tmp_path / "full.mp4", seconds=8, extra=("-movflags", "+faststart"))
    half = tmp_path / "half.mp4"
    data = full.read_bytes()
    half.write_bytes(data[: len(data) // 2])

    assert probe(half).duration == pytest.approx(8.0, abs=0.1)  # the index still claims 8 s
    got: list[SampledFrame] = []
    with pytest.raises(TruncatedVideo) as info:
        for frame in sample_frames(half, fps=2.0, max_side=160):
            got.append(frame)
    assert len(got) >= 4  # what decoded was yielded first
    err = info.value
    assert "half.mp4" in str(err) and "\n" not in str(err)
    assert err.duration == pytest.approx(8.0, abs=0.1)
    assert got[-1].t <= err.t_reached < 7.0
    assert isinstance(err, UndecodableVideo)

    # Random access: times inside the decodable part work, times past it say why they fail.
    (early,) = frames_at(half, [got[1].t], max_side=160)
    assert np.abs(early.astype(int) - got[1].image.astype(int)).mean() < 2.0
    with pytest.raises(TruncatedVideo):
        frames_at(half, [7.5])


@needs_ffmpeg
def test_truncated_mp4_without_index_is_undecodable(tmp_path: Path) -> None:
    full = _testsrc(tmp_path / "full.mp4", seconds=4)  # moov atom written at the end
    half = tmp_path / "cut.mp4"
    data = full.read_bytes()
    half.write_bytes(data[: len(data) // 2])
    with pytest.raises(UndecodableVideo) as info:
        probe(half)
    assert "cut.mp4" in str(info.value)


@needs_ffmpeg
def test_matroska_audio_longer_than_video_is_not_truncation(tmp_path: Path) -> None:
    """Matroska has no per-stream durations: a 6 s audio track makes the container 6 s long
    while the video lasts 3 s. That is a complete file; cutting it in half is not."""
    path = tmp_path / "long_audio.mkv"
    _ffmpeg("-f", "lavfi", "-t", "3", "-i", "testsrc2=size=320x240:rate=25", "-f", "lavfi",
            "-i", "sine=frequency=440:duration=6", "-c:v", "libx264", "-preset", "veryfast",
            "-c:a", "aac", str(path))  # fmt: skip
    info = probe(path)
    assert info.duration == pytest.approx(6.0, abs=0.2) and info.has_audio
    frames = list(sample_frames(path, fps=2.0, max_side=160))
    assert len(frames) == 6 and frames[-1].t == pytest.approx(2.5, abs=0.05)
    (tail,) = frames_at(path, [5.0], max_side=160)  # past the video: its last frame
    assert tail.shape == frames[-1].image.shape

    cut = tmp_path / "cut.mkv"
    data = path.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(TruncatedVideo) as err:
        for _ in sample_frames(cut, fps=2.0, max_side=160):
            pass
    assert "cut.mkv" in str(err.value) and err.value.t_reached < 2.5


@needs_samples
def test_complete_videos_do_not_raise_truncated() -> None:
    # Container durations are a little longer than the last frame; that is not truncation.
    assert len(list(sample_frames(MILK, fps=30.0, max_side=64))) == pytest.approx(52, abs=1)


# ---------------------------------------------------------------------------- frames_at


@needs_samples
@pytest.mark.parametrize("path", [CAR, BOTTLE], ids=lambda p: p.name)
def test_frames_at_matches_sample_frames(path: Path) -> None:
    sampled = list(sample_frames(path, fps=2.0, max_side=320))
    picks = sampled[3::9]
    # Out of order and repeated on purpose: results follow the order asked for.
    times = [f.t for f in reversed(picks)] + [picks[0].t]
    images = frames_at(path, times, max_side=320)
    expected = [f.image for f in reversed(picks)] + [picks[0].image]
    assert len(images) == len(times)
    for got, want in zip(images, expected, strict=True):
        assert got.shape == want.shape
        assert np.abs(got.astype(int) - want.astype(int)).mean() < 1.0
    # A clearly different frame does differ, so the comparison above means something.
    assert np.abs(images[0].astype(int) - expected[-1].astype(int)).mean() > 2.0


@needs_samples
def test_frames_at_pyav_fallback_matches() -> None:
    sampled = list(sample_frames(CAR, fps=2.0, max_side=320))
    picks = [sampled[i] for i in (50, 2, 3, 40)]
    info = probe(CAR)
    images = _frames_at_pyav(CAR, [f.t for f in picks], 320, info)
    for got, want in zip(images, picks, strict=True):
        assert np.abs(got.astype(int) - want.image.astype(int)).mean() < 1.0


@needs_samples
def test_frames_at_rejects_out_of_range_times() -> None:
    for bad in (-0.5, 31.0):
        with pytest.raises(ValueError) as info:
            frames_at(CAR, [1.0, bad])
        message = str(info.value)
        assert "car-detection.mp4" in message and "[0, 30.160]" in message
    assert frames_at(CAR, []) == []
    (last,) = frames_at(CAR, [probe(CAR).duration], max_side=100)
    assert last.shape == (56, 100, 3)
