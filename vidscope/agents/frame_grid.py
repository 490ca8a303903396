"""Frames fitted to a server's per-request image limit by stitching several into one grid image.

The papers' budgets are frame counts (Deep Video Discovery's ``frame_inspect``: 50 frames; AVI's
frame analysis: 64), while servers cap images per request (vLLM's ``--limit-mm-per-prompt``,
vidscope's ``max_images``). DVD met its own 50-image limit by stitching frames together; here,
when there are more frames than the vision model takes, consecutive frames are stitched into
grids of ``k = ceil(frames / max_images)``, each tile labelled with its time, so the model still
sees every frame of the budget (each at a smaller share of the image). Grids are laid out as close
to square as the tiles allow: a backend that fits images within a longest side then keeps the most
pixels per tile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from vidscope.core.images import decode_jpeg, encode_jpeg


@dataclass(frozen=True)
class FittedFrames:
    """What is sent: the images (JPEG) and the times of the frames in each (one per plain frame)."""

    jpegs: list[bytes]
    times: list[list[float]]

    @property
    def per_image(self) -> int:
        """Frames in the fullest image (1: no grids)."""
        return max((len(t) for t in self.times), default=0)

    def describe(self) -> str:
        """The sentence telling the model what the images are and when each frame was taken."""
        if self.per_image <= 1:
            flat = [t[0] for t in self.times]
            return f"The {len(self.jpegs)} images are frames at these times (seconds): {flat}"
        return (
            f"The {len(self.jpegs)} images are grids of up to {self.per_image} frames each, read "
            "left to right, then top to bottom, each frame labelled with its time; the frame times "
            f"of each image (seconds): {self.times}"
        )


def grid_shape(count: int, width: int, height: int) -> tuple[int, int]:
    """(columns, rows) for ``count`` tiles of ``width`` x ``height`` whose grid is nearest square
    (fewest empty cells on a tie)."""
    best: tuple[float, int, int, int] | None = None
    for cols in range(1, count + 1):
        rows = math.ceil(count / cols)
        aspect = (cols * width) / max(1, rows * height)
        candidate = (max(aspect, 1 / aspect), cols * rows - count, cols, rows)
        if best is None or candidate < best:
            best = candidate
    assert best is not None
    return best[2], best[3]


def stitch(images: list[np.ndarray], times: list[float]) -> np.ndarray:
    """One RGB image holding ``images`` in a grid (see :func:`grid_shape`), each tile labelled
    with its time; tiles of other sizes are fitted into the first one's cell."""
    height, width = images[0].shape[:2]
    cols, rows = grid_shape(len(images), width, height)
    from PIL import Image, ImageDraw  # here: a question that draws no grid does not import PIL

    canvas = Image.new("RGB", (cols * width, rows * height), (0, 0, 0))
    draw = ImageDraw.Draw(canvas)
    for i, (image, t) in enumerate(zip(images, times, strict=True)):
        tile = Image.fromarray(image)
        if tile.size != (width, height):
            tile = tile.resize((width, height), Image.Resampling.BICUBIC)
        x, y = (i % cols) * width, (i // cols) * height
        canvas.paste(tile, (x, y))
        label = f"{t:.1f}s"
        box = draw.textbbox((x + 4, y + 4), label)
        draw.rectangle((box[0] - 2, box[1] - 2, box[2] + 2, box[3] + 2), fill=(0, 0, 0))
        draw.text((x + 4, y + 4), label, fill=(255, 255, 255))
    return np.asarray(canvas)


def fit_frames(jpegs: list[bytes], times: list[float], max_images: int, quality: int = 90) -> FittedFrames:
    """``jpegs`` (frames at ``times``) as at most ``max_images`` images: unchanged when they fit,
    else consecutive frames stitched into grids of ``ceil(len / max_images)``."""
    limit = max(1, int(max_images))
    if len(jpegs) <= limit:
        return FittedFrames(list(jpegs), [[t] for t in times])
    per_image = math.ceil(len(jpegs) / limit)
    out: list[bytes] = []
    grouped: list[list[float]] = []
    for start in range(0, len(jpegs), per_image):
        chunk_times = list(times[start : start + per_image])
        images = [decode_jpeg(j) for j in jpegs[start : start + per_image]]
        out.append(encode_jpeg(stitch(images, chunk_times), quality) if len(images) > 1 else jpegs[start])
        grouped.append(chunk_times)
    return FittedFrames(out, grouped)
