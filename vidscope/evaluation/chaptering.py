"""Chapter annotations in VidChapters-7M's format, and the overlap metrics chaptering is scored by.

For people who have the videos of VidChapters-7M (Yang et al., NeurIPS 2023: YouTube chapters the
creators wrote) and want to score the ``chapters`` stage against their chapters.

**Format.** Two shapes are read, both ``{VIDEO_ID: {...}}`` in one JSON file:

- the release's chapters (``chapters.json``): ``{"duration": s, "chapters": [{"time": s,
  "label": "title"}, ...]}`` — each chapter starts at its ``time`` and ends where the next starts
  (the last at the duration);
- its dense-captioning conversion (``chapters_dvc_*.json``, ActivityNet's shape): ``{"duration": s,
  "timestamps": [[start, end], ...], "sentences": ["title", ...]}``.

Chapters that start after they end or end past the duration are dropped, as the release's own
conversion drops them; a video left without chapters is skipped with its reason. A file of another
shape is one :class:`~vidscope.evaluation.items.AnnotationError` line naming the file and why.

**Metrics** (per video, then averaged over videos, as Chapter-Llama (CVPR 2025) reports on
VidChapters-7M; the VidChapters paper's own generation metrics are the dense-captioning ones, whose
thresholds could not be checked here):

- tIoU of two segments: their intersection over their union;
- precision/recall at a threshold: the share of predicted (reference) chapters overlapping some
  reference (predicted) chapter with tIoU at least the threshold; **F1** their harmonic mean,
  averaged over the thresholds 0.50, 0.55, …, 0.95;
- **mean tIoU**: references and predictions paired one to one greedily by highest tIoU, the mean
  of the pairs' tIoU;
- **boundary F1 within 3 s and 5 s**: chapter starts after the first, each matched at most once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vidscope.evaluation.items import AnnotationError, read_json

#: tIoU thresholds F1 is averaged over (0.50 to 0.95 in steps of 0.05).
THRESHOLDS = tuple(round(0.5 + 0.05 * i, 2) for i in range(10))
#: Seconds within which a predicted chapter start matches a reference one.
BOUNDARY_TOLERANCES = (3.0, 5.0)


@dataclass(frozen=True)
class Segment:
    """A chapter: its span in seconds and its title."""

    start: float
    end: float
    title: str = ""


@dataclass
class Annotations:
    """The chapters of each annotated video, and the videos skipped with why."""

    videos: dict[str, list[Segment]] = field(default_factory=dict)
    durations: dict[str, float] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def load(path: Path | str) -> Annotations:
    """The chapters of a VidChapters-7M annotation file (either shape; module notes)."""
    data = read_json(Path(path))
    if not isinstance(data, dict):
        raise AnnotationError(
            f"{path}: expected {{video_id: {{duration, chapters}}}}, got {type(data).__name__}"
        )
    out = Annotations()
    for video, entry in data.items():
        try:
            duration, segments = _segments(entry)
        except (KeyError, TypeError, ValueError) as exc:
            out.skipped[str(video)] = f"not a chapter record ({type(exc).__name__}: {exc})"
            continue
        kept = [s for s in segments if 0.0 <= s.start < s.end <= duration + 1e-6]
        if not kept:
            out.skipped[str(video)] = "no chapter inside the video's duration"
            continue
        out.videos[str(video)] = kept
        out.durations[str(video)] = duration
    if data and not out.videos:
        first = next(iter(out.skipped.items()))
        raise AnnotationError(f"{path}: no video has usable chapters (e.g. {first[0]}: {first[1]})")
    return out


def _segments(entry: Any) -> tuple[float, list[Segment]]:
    duration = float(entry["duration"])
    if "chapters" in entry:
        marks = sorted((float(c["time"]), str(c.get("label") or "").strip()) for c in entry["chapters"])
        ends = [t for t, _ in marks[1:]] + [duration]
        return duration, [Segment(t, end, label) for (t, label), end in zip(marks, ends, strict=True)]
    stamps, titles = entry["timestamps"], entry["sentences"]
    if len(stamps) != len(titles):
        raise ValueError(f"{len(stamps)} timestamps, {len(titles)} sentences")
    return duration, [
        Segment(float(a), float(b), str(t).strip()) for (a, b), t in zip(stamps, titles, strict=True)
    ]


def tiou(a: Segment, b: Segment) -> float:
    """Temporal intersection over union of two segments (0 when they do not overlap)."""
    inter = min(a.end, b.end) - max(a.start, b.start)
    union = max(a.end, b.end) - min(a.start, b.start)
    return max(0.0, inter) / union if union > 0 else 0.0


def f1_at(refs: Sequence[Segment], preds: Sequence[Segment], threshold: float) -> tuple[float, float, float]:
    """(precision, recall, F1) at one tIoU threshold (module notes)."""
    if not refs or not preds:
        return 0.0, 0.0, 0.0
    hit = [[tiou(r, p) >= threshold for p in preds] for r in refs]
    precision = sum(any(hit[i][j] for i in range(len(refs))) for j in range(len(preds))) / len(preds)
    recall = sum(any(row) for row in hit) / len(refs)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def mean_tiou(refs: Sequence[Segment], preds: Sequence[Segment]) -> float:
    """Mean tIoU of the reference-prediction pairs matched one to one, highest tIoU first."""
    pairs = sorted(
        ((tiou(r, p), i, j) for i, r in enumerate(refs) for j, p in enumerate(preds)), reverse=True
    )
    used_r: set[int] = set()
    used_p: set[int] = set()
    kept = []
    for value, i, j in pairs:
        if value <= 0 or i in used_r or j in used_p:
            continue
        used_r.add(i)
        used_p.add(j)
        kept.append(value)
    return sum(kept) / len(kept) if kept else 0.0


def boundary_f1(refs: Sequence[Segment], preds: Sequence[Segment], tolerance: float) -> float:
    """F1 of the predicted chapter starts (after the first) against the reference ones, each
    reference start matched at most once within ``tolerance`` seconds (1 when neither has a cut)."""
    truth = [s.start for s in refs[1:]]
    found = [s.start for s in preds[1:]]
    if not truth and not found:
        return 1.0
    free, hits = list(truth), 0
    for t in sorted(found):
        near = [u for u in free if abs(u - t) <= tolerance]
        if near:
            free.remove(min(near, key=lambda u: abs(u - t)))
            hits += 1
    if not hits:
        return 0.0
    precision, recall = hits / len(found), hits / len(truth)
    return 2 * precision * recall / (precision + recall)


@dataclass
class Scores:
    """Chaptering scores averaged over videos (percentages, as reported)."""

    videos: int
    precision: float
    recall: float
    f1: float
    mean_tiou: float
    boundary_f1: dict[float, float]


def score(refs: dict[str, list[Segment]], preds: dict[str, list[Segment]]) -> Scores:
    """The scores of ``preds`` against ``refs`` over the videos both have."""
    common = [v for v in refs if v in preds]
    if not common:
        raise ValueError("no video has both reference and predicted chapters")
    p = r = f = t = 0.0
    bounds = dict.fromkeys(BOUNDARY_TOLERANCES, 0.0)
    for video in common:
        at = [f1_at(refs[video], preds[video], th) for th in THRESHOLDS]
        p += sum(x[0] for x in at) / len(at)
        r += sum(x[1] for x in at) / len(at)
        f += sum(x[2] for x in at) / len(at)
        t += mean_tiou(refs[video], preds[video])
        for tol in BOUNDARY_TOLERANCES:
            bounds[tol] += boundary_f1(refs[video], preds[video], tol)
    n = len(common)
    return Scores(
        videos=n,
        precision=100 * p / n,
        recall=100 * r / n,
        f1=100 * f / n,
        mean_tiou=100 * t / n,
        boundary_f1={tol: 100 * v / n for tol, v in bounds.items()},
    )
