"""Cutting a time range of a video into a file of its own.

CrossVid's step-sequencing task (PSS) shows the steps of one video as separate, shuffled clips;
:mod:`vidscope.evaluation.segments` cuts them with :func:`cut_clip`. The range is decoded and
encoded again (H.264, and AAC for the first audio track) rather than copied, so the clip starts
at the first frame at or after ``start`` (a stream copy could only start at a key frame), its
timestamps start at 0, and nothing of the source is carried over: neither its name, nor its
metadata, nor where the range sat in it. Frames are turned upright as the source's display matrix
says, so the clip needs no rotation flag.
"""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from vidscope.tasks.decode import probe

__all__ = ["cut_clip"]

#: The frame rate written when the source gives none.
DEFAULT_FPS = Fraction(25)
#: A time base for a stream that gives none (demuxers always do; this only satisfies typing).
UNKNOWN_BASE = Fraction(1, 90_000)


def _upright(image: np.ndarray, rotation_cw: int) -> np.ndarray:
    if rotation_cw:
        image = np.rot90(image, k=-(rotation_cw // 90))  # rot90 turns counter-clockwise for k > 0
    height, width = image.shape[:2]
    # H.264 in 4:2:0 needs even sides: drop an odd last row or column.
    return np.ascontiguousarray(image[: height - height % 2, : width - width % 2])


def cut_clip(source: Path | str, target: Path | str, start: float, end: float) -> float:
    """Write the part ``[start, end)`` seconds of ``source`` as the MP4 ``target`` (written under a
    temporary name and moved into place, so ``target`` exists only when complete); returns the
    clip's duration in seconds. Raises ``ValueError`` when the range holds no frame, and the
    decoder's errors (``av.FFmpegError``, :class:`~vidscope.tasks.decode.UndecodableVideo`)."""
    if not 0 <= start < end:
        raise ValueError(f"not a time range: {start:g}-{end:g} s")
    source, target = Path(source), Path(target)
    info = probe(source)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.stem}.part{target.suffix}")
    try:
        _encode(source, partial, start, end, info.rotation)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, target)
    return probe(target).duration


def _encode(source: Path, partial: Path, start: float, end: float, rotation: int) -> None:
    written = 0
    with av.open(str(source)) as container, av.open(str(partial), mode="w", format="mp4") as out:
        vin = container.streams.video[0]
        vin.thread_type = "AUTO"
        ain = container.streams.audio[0] if container.streams.audio else None
        rate = vin.average_rate or vin.guessed_rate or DEFAULT_FPS
        rate = Fraction(rate).limit_denominator(1001)
        vout = out.add_stream("libx264", rate=rate)
        vout.pix_fmt = "yuv420p"
        vout.options = {"preset": "veryfast", "crf": "20"}
        aout = resampler = None
        if ain is not None and ain.rate:
            layout = "mono" if ain.channels == 1 else "stereo"
            aout = out.add_stream("aac", rate=ain.rate)
            aout.layout = layout
            resampler = av.AudioResampler(format="fltp", layout=layout, rate=ain.rate)
        video_start, video_base = vin.start_time or 0, vin.time_base or UNKNOWN_BASE
        audio_start = (ain.start_time or 0) if ain is not None else 0
        audio_base = (ain.time_base if ain is not None else None) or UNKNOWN_BASE
        if start > 0:  # to the key frame before start; decoding runs on from there
            container.seek(video_start + int(start / video_base), stream=vin, backward=True)
        last_pts = -1
        samples = 0
        video_done = False
        audio_done = aout is None
        for packet in container.demux(*(s for s in (vin, ain) if s is not None)):
            if video_done and audio_done:
                break
            for frame in packet.decode():
                if isinstance(frame, av.VideoFrame) and frame.pts is not None:
                    t = float((frame.pts - video_start) * video_base)
                    if t >= end:
                        video_done = True
                    if video_done or t < start - 1e-6:
                        continue
                    pts = round((t - start) * rate)
                    if pts <= last_pts:  # a variable-rate source: two frames in one output slot
                        continue
                    image = _upright(frame.to_ndarray(format="rgb24"), rotation)
                    if written == 0:  # the first frame fixes the clip's size
                        vout.height, vout.width = image.shape[:2]
                    picture = av.VideoFrame.from_ndarray(image, format="rgb24")
                    picture.pts, picture.time_base = pts, Fraction(1) / rate
                    last_pts = pts
                    written += 1
                    out.mux(vout.encode(picture))
                elif isinstance(frame, av.AudioFrame) and frame.pts is not None and aout and resampler:
                    t = float((frame.pts - audio_start) * audio_base)
                    if t >= end:
                        audio_done = True
                    if audio_done or t < start - 1e-6:
                        continue
                    for chunk in resampler.resample(frame):
                        chunk.pts, chunk.time_base = samples, Fraction(1, aout.rate)
                        samples += chunk.samples
                        out.mux(aout.encode(chunk))
        if written == 0:
            raise ValueError(f"{source.name}: no video frame between {start:g} and {end:g} s")
        out.mux(vout.encode(None))
        if aout is not None:
            out.mux(aout.encode(None))
