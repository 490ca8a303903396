"""Synthetic media: spoken WAVs, videos with legible on-screen text, broken files.

Used by the tests and by ``vidscope demo`` (the bundled sample videos hold no speech or text).
Every helper writes to the path its caller gives and returns it. The videos are small (640x360, a
few seconds) so they are quick to make and to ingest on 2 cores.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator, Sequence
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
from PIL import Image, ImageDraw, ImageFont

#: A bold sans font renders the cleanest glyphs for OCR; Debian's fonts-dejavu ships it.
_FONT_CANDIDATES = (
    Path("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"),
    Path("/usr/share/fonts/dejavu/DejaVuSans-Bold.ttf"),
)

_AUDIO_RATE = 16000


def speech_wav(text: str, path: Path, *, voice: str = "en", rate_wpm: int = 150) -> Path:
    """Speak ``text`` with espeak-ng into a WAV file at ``path``."""
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise RuntimeError("espeak-ng is not installed; run `apt-get install -y espeak-ng`")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [exe, "-v", voice, "-s", str(rate_wpm), "-w", str(path), text],
        check=True,
        capture_output=True,
    )
    return path


def narration_wav(lines: Sequence[tuple[float, str]], path: Path, *, duration: float) -> Path:
    """A ``duration``-second 16 kHz WAV with each ``(t, text)`` spoken by espeak-ng from ``t`` s.

    A line still speaking when the next one starts is cut there, so each one stays near its time.
    """
    import wave

    path = Path(path)
    total = round(duration * _AUDIO_RATE)
    mix = np.zeros(total, dtype=np.float32)
    starts = [round(t * _AUDIO_RATE) for t, _ in lines] + [total]
    for i, (_, text) in enumerate(lines):
        spoken = speech_wav(text, path.with_name(f"{path.stem}.line{i}.wav"))
        room = max(0, min(starts[i + 1], total) - starts[i])
        mix[starts[i] : starts[i] + room] = _load_mono(spoken, room)
        spoken.unlink()
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(_AUDIO_RATE)
        out.writeframes((np.clip(mix, -1.0, 1.0) * 32767).astype("<i2").tobytes())
    return path


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    for candidate in _FONT_CANDIDATES:
        if candidate.exists():
            return ImageFont.truetype(str(candidate), size)
    return ImageFont.load_default(size=size)


#: The colour of the square that walks along the bottom edge of every synthetic frame.
_SQUARE = (200, 60, 60)


def _text_box(
    text: str, size: tuple[int, int], font: ImageFont.FreeTypeFont | ImageFont.ImageFont
) -> tuple[int, int, np.ndarray]:
    """``text`` in black on a white box, centred in a frame of ``size``: the box's corner and pixels.

    Drawn once per text and pasted into each frame that shows it (a frame's own drawing would
    give the same pixels: the glyphs lie inside the box, which covers what is behind it).
    """
    width, height = size
    pad = max(6, height // 40)
    measure = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    left, top, right, bottom = measure.textbbox((0, 0), text, font=font)
    # A line wider than the frame would be cut off (and unreadable); shrink the font to fit.
    if right - left + 2 * pad > width and isinstance(font, ImageFont.FreeTypeFont):
        fitted = max(8, int(font.size * (width - 4 * pad) / (right - left)))
        font = font.font_variant(size=fitted)
        left, top, right, bottom = measure.textbbox((0, 0), text, font=font)
    text_w, text_h = int(right - left), int(bottom - top)  # whole pixels for a TrueType font
    box = Image.new("RGB", (text_w + 2 * pad + 1, text_h + 2 * pad + 1), (255, 255, 255))
    ImageDraw.Draw(box).text((pad - left, pad - top), text, font=font, fill=(0, 0, 0))
    return (width - text_w) // 2 - pad, (height - text_h) // 2 - pad, np.asarray(box)


def _paste(frame: np.ndarray, x0: int, y0: int, pixels: np.ndarray) -> None:
    """Copy ``pixels`` into ``frame`` with their top-left corner at (x0, y0), clipped to the frame."""
    height, width = frame.shape[:2]
    top, left = max(0, y0), max(0, x0)
    bottom, right = min(height, y0 + pixels.shape[0]), min(width, x0 + pixels.shape[1])
    if bottom > top and right > left:
        frame[top:bottom, left:right] = pixels[top - y0 : bottom - y0, left - x0 : right - x0]


def _draw_frame(frame: np.ndarray, index: int, text_box: tuple[int, int, np.ndarray] | None) -> np.ndarray:
    """Draw frame ``index``'s walking square, then its text box if any, onto ``frame`` (H x W x 3)."""
    height, width = frame.shape[:2]
    # A small square that walks along the bottom edge, so consecutive frames always differ
    # (scene-change and dedup logic must not see a frozen video).
    side = max(8, height // 20)
    x = (index * 7) % max(1, width - side)
    frame[max(0, height - side - 4) : max(0, height - 3), x : x + side + 1] = _SQUARE
    if text_box is not None:
        _paste(frame, *text_box)
    return frame


def _load_mono(wav: Path, n_samples: int) -> np.ndarray:
    """The WAV's audio as mono float32 at 16 kHz, silence-padded or trimmed to ``n_samples``."""
    chunks: list[np.ndarray] = []
    resampler = av.AudioResampler(format="flt", layout="mono", rate=_AUDIO_RATE)
    with av.open(str(wav)) as container:
        for frame in container.decode(audio=0):
            for out in resampler.resample(frame):
                chunks.append(out.to_ndarray().reshape(-1))
        for out in resampler.resample(None):
            chunks.append(out.to_ndarray().reshape(-1))
    samples = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)
    result = np.zeros(n_samples, dtype=np.float32)
    n = min(n_samples, samples.size)
    result[:n] = samples[:n]
    return result


def text_video(
    path: Path,
    *,
    duration: float,
    size: tuple[int, int] = (640, 360),
    fps: int = 25,
    texts: Sequence[tuple[float, float, str]] = (),
    audio: Path | None = None,
    background: tuple[int, int, int] = (30, 30, 30),
    footage: Path | None = None,
    cuts: Sequence[tuple[float, tuple[int, int, int]]] = (),
) -> Path:
    """Write an H.264 MP4 showing each ``(t0, t1, text)`` as black text on a white box in [t0, t1).

    The text is about 1/8 of the frame high. With ``audio`` (a WAV) the video gets an AAC track
    starting at t=0, padded with silence or trimmed to ``duration``. With ``footage`` (a video
    file) the background is that video's frames, looped and stretched to ``size``, instead of a
    flat ``background`` colour: real moving pictures, as behind slides or titles in a recording.
    Each ``cuts`` entry ``(t, colour)`` is a hard cut: from ``t`` on the background is ``colour``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    width, height = size
    font = _font(max(10, height // 8))
    n_frames = max(1, round(duration * fps))
    with av.open(str(path), mode="w") as container:
        vstream = container.add_stream("libx264", rate=fps)
        vstream.width, vstream.height = width, height
        vstream.pix_fmt = "yuv420p"
        vstream.options = {"preset": "ultrafast", "crf": "23"}
        astream = None
        if audio is not None:
            astream = container.add_stream("aac", rate=_AUDIO_RATE)
            astream.layout = "mono"
        bases = _looped_frames(footage, size) if footage is not None else None
        boxes: dict[str, tuple[int, int, np.ndarray]] = {}
        latest_first = sorted(cuts, reverse=True)
        for index in range(n_frames):
            t = index / fps
            shown = next((text for t0, t1, text in texts if t0 <= t < t1), None)
            if shown and shown not in boxes:
                boxes[shown] = _text_box(shown, size, font)
            if bases is not None:
                base = next(bases)
            else:
                colour = next((c for start, c in latest_first if start <= t), background)
                base = np.full((height, width, 3), colour, dtype=np.uint8)
            rgb = _draw_frame(base, index, boxes[shown] if shown else None)
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            frame.pts = index
            frame.time_base = Fraction(1, fps)
            for packet in vstream.encode(frame):
                container.mux(packet)
        for packet in vstream.encode(None):
            container.mux(packet)
        if astream is not None and audio is not None:
            samples = _load_mono(Path(audio), round(duration * _AUDIO_RATE))
            block = 1024  # the AAC encoder's frame size
            for start in range(0, samples.size, block):
                chunk = samples[start : start + block]
                aframe = av.AudioFrame.from_ndarray(chunk.reshape(1, -1), format="flt", layout="mono")
                aframe.sample_rate = _AUDIO_RATE
                aframe.pts = start
                aframe.time_base = Fraction(1, _AUDIO_RATE)
                for packet in astream.encode(aframe):
                    container.mux(packet)
            for packet in astream.encode(None):
                container.mux(packet)
    return path


def _looped_frames(path: Path, size: tuple[int, int]) -> Iterator[np.ndarray]:
    """The frames of the video at ``path`` as RGB at ``size``, from the start again whenever it ends."""
    width, height = size
    while True:
        with av.open(str(path)) as container:
            count = 0
            for frame in container.decode(video=0):
                count += 1
                # Scaled in the decoder's format, then converted: 1.6 ms a frame instead of 2.2.
                scaled = frame.reformat(width=width, height=height, interpolation="BICUBIC")
                yield np.array(scaled.to_ndarray(format="rgb24"))  # a writable copy drawn on
        if count == 0:
            raise ValueError(f"{path}: no video frames")


def silent_video(path: Path, duration: float, size: tuple[int, int] = (640, 360), fps: int = 25) -> Path:
    """A video without text or audio track (only the moving square)."""
    return text_video(path, duration=duration, size=size, fps=fps)


def noise_file(path: Path, n_bytes: int = 4096) -> Path:
    """A file of random bytes (seeded, so reruns are identical) that no decoder accepts."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(np.random.default_rng(1234).integers(0, 256, n_bytes, dtype=np.uint8).tobytes())
    return path


def truncated_copy(src: Path, dst: Path, fraction: float = 0.5) -> Path:
    """Copy the first ``fraction`` of ``src``'s bytes to ``dst`` (a download cut short)."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1], got {fraction}")
    data = Path(src).read_bytes()
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(data[: int(len(data) * fraction)])
    return dst


def first_frame_at(path: Path, t: float) -> np.ndarray:
    """The first RGB frame whose timestamp is at or after ``t`` seconds (sequential decode)."""
    with av.open(str(Path(path))) as container:
        stream = container.streams.video[0]
        last = None
        for frame in container.decode(stream):
            last = frame
            if frame.time is not None and frame.time >= t - 1e-6:
                return frame.to_ndarray(format="rgb24")
    if last is None:
        raise ValueError(f"{path}: no video frames")
    return last.to_ndarray(format="rgb24")
