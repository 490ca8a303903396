"""SAMA's scene_detector: the shot changes (hard cuts) of a video in an interval.

Ingestion stores no shot boundaries (clips are fixed-length windows), so they are measured here
from the stored frames (2 fps JPEGs): each frame is reduced to a colour histogram and a small
grey thumbnail, and two consecutive frames are a cut when their histograms or their pictures
differ by more than a threshold and by much more than the interval's usual change between
frames (so steady motion is not a cut). No model is needed. A cut is placed within one frame
interval (0.5 s at 2 fps); gradual transitions (fades, dissolves) may be missed.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from pydantic import BaseModel, Field

from vidscope.agents.answers import Support
from vidscope.agents.perception import checked_range
from vidscope.agents.tools import ToolContext, ToolError, ToolResult, tool
from vidscope.core.images import decode_jpeg

#: Histogram bins per RGB channel (a joint histogram of BINS**3 cells).
BINS = 4
#: Side of the grey thumbnail compared pixel by pixel.
THUMB = 16
#: A cut: histogram distance (half the L1 distance, in [0, 1]) at least this …
MIN_CHANGE = 0.3
#: … or mean grey thumbnail difference (in [0, 1]) at least this …
MIN_PICTURE_CHANGE = 0.2
#: … and at least this many times the interval's median change between consecutive frames.
RELATIVE_CHANGE = 3.0
#: Stored frames read at most (one hour at 2 fps); a longer interval is refused.
MAX_FRAMES = 7200

SOURCE = "stored frames (colour histogram and thumbnail difference between consecutive frames)"


class SceneBoundary(BaseModel):
    """One shot change: the last frame of a shot and the first of the next."""

    t: float = Field(description="Time of the change: midway between the two frames, in seconds.")
    before: float = Field(description="Time of the last frame before the change.")
    after: float = Field(description="Time of the first frame after the change.")
    change: float = Field(description="How different the two frames' colours are, in [0, 1].")


class ScenesResult(ToolResult):
    """The shot changes of one interval and the scenes (shots) between them."""

    video_id: str
    t0: float
    t1: float
    boundaries: list[SceneBoundary]
    scenes: list[list[float]] = Field(description="[start, end] of each scene in the interval, in order.")
    frames_compared: int
    source: str = SOURCE

    def support(self) -> list[Support]:
        # Measured on the frames' pixels: each cut supports the frames around it; no cut found
        # supports nothing.
        return [
            Support(
                video_id=self.video_id,
                start=b.before,
                end=b.after,
                level="perceived",
                found=f"scene change at {b.t:g}s",
            )
            for b in self.boundaries
        ]

    def summary(self) -> str:
        cuts = ", ".join(f"{b.t:g}s" for b in self.boundaries[:6])
        return f"{len(self.boundaries)} scene changes in [{self.t0:g}, {self.t1:g}]s" + (
            f": {cuts}" if cuts else ""
        )


def frame_signature(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(normalised joint colour histogram, grey thumbnail in [0, 1]) of an RGB uint8 image."""
    pixels = image.reshape(-1, 3).astype(np.int64) * BINS // 256
    cells = (pixels[:, 0] * BINS + pixels[:, 1]) * BINS + pixels[:, 2]
    histogram = np.bincount(cells, minlength=BINS**3).astype(np.float64)
    histogram /= max(1.0, histogram.sum())
    grey = image.astype(np.float64).mean(axis=2)
    h, w = grey.shape
    rows = np.linspace(0, h, THUMB + 1).astype(int)
    cols = np.linspace(0, w, THUMB + 1).astype(int)
    thumb = np.array(
        [
            [
                grey[rows[i] : max(rows[i + 1], rows[i] + 1), cols[j] : max(cols[j + 1], cols[j] + 1)].mean()
                for j in range(THUMB)
            ]
            for i in range(THUMB)
        ]
    )
    return histogram, thumb / 255.0


def changes(images: list[np.ndarray]) -> list[tuple[float, float]]:
    """(histogram distance, mean thumbnail difference), each in [0, 1], between each pair of
    consecutive images."""
    signatures = [frame_signature(image) for image in images]
    return [
        (0.5 * float(np.abs(h1 - h0).sum()), float(np.abs(g1 - g0).mean()))
        for (h0, g0), (h1, g1) in zip(signatures, signatures[1:], strict=False)
    ]


def cut_indices(deltas: list[tuple[float, float]]) -> list[int]:
    """Indices i such that frames i and i + 1 lie on either side of a cut: the colours change by
    at least :data:`MIN_CHANGE`, or the picture (the grey thumbnail) by at least
    :data:`MIN_PICTURE_CHANGE` (two shots of alike colours), each also at least
    :data:`RELATIVE_CHANGE` times its median over the interval (steady motion is no cut)."""
    if not deltas:
        return []
    colour_floor = max(MIN_CHANGE, RELATIVE_CHANGE * float(np.median([h for h, _ in deltas])))
    picture_floor = max(MIN_PICTURE_CHANGE, RELATIVE_CHANGE * float(np.median([g for _, g in deltas])))
    return [i for i, (h, g) in enumerate(deltas) if h >= colour_floor or g >= picture_floor]


@tool(version=1)
def scene_detector(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    t0: Annotated[float, "Start of the interval, in seconds."],
    t1: Annotated[float, "End of the interval, in seconds."],
) -> ScenesResult:
    """The scene boundaries (shot changes, hard cuts) of a video between two times, and the
    scenes between them, measured on the stored frames (2 per second, so a cut is placed within
    half a second; fades may be missed). Use it to split a video into scenes, count scenes, or
    find where the scene changes before reading each scene with video_reader."""
    start, end = checked_range(ctx.video(video_id), [t0, t1], instant=False)
    store = ctx.store
    where = f"t >= {start!r} AND t <= {end!r}"
    times = [
        float(t) for t in store.rows(store.frames, video_id=video_id, where=where, columns=["t"]).column("t")
    ]
    if not times:
        raise ToolError(f"video {video_id} has no stored frames in [{start:g}, {end:g}]s; ingest it first")
    if len(times) > MAX_FRAMES:
        raise ToolError(
            f"[{start:g}, {end:g}]s holds {len(times)} stored frames, more than {MAX_FRAMES}; "
            "ask for a shorter interval"
        )
    rows = store.rows(
        store.frames, video_id=video_id, where=where, columns=["t", "jpeg"], order_by=["t"]
    ).to_pylist()
    times = [float(r["t"]) for r in rows]
    deltas = changes([decode_jpeg(r["jpeg"]) for r in rows])
    boundaries = [
        SceneBoundary(
            t=round((times[i] + times[i + 1]) / 2, 2),
            before=round(times[i], 2),
            after=round(times[i + 1], 2),
            change=round(deltas[i][0], 3),
        )
        for i in cut_indices(deltas)
    ]
    edges = [start, *(b.t for b in boundaries), end]
    return ScenesResult(
        video_id=video_id,
        t0=start,
        t1=end,
        boundaries=boundaries,
        scenes=[[round(a, 2), round(b, 2)] for a, b in zip(edges, edges[1:], strict=False)],
        frames_compared=len(rows),
    )
