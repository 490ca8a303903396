"""Uncertainty of evaluation numbers: score intervals for accuracies, bootstrap where needed.

An accuracy over a few hundred questions moves by several points from one sample of questions to
another, so a report gives each accuracy with a 95 % interval. Accuracies are proportions, and
categories are often small, so they get the **Wilson score interval** (:func:`wilson`): unlike a
percentile bootstrap, which resamples 3 right answers out of 3 into 100.0-100.0 and 0 out of 6
into 0.0-0.0, it stays honest at the edges (3/3: 43.9-100.0; 0/6: 0.0-39.0) and needs no seed.

Two runs on the same questions are compared *paired*. Right/wrong per question pairs get
Newcombe's hybrid score interval for a difference of paired proportions (:func:`paired_proportions`;
Newcombe 1998, "Improved confidence intervals for the difference between binomial proportions
based on paired data", method 10): it builds on the two runs' Wilson intervals and the correlation
of their answers, so it does not collapse to a point on a few questions either (3 shared
questions both runs got right: -56.1 to +56.1, not 0.0 to 0.0).

Metrics that are not proportions (a mean IoU, a mean of per-question scores) keep the seeded
percentile bootstrap (:func:`bootstrap_mean`, :func:`paired_difference`): :data:`RESAMPLES`
resamples with replacement, numpy's generator seeded with :data:`SEED`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import sqrt
from statistics import NormalDist

import numpy as np

#: Bootstrap resamples per interval.
RESAMPLES = 1000
#: The generator's seed: intervals are reproducible.
SEED = 0
#: The interval's coverage.
LEVEL = 0.95


#: How the report names the methods (``report.md``, ``summary.json``, ``eval compare``).
ACCURACY_METHOD = "Wilson score interval"
PAIRED_METHOD = "Newcombe's hybrid score interval for paired proportions (method 10)"


@dataclass(frozen=True)
class Interval:
    """A point estimate and its interval (fractions, not percent)."""

    value: float
    low: float
    high: float


def _z(level: float) -> float:
    return NormalDist().inv_cdf(0.5 + level / 2)


def wilson(correct: int, total: int, *, level: float = LEVEL) -> Interval:
    """``correct / total`` with its Wilson score interval. Raises ``ValueError`` for no questions
    or a count outside ``0..total``."""
    if total <= 0 or not 0 <= correct <= total:
        raise ValueError(f"{correct} right out of {total}")
    z = _z(level)
    p = correct / total
    scale = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / scale
    half = z * sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / scale
    # Clamp the rounding: 3/3's upper end is 1, not 1.0000000000000002.
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half))


def paired_proportions(a: Sequence[bool], b: Sequence[bool], *, level: float = LEVEL) -> Interval:
    """``mean(b) - mean(a)`` over paired right/wrong answers (the same questions, in the same
    order) with Newcombe's hybrid score interval (method 10). Raises ``ValueError`` for unequal
    lengths or no pairs."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} answers paired with {len(b)}")
    n = len(a)
    if n == 0:
        raise ValueError("no paired answers")
    both = sum(1 for x, y in zip(a, b, strict=True) if x and y)
    only_b = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    neither = n - both - only_a - only_b
    right_b, right_a = both + only_b, both + only_a
    pb, pa = wilson(right_b, n, level=level), wilson(right_a, n, level=level)
    # The correlation of the two runs' answers (phi of the 2x2 table); 0 when a margin is empty.
    margins = right_b * (n - right_b) * right_a * (n - right_a)
    phi = (both * neither - only_a * only_b) / sqrt(margins) if margins else 0.0
    below_b, above_b = pb.value - pb.low, pb.high - pb.value
    below_a, above_a = pa.value - pa.low, pa.high - pa.value
    low = sqrt(max(0.0, below_b**2 - 2 * phi * below_b * above_a + above_a**2))
    high = sqrt(max(0.0, above_b**2 - 2 * phi * above_b * below_a + below_a**2))
    diff = pb.value - pa.value
    return Interval(diff, max(-1.0, diff - low), min(1.0, diff + high))


def _percentiles(means: np.ndarray, value: float, level: float) -> Interval:
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    return Interval(value, float(low), float(high))


def bootstrap_mean(
    values: Sequence[float], *, resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL
) -> Interval:
    """The mean of ``values`` (1/0 for right/wrong answers) with its percentile bootstrap interval.

    Raises ``ValueError`` for no values.
    """
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("no values to bootstrap")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, data.size, size=(resamples, data.size))
    return _percentiles(data[picks].mean(axis=1), float(data.mean()), level)


def paired_difference(
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> Interval:
    """``mean(b) - mean(a)`` over paired values (the same questions, in the same order) with a
    paired bootstrap interval. Raises ``ValueError`` for unequal lengths or no values."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} values paired with {len(b)}")
    diff = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    return bootstrap_mean(diff.tolist(), resamples=resamples, seed=seed, level=level)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100, linear interpolation) of ``values``; 0 for none."""
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else 0.0
