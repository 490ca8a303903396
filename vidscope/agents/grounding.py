"""Temporal grounding: from a per-frame similarity curve, or from an answer's text, to [t_start, t_end].

``boundary_detect`` scores sampled frames against an event's text; :func:`interval_from_curve`
smooths that curve and keeps the strongest run of frames above a threshold halfway between the
curve's floor and its peak, with edges half-way between the last frame outside and the first frame
inside. :func:`parse_interval` reads the interval an agent wrote in answer to "when does X happen",
and :func:`grounding_report` scores such answers with :mod:`vidscope.evaluation.metrics`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vidscope.evaluation.metrics import GROUNDING_THRESHOLDS, Interval, grounding_scores

#: A curve whose peak rises less than this above its floor shows no change worth a boundary.
MIN_CONTRAST = 0.02


@dataclass(frozen=True)
class CurveInterval:
    """The interval found on a similarity curve, and how clearly it stands out.

    ``first`` and ``last`` are the indexes of the samples inside it; ``contrast`` is the smoothed
    curve's peak minus its floor (0 when the curve is flat and the whole range is returned).
    """

    start: float
    end: float
    first: int
    last: int
    threshold: float
    contrast: float


def smooth(values: Sequence[float], window: int) -> np.ndarray:
    """Centred moving average over ``window`` samples, averaging only real samples at the edges."""
    array = np.asarray(values, dtype=np.float64)
    if window <= 1 or array.size < 2:
        return array.copy()
    kernel = np.ones(min(window, array.size))
    sums = np.convolve(array, kernel, mode="same")
    counts = np.convolve(np.ones_like(array), kernel, mode="same")
    return sums / counts


def edge_between(times: Sequence[float], outside: int, inside: int) -> float:
    """The boundary between two adjacent samples: half-way between their times."""
    return (float(times[outside]) + float(times[inside])) / 2


def interval_from_curve(
    times: Sequence[float],
    scores: Sequence[float],
    range_start: float,
    range_end: float,
    *,
    window: int = 3,
    min_contrast: float = MIN_CONTRAST,
) -> CurveInterval:
    """The run of samples most clearly above the curve's mid level, as an interval in seconds.

    ``times`` are increasing sample times within [range_start, range_end]. The run with the most
    mass above the threshold wins (a long clear match beats a one-frame spike). A run touching the
    first or last sample extends to the range's edge. A flat curve gives the whole range.
    """
    if len(times) != len(scores) or not len(times):
        raise ValueError(f"need as many scores as times (got {len(scores)} and {len(times)})")
    curve = smooth(scores, window)
    floor, peak = float(curve.min()), float(curve.max())
    n = len(curve)
    if peak - floor < min_contrast:
        return CurveInterval(range_start, range_end, 0, n - 1, peak, peak - floor)
    threshold = (floor + peak) / 2
    above = curve > threshold
    best: tuple[float, int, int] | None = None
    i = 0
    while i < n:
        if not above[i]:
            i += 1
            continue
        j = i
        while j + 1 < n and above[j + 1]:
            j += 1
        mass = float((curve[i : j + 1] - threshold).sum())
        if best is None or mass > best[0]:
            best = (mass, i, j)
        i = j + 1
    assert best is not None  # the peak itself is above the mid level
    _, first, last = best
    start = range_start if first == 0 else edge_between(times, first - 1, first)
    end = range_end if last == n - 1 else edge_between(times, last + 1, last)
    return CurveInterval(start, end, first, last, threshold, peak - floor)


# ---------------------------------------------------------------------------- answers

_NUMBER = r"\d+(?:\.\d+)?"
_CLOCK = rf"(?:\d+:)?\d{{1,2}}:\d{{2}}(?:\.\d+)?|{_NUMBER}"
_UNIT = r"\s*(?:s|sec|secs|seconds?)?"
_INTERVAL = re.compile(
    rf"(?P<a>{_CLOCK}){_UNIT}\s*(?:-|–|—|to|until|and|,)\s*(?P<b>{_CLOCK}){_UNIT}", re.IGNORECASE
)


def parse_seconds(text: str) -> float:
    """``"75"``, ``"75.5"``, ``"1:15"`` or ``"0:01:15"`` as seconds."""
    parts = text.strip().split(":")
    if len(parts) > 3:
        raise ValueError(f"not a time: {text!r}")
    value = 0.0
    for part in parts:
        value = value * 60 + float(part)
    return value


def parse_interval(answer: str) -> Interval | None:
    """The first ``[t0, t1]`` / ``t0-t1`` / ``m:ss to m:ss`` interval written in ``answer``.

    Returns ``(start, end)`` in seconds with start <= end, or ``None`` when the text holds none.
    """
    match = _INTERVAL.search(answer or "")
    if match is None:
        return None
    a, b = parse_seconds(match["a"]), parse_seconds(match["b"])
    return (a, b) if a <= b else (b, a)


def grounding_report(
    answers: Sequence[str | Interval | None],
    golds: Sequence[Interval],
    thresholds: Sequence[float] = GROUNDING_THRESHOLDS,
) -> dict[str, float]:
    """R@IoU and mIoU of grounding answers (text is parsed; an unparsable answer scores 0)."""
    predictions = [parse_interval(a) if isinstance(a, str) else a for a in answers]
    return grounding_scores(predictions, golds, thresholds)


def refine_edge(
    t_inside: float,
    t_outside: float,
    probe_times: Sequence[float],
    probe_scores: Sequence[float],
    threshold: float,
) -> float:
    """A sharper boundary from extra samples taken between a sample inside and one outside.

    Walking from the inside sample towards the outside one, the edge lies half-way between the
    last probe still above ``threshold`` and the first one at or below it.
    """
    direction = 1.0 if t_outside > t_inside else -1.0
    probes = sorted(
        (
            (t, s)
            for t, s in zip(probe_times, probe_scores, strict=True)
            if direction * (t - t_inside) > 0 and direction * (t_outside - t) > 0
        ),
        key=lambda p: direction * (p[0] - t_inside),
    )
    last_inside = t_inside
    for t, score in probes:
        if score <= threshold:
            return (last_inside + t) / 2
        last_inside = t
    return (last_inside + t_outside) / 2
