"""Time spans (start, end) in seconds: the one place that joins them."""

from __future__ import annotations

from collections.abc import Iterable

#: Spans closer than this (seconds) count as one when joined.
ADJACENT_GAP_S = 0.5


def merge_spans(
    spans: Iterable[tuple[float, float]], gap: float = ADJACENT_GAP_S
) -> list[tuple[float, float]]:
    """Spans sorted, with overlapping or adjacent (within ``gap`` seconds) ones joined."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1] + gap:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
