"""Synthetic CCTV-style video: footage with a burned-in clock, a frame counter and rare captions.

Made with ffmpeg's ``drawtext`` (Debian's ffmpeg has libfreetype): the clock is the frame's
presentation time printed from a fixed start (``%{pts:gmtime:EPOCH}``, so the video is the same at
every run), the counter is ``%{frame_num}``. Used by the OCR tests and ``benchmarks/ocr_clock.py``.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from vidscope.core.synthetic import _FONT_CANDIDATES

#: The clock's first reading in the generated videos.
CLOCK_START = datetime(2026, 11, 28, 14, 30, 0)


def _escape(text: str) -> str:
    """``text`` for a drawtext ``text=`` value inside a filter graph (quotes, colons, commas)."""
    return text.replace("\\", "\\\\\\\\").replace("'", "").replace(":", "\\\\\\:").replace(",", "\\,")


def clock_video(
    path: Path,
    *,
    duration: float,
    footage: Path | None = None,
    captions: Sequence[tuple[float, float, str]] = (),
    size: tuple[int, int] = (320, 180),
    fps: int = 5,
    start: datetime = CLOCK_START,
) -> Path:
    """Write a ``duration``-second video to ``path``: ``footage`` looped (grey noise without it), a
    clock ``YYYY-MM-DD HH:MM:SS`` starting at ``start`` top left, ``FRAME n`` top right and each
    caption ``(t0, t1, text)`` bottom centre on an opaque box."""
    exe = shutil.which("ffmpeg")
    if exe is None:
        raise RuntimeError("ffmpeg is not installed; run `apt-get install -y ffmpeg`")
    font = next((f for f in _FONT_CANDIDATES if f.exists()), None)
    if font is None:
        raise RuntimeError("the DejaVu fonts are not installed; run `apt-get install -y fonts-dejavu-core`")
    width, height = size
    epoch = int(start.replace(tzinfo=UTC).timestamp())
    style = f"fontfile={font}:fontcolor=white:box=1:boxcolor=black"
    filters = [
        f"scale={width}:{height}",
        f"fps={fps}",
        f"drawtext={style}:fontsize=12:boxborderw=4:x=6:y=6:"
        f"text='%{{pts\\:gmtime\\:{epoch}\\:%Y-%m-%d %H\\\\\\:%M\\\\\\:%S}}'",
        f"drawtext={style}:fontsize=12:boxborderw=4:x=w-tw-6:y=6:text='FRAME %{{frame_num}}'",
    ]
    for t0, t1, text in captions:
        filters.append(
            f"drawtext={style}:fontsize=16:boxborderw=16:x=(w-tw)/2:y=h-40:"
            f"text='{_escape(text)}':enable='between(t,{t0:g},{t1:g})'"
        )
    if footage is not None:
        source = ["-stream_loop", "-1", "-i", str(footage)]
    else:
        source = ["-f", "lavfi", "-i", f"color=c=0x3a4450:s={width}x{height}:r={fps}"]
        filters.insert(0, "noise=alls=12:allf=t")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            exe,
            "-hide_banner",
            "-loglevel",
            "error",
            "-y",
            *source,
            "-t",
            f"{duration:g}",
            "-an",
            "-vf",
            ",".join(filters),
            "-c:v",
            "libx264",
            "-preset",
            "ultrafast",
            "-pix_fmt",
            "yuv420p",
            str(path),
        ],
        check=True,
        capture_output=True,
    )
    return path
