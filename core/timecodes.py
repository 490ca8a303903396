"""Times in a video as people read them (traces, answers, search results)."""

from __future__ import annotations


def fmt_time(seconds: float) -> str:
    """``m:ss`` (or ``h:mm:ss``) for traces and answers."""
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"
