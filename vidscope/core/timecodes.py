"""Times in a video as people read them (traces, answers, search results)."""

from __future__ import annotations

import re


def fmt_time(seconds: float) -> str:
    """``m:ss`` (or ``h:mm:ss``) for traces and answers."""
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def fmt_span(start: float, end: float) -> str:
    """``12.0-15.5s`` (seconds with one decimal, as perception results summarise an interval)."""
    return f"{start:.1f}-{end:.1f}s"


#: A time as people and models write it: ``75``, ``75.5``, ``75s``, ``1:15``, ``0:01:15.5``.
_TIME = r"(?:\d+:)?(?:\d+:)?\d+(?:\.\d+)?\s*(?:s|sec|secs|seconds)?"
_RANGE = re.compile(rf"^\s*\[?\s*({_TIME})\s*(?:-|–|—|to|,)\s*({_TIME})\s*\]?\s*$", re.IGNORECASE)
#: Keys of a range object, as models name them.
_START_KEYS = ("start", "start_time", "start_s", "from", "begin", "t0")
_END_KEYS = ("end", "end_time", "end_s", "to", "t1")


def parse_time(value: object) -> float:
    """Seconds from a number or a time written as text (``75``, ``75s``, ``1:15``, ``0:01:15.5``).

    Raises ``ValueError`` for anything else.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a time: {value!r}")
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"not a time: {value!r}")
    text = re.sub(r"\s*(?:s|sec|secs|seconds)$", "", value.strip(), flags=re.IGNORECASE)
    parts = text.split(":")
    if not 1 <= len(parts) <= 3 or not all(re.fullmatch(r"\d+(?:\.\d+)?", p) for p in parts):
        raise ValueError(f"not a time: {value!r}")
    seconds = 0.0
    for part in parts:
        seconds = seconds * 60 + float(part)
    return seconds


def parse_range(value: object) -> tuple[float, float]:
    """``(start, end)`` in seconds from the shapes models write a time range in.

    ``[10, 15]``, ``["0:10", "0:15"]``, ``{"start": 10, "end": 15}`` (also ``start_time``/``end_time``,
    ``from``/``to``), ``"0:10-0:15"``, ``"10s to 15s"``, ``"[10, 15]"``. Raises ``ValueError`` otherwise.
    """
    if isinstance(value, dict):
        start = next((value[k] for k in _START_KEYS if k in value), None)
        end = next((value[k] for k in _END_KEYS if k in value), None)
        if start is None or end is None:
            raise ValueError(f"not a time range: {value!r}")
        return parse_time(start), parse_time(end)
    if isinstance(value, list | tuple) and len(value) == 2:
        return parse_time(value[0]), parse_time(value[1])
    if isinstance(value, str):
        match = _RANGE.match(value)
        if match:
            return parse_time(match.group(1)), parse_time(match.group(2))
    raise ValueError(f"not a time range: {value!r}")
