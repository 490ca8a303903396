"""SAMA's scene_detector: the shot changes (hard cuts) of a video in an interval.

Ingestion stores no shot boundaries (clips are fixed-length windows), so they are measured here,
on frames ``fps`` apart: the stored frames (2 fps) when ``fps`` is at most their rate (every k-th
of them for a lower rate), else frames decoded from the video file at that rate (the stored ones
when the file cannot be read; the result's ``note`` says so). Each pair of consecutive frames gets
a change score in [0, 1]: the larger of their colour distance (half the L1 distance of joint colour
histograms) and the share of the picture that changed (cells of a grey thumbnail whose brightness
moved by more than :data:`CELL_CHANGE`). The second measure finds a cut between shots of alike
colours — two slides, white with dark text, whose text and layout differ (issue 38: the colour
histogram alone missed such a cut at 10 s). A pair is a cut when its score is at least
``threshold`` and at least :data:`RELATIVE_CHANGE` times the interval's median score (steady
motion, a pan, is no cut). No model is needed. A cut is placed between its two frames (within
half a second at 2 fps); gradual transitions (fades, dissolves) may be missed.

SAMA's paper names the tool's arguments ``fps`` and ``threshold`` (App. B, as the issue quotes
it); their default values and the scale of its threshold could not be found here (the stored pages
hold the paper's abstract only). Ours: ``fps`` 2 (the stored frames' rate) and ``threshold`` 0.15
on the [0, 1] score above — a caption box appearing on one shot changes about 6% of the picture,
two different slides about 20%.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from pydantic import BaseModel, Field

from vidscope.agents.answers import Support
from vidscope.agents.perception import checked_range, frames_from_file
from vidscope.agents.tools import ToolContext, ToolError, ToolResult, tool
from vidscope.core.images import decode_jpeg

#: Histogram bins per RGB channel (a joint histogram of BINS**3 cells).
BINS = 4
#: Side of the grey thumbnail compared cell by cell.
THUMB = 16
#: A thumbnail cell has changed when its mean brightness (in [0, 1]) moved by more than this
#: (JPEG noise averages out over a cell; text appearing or leaving moves it by several percent).
CELL_CHANGE = 0.04
#: The default cut threshold on the change score (see the module docstring).
THRESHOLD = 0.15
#: … and a cut's score is at least this many times the interval's median score.
RELATIVE_CHANGE = 3.0
#: The default rate frames are compared at: the stored frames' (ingest.frame_fps).
FPS = 2.0
#: The highest rate asked for (frames decoded from the file beyond the stored rate).
MAX_FPS = 10.0
#: Frames compared at most (one hour at 2 fps); a longer interval is refused.
MAX_FRAMES = 7200
#: Frames decoded from the file at most (two minutes at 10 fps): decoding costs far more than
#: reading stored frames, so a higher rate is for a short stretch around a cut.
MAX_FILE_FRAMES = 1200

SOURCE = "colour histogram and changed share of the picture between consecutive frames"


class SceneBoundary(BaseModel):
    """One shot change: the last frame of a shot and the first of the next."""

    t: float = Field(description="Time of the change: midway between the two frames, in seconds.")
    before: float = Field(description="Time of the last frame before the change.")
    after: float = Field(description="Time of the first frame after the change.")
    change: float = Field(description="How different the two frames are, in [0, 1] (the change score).")


class ScenesResult(ToolResult):
    """The shot changes of one interval and the scenes (shots) between them."""

    video_id: str
    t0: float
    t1: float
    boundaries: list[SceneBoundary]
    scenes: list[list[float]] = Field(description="[start, end] of each scene in the interval, in order.")
    frames_compared: int
    fps: float = FPS
    threshold: float = THRESHOLD
    source: str = f"stored frames ({SOURCE})"
    note: str | None = None

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
        # The strongest cuts when there are many (a distilled note keeps the clearest ones), in
        # time order.
        shown = sorted(sorted(self.boundaries, key=lambda b: -b.change)[:6], key=lambda b: b.t)
        cuts = ", ".join(f"{b.t:g}s" for b in shown)
        more = f" (the {len(shown)} clearest)" if len(self.boundaries) > len(shown) else ""
        return f"{len(self.boundaries)} scene changes in [{self.t0:g}, {self.t1:g}]s" + (
            f"{more}: {cuts}" if cuts else ""
        )


#: scene_detector's ``fps`` and ``threshold`` arguments as the model sees them (the real tool and
#: its simulated twin offer the same spec).
FpsArgument = Annotated[
    float,
    Field(
        description="Frames compared per second (2: the stored frames; up to 10, read from "
        "the video file, places a cut more precisely).",
        gt=0,
        le=MAX_FPS,
    ),
]
ThresholdArgument = Annotated[
    float,
    Field(
        description="How different two consecutive frames must be to count as a cut, in "
        "[0, 1] (0.15; lower finds subtler cuts and more false ones).",
        gt=0,
        le=1,
    ),
]


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
    """(colour distance, changed share of the picture), each in [0, 1], between each pair of
    consecutive images."""
    signatures = [frame_signature(image) for image in images]
    return [
        (0.5 * float(np.abs(h1 - h0).sum()), float((np.abs(g1 - g0) > CELL_CHANGE).mean()))
        for (h0, g0), (h1, g1) in zip(signatures, signatures[1:], strict=False)
    ]


def cut_indices(deltas: list[tuple[float, float]], threshold: float = THRESHOLD) -> list[int]:
    """Indices i such that frames i and i + 1 lie on either side of a cut: their change score (the
    larger of the two measures) is at least ``threshold`` and at least :data:`RELATIVE_CHANGE`
    times its median over the interval (steady motion is no cut)."""
    if not deltas:
        return []
    scores = [max(h, g) for h, g in deltas]
    floor = max(threshold, RELATIVE_CHANGE * float(np.median(scores)))
    return [i for i, s in enumerate(scores) if s >= floor]


def _stored(ctx: ToolContext, video_id: str, where: str, step: int) -> tuple[list[float], list[np.ndarray]]:
    """Every ``step``-th stored frame matching ``where``: (times, images)."""
    store = ctx.store
    rows = store.rows(
        store.frames, video_id=video_id, where=where, columns=["t", "jpeg"], order_by=["t"]
    ).to_pylist()[::step]
    return [float(r["t"]) for r in rows], [decode_jpeg(r["jpeg"]) for r in rows]


@tool(version=2)  # v2: fps and threshold (the paper's arguments); the changed-share measure
def scene_detector(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    t0: Annotated[float, "Start of the interval, in seconds."],
    t1: Annotated[float, "End of the interval, in seconds."],
    fps: FpsArgument = FPS,
    threshold: ThresholdArgument = THRESHOLD,
) -> ScenesResult:
    """The scene boundaries (shot changes, hard cuts) of a video between two times, and the
    scenes between them, measured on frames (2 per second by default, so a cut is placed within
    half a second; fades may be missed). Finds cuts between shots of alike colours too (two
    slides). Use it to split a video into scenes, count scenes, or find where the scene changes
    before reading each scene with video_reader."""
    record = ctx.video(video_id)
    start, end = checked_range(record, [t0, t1], instant=False)
    where = f"t >= {start!r} AND t <= {end!r}"
    stored = [
        float(t)
        for t in ctx.store.rows(ctx.store.frames, video_id=video_id, where=where, columns=["t"]).column("t")
    ]
    if not stored:
        raise ToolError(f"video {video_id} has no stored frames in [{start:g}, {end:g}]s; ingest it first")
    stored_fps = (len(stored) - 1) / (max(stored) - min(stored)) if len(stored) > 1 else FPS
    wanted = int((end - start) * fps) + 1
    if min(wanted, len(stored)) > MAX_FRAMES:
        raise ToolError(
            f"[{start:g}, {end:g}]s at {fps:g} fps is {wanted} frames, more than {MAX_FRAMES}; "
            "ask for a shorter interval or a lower fps"
        )
    note = None
    source = f"stored frames ({SOURCE})"
    images: list[np.ndarray] | None = None
    if fps > stored_fps * 1.01:
        if wanted > MAX_FILE_FRAMES:
            raise ToolError(
                f"{fps:g} fps over [{start:g}, {end:g}]s is {wanted} frames to decode, more than "
                f"{MAX_FILE_FRAMES}; ask for a shorter interval or fps {stored_fps:.3g} (the stored frames)"
            )
        times = [round(start + i / fps, 3) for i in range(wanted)]
        images = frames_from_file(ctx, record, times)
        if images is None:
            note = f"the video file cannot be read: compared the stored frames ({stored_fps:.3g} fps)"
        else:
            source = f"video file at {fps:g} fps ({SOURCE})"
    if images is None:
        step = max(1, round(stored_fps / fps))
        times, images = _stored(ctx, video_id, where, step)
    deltas = changes(images)
    boundaries = [
        SceneBoundary(
            t=round((times[i] + times[i + 1]) / 2, 2),
            before=round(times[i], 2),
            after=round(times[i + 1], 2),
            change=round(max(deltas[i]), 3),
        )
        for i in cut_indices(deltas, threshold)
    ]
    edges = [start, *(b.t for b in boundaries), end]
    return ScenesResult(
        video_id=video_id,
        t0=start,
        t1=end,
        boundaries=boundaries,
        scenes=[[round(a, 2), round(b, 2)] for a, b in zip(edges, edges[1:], strict=False)],
        frames_compared=len(images),
        fps=fps,
        threshold=threshold,
        source=source,
        note=note,
    )
