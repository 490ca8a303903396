"""Uncertainty of evaluation numbers: seeded bootstrap intervals over questions.

An accuracy over a few hundred questions moves by several points from one sample of questions to
another, so a report gives each accuracy with a 95 % percentile bootstrap interval: the questions
are resampled with replacement :data:`RESAMPLES` times (numpy's generator seeded with
:data:`SEED`, so the same run gives the same interval every time) and the 2.5th and 97.5th
percentiles of the resampled means are the interval's ends.

Two runs on the same questions are compared *paired*: each resample draws the same questions for
both, so the interval of the difference reflects how the runs differ on each question rather than
how hard the questions happen to be.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Bootstrap resamples per interval.
RESAMPLES = 1000
#: The generator's seed: intervals are reproducible.
SEED = 0
#: The interval's coverage.
LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    """A point estimate and its bootstrap interval (fractions, not percent)."""

    value: float
    low: float
    high: float


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
