"""Read on-screen text from sampled frames (the ``ocr`` stage).

OCR is the slowest embedded model, so it reads a subset of the stored frames (``ingest.ocr_fps``)
and skips frames that look the same as the last one it read. Text that stays on screen across
consecutive reads becomes one item with a time span instead of one row per frame.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from prefect import task
from prefect.cache_policies import NO_CACHE

from vidscope.core.images import decode_jpeg
from vidscope.core.settings import Settings
from vidscope.models import registry
from vidscope.models.protocols.text_reader import TextLine, TextReader
from vidscope.tasks.stage import (
    Stage,
    StageContext,
    StageNotApplicable,
    StageOutcome,
    StageResult,
    role_config,
    run_stage,
)

READ_BATCH = 64
#: Mean absolute difference (0–255) of 64x36 grey thumbnails under which a frame is "the same".
SAME_FRAME_DIFF = 2.0
#: Text similarity above which two reads are the same on-screen text (OCR misreads a character).
SAME_TEXT_RATIO = 0.8


def normalise_text(text: str) -> str:
    """Case-folded, whitespace-collapsed text used to compare reads."""
    return re.sub(r"\s+", " ", text).strip().casefold()


def thumbnail(image: np.ndarray) -> np.ndarray:
    """A tiny grey version of ``image`` for cheap "did anything change" tests."""
    return np.asarray(Image.fromarray(image).convert("L").resize((64, 36)), dtype=np.float32)


@dataclass
class _OpenItem:
    text: str
    norm: str
    t: float
    t_end: float
    box: tuple[float, ...]
    score: float
    last_read: int


class TextTracker:
    """Merges per-frame OCR lines into on-screen text items with spans."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.open: list[_OpenItem] = []
        self.closed: list[_OpenItem] = []

    def add(self, read_index: int, t: float, lines: list[TextLine]) -> None:
        """Feed the lines read at time ``t`` (the ``read_index``-th read)."""
        still_open: list[_OpenItem] = []
        for line in lines:
            norm = normalise_text(line.text)
            if not norm:
                continue
            match = next(
                (
                    item
                    for item in self.open
                    if item.last_read == read_index - 1
                    and difflib.SequenceMatcher(None, item.norm, norm).ratio() >= SAME_TEXT_RATIO
                ),
                None,
            )
            if match is None:
                match = _OpenItem(line.text.strip(), norm, t, t, tuple(line.box), line.score, read_index)
            else:
                self.open.remove(match)
                if line.score > match.score:  # keep the most confident reading of the text
                    match.text, match.norm, match.box = line.text.strip(), norm, tuple(line.box)
                    match.score = line.score
            match.t_end, match.last_read = t, read_index
            still_open.append(match)
        self.closed.extend(self.open)
        self.open = still_open

    def items(self, duration: float) -> list[_OpenItem]:
        """Every item, in order of appearance; spans end one read interval after the last sighting."""
        items = sorted([*self.closed, *self.open], key=lambda i: (i.t, i.box[1] if i.box else 0))
        for item in items:
            item.t_end = min(duration, item.t_end + self.interval)
        return items


def _run(ctx: StageContext) -> StageOutcome:
    reader: TextReader | None = registry.text_reader(ctx.settings)
    if reader is None:
        raise StageNotApplicable("no text reader configured (models.text_reader)")
    settings, store, video = ctx.settings.ingest, ctx.store, ctx.video
    step = max(1, round(settings.frame_fps / settings.ocr_fps))
    tracker = TextTracker(interval=step / settings.frame_fps)
    total_frames = store.count(store.frames, video.video_id)
    previous_thumb: np.ndarray | None = None
    previous_lines: list[TextLine] = []
    reads = reused = 0
    for first in range(0, total_frames, READ_BATCH * step):
        batch = store.rows(
            store.frames,
            video_id=video.video_id,
            where=f"frame_index >= {first} AND frame_index < {first + READ_BATCH * step} "
            f"AND frame_index % {step} = 0",
            columns=["frame_index", "t", "jpeg"],
        ).to_pylist()
        for row in batch:
            image = decode_jpeg(row["jpeg"])
            thumb = thumbnail(image)
            if previous_thumb is not None and float(np.abs(thumb - previous_thumb).mean()) < SAME_FRAME_DIFF:
                lines = previous_lines
                reused += 1
            else:
                lines = [ln for ln in reader.read(image) if ln.score >= settings.ocr_min_score]
            tracker.add(reads, row["t"], lines)
            previous_thumb, previous_lines = thumb, lines
            reads += 1
        ctx.progress("ocr", min(first + READ_BATCH * step, total_frames), total_frames)
    items = tracker.items(video.duration)
    rows = [
        {
            "video_id": video.video_id,
            "item_index": i,
            "t": item.t,
            "t_end": item.t_end,
            "text": item.text,
            "box": [float(v) for v in item.box[:8]] + [0.0] * (8 - len(item.box[:8])),
            "score": float(item.score),
        }
        for i, item in enumerate(items)
    ]
    store.replace_video_rows(store.ocr, video.video_id, rows)
    return StageOutcome(
        rows=len(rows),
        details={"frames_read": reads - reused, "frames_reused": reused, "reader": reader.name},
    )


def _config(settings: Settings) -> dict[str, Any]:
    return {
        **role_config(settings, "text_reader", "reader"),
        "ocr_fps": settings.ingest.ocr_fps,
        "min_score": settings.ingest.ocr_min_score,
    }


OCR = Stage(
    name="ocr",
    version=1,
    run=_run,
    config=_config,
    needs=("frames",),
    description="on-screen text (PP-OCR via rapidocr), merged across frames while it stays on screen",
)


@task(name="ocr", cache_policy=NO_CACHE, task_run_name="ocr · {path.name}")
def ocr_task(video_id: str, path: Path, settings: Settings) -> StageResult:
    """Prefect task: the ``ocr`` stage for one registered video (a no-op when it is current)."""
    return run_stage(OCR, video_id, path, settings)
