"""Burned-in clocks: on-screen timestamps read as wall-clock time, and wall-clock time back to video time.

CCTV, dashcams and screen recordings print the time in a corner. The ``ocr`` stage reads such a
region sparsely (:mod:`vidscope.tasks.ocr`) and stores every reading that parses as a time of day
(:func:`parse_clock`) in the ``clock_readings`` table: the video second, the text and the wall time
it shows. A clock shows no time zone, so wall times are naive: what the clock said, compared with
what the user typed.

Mapping back: a reading at video second ``t`` showing wall time ``w`` has the offset ``w - t``. A
clock runs at real time, so the readings of one continuous recording share their offset, within
:data:`OFFSET_TOLERANCE`; a cut or a reset of the clock starts a new :class:`ClockRun`. A misread
(a run of one reading while the video has longer runs) is left out. :func:`video_spans` turns a
wall-clock range (``--from 14:30 --to 14:35`` or full ISO times) into video spans per video.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from vidscope.storage.schema import sql_quote
from vidscope.storage.store import Store

#: The date given to a clock that shows only the time of day (its readings say ``dated=False``).
UNDATED = date(2000, 1, 1)
#: Readings of one recording agree on ``wall - t`` within this many seconds: the clock shows whole
#: seconds and a stored frame lies up to one frame interval (0.5 s at 2 fps) from its time.
OFFSET_TOLERANCE = 2.0

_YMD = re.compile(r"(?<!\d)(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})")
_DMY = re.compile(r"(?<!\d)(\d{1,2})[-/.](\d{1,2})[-/.](\d{4})(?!\d)")
_TIME = re.compile(r"(?<!\d)(\d{1,2}):(\d{2})(?::(\d{2}))?(?:\s*([AaPp])\.?[Mm]\.?)?(?!\d)")
_BOUND_TIME = re.compile(r"\s*(\d{1,2}):(\d{2})(?::(\d{2}))?(?:\s*([AaPp])\.?[Mm]\.?)?\s*")


@dataclass(frozen=True)
class ClockTime:
    """What a clock line says: the wall time, whether it showed a date and whether it shows seconds
    (a clock with seconds changes at every sample: the OCR stage reads it sparsely at once)."""

    wall: datetime
    dated: bool
    seconds: bool


def _time_of(match: re.Match[str]) -> time | None:
    hour, minute = int(match.group(1)), int(match.group(2))
    second = int(match.group(3)) if match.group(3) else 0
    half = (match.group(4) or "").lower()
    if half:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if half == "p" else 0)
    if hour > 23 or minute > 59 or second > 59:
        return None
    return time(hour, minute, second)


def _date_of(text: str) -> tuple[date, int] | None:
    """The first date in ``text`` (year first, else day or month first) and where it ends."""
    if match := _YMD.search(text):
        year, month, day = (int(g) for g in match.groups())
    elif match := _DMY.search(text):
        first, second, year = (int(g) for g in match.groups())
        # Day first, as most clocks outside the US print it; month first only when the first
        # number cannot be a month's day order (13-31 in the second place).
        day, month = (second, first) if second > 12 >= first else (first, second)
    else:
        return None
    try:
        return date(year, month, day), match.end()
    except ValueError:
        return None


def parse_clock(text: str) -> ClockTime | None:
    """The wall time a clock line shows (``2026-11-28 14:30:05``, ``28/11/2026 2:30:05 PM``,
    ``14:30:05``; OCR may drop the space between date and time), or ``None`` when it shows none."""
    found = _date_of(text)
    rest = text[found[1] :] if found else text
    match = _TIME.search(rest)
    if match is None:
        return None
    moment = _time_of(match)
    if moment is None:
        return None
    day = found[0] if found else UNDATED
    return ClockTime(datetime.combine(day, moment), dated=found is not None, seconds=bool(match.group(3)))


Bound = datetime | time


def parse_bound(text: str) -> Bound:
    """A wall-clock bound as typed: a time of day (``14:30``, ``14:30:05``, ``2:30 PM``) or an ISO
    date and time (``2026-11-28T14:30``, ``2026-11-28 14:30:05``; a zone, if given, is dropped: the
    clock shows none). Raises ``ValueError`` with one line otherwise."""
    if match := _BOUND_TIME.fullmatch(text):
        moment = _time_of(match)
        if moment is not None:
            return moment
    try:
        return datetime.fromisoformat(text.strip()).replace(tzinfo=None)
    except ValueError:
        pass
    raise ValueError(
        f"{text!r} is not a clock time: give HH:MM[:SS] or an ISO date and time (2026-11-28T14:30)"
    )


def named_clock_time(question: str) -> tuple[Bound, Bound] | None:
    """The wall-clock range a question names (``what happened at 14:32?`` → 14:32:00–14:33:00; with
    seconds, that second; with a date before it, on that date), or ``None`` when it names none."""
    found = _date_of(question)
    match = _TIME.search(question[found[1] :] if found else question)
    if match is None:
        return None
    moment = _time_of(match)
    if moment is None:
        return None
    step = timedelta(seconds=1 if match.group(3) else 60)
    if found is not None:
        start = datetime.combine(found[0], moment)
        return start, start + step
    end = (datetime.combine(UNDATED, moment) + step).time()
    return moment, end


@dataclass(frozen=True)
class ClockRun:
    """A stretch of one video whose clock readings agree: ``wall = t + offset`` for ``t`` in
    ``[t0, t1]`` (``offset`` in seconds since :data:`UNDATED`'s midnight)."""

    video_id: str
    t0: float
    t1: float
    offset: float
    dated: bool
    readings: int

    def wall_at(self, t: float) -> datetime:
        """The wall time the clock shows at video second ``t``."""
        return _EPOCH + timedelta(seconds=t + self.offset)


_EPOCH = datetime.combine(UNDATED, time())


def _seconds(wall: datetime) -> float:
    return (wall - _EPOCH).total_seconds()


def clock_runs(readings: Iterable[dict[str, Any]]) -> list[ClockRun]:
    """Runs of consistent readings (rows with ``video_id``, ``t``, ``wall``, ``dated``) per video.

    A run spans from its first reading (from 0 for a video's first run) to the next run's first
    reading, or past its last reading by its median gap between readings. Runs of one reading are
    dropped when the video has a longer run (a misread clock)."""
    by_video: dict[str, list[dict[str, Any]]] = {}
    for row in readings:
        by_video.setdefault(str(row["video_id"]), []).append(row)
    runs: list[ClockRun] = []
    for video_id, rows in sorted(by_video.items()):
        rows.sort(key=lambda r: float(r["t"]))
        groups: list[list[dict[str, Any]]] = []
        for row in rows:
            offset = _seconds(row["wall"]) - float(row["t"])
            for group in reversed(groups[-3:]):  # a misread between two good readings is skipped
                last = group[-1]
                if (
                    bool(last["dated"]) == bool(row["dated"])
                    and abs(_seconds(last["wall"]) - float(last["t"]) - offset) <= OFFSET_TOLERANCE
                ):
                    group.append(row)
                    break
            else:
                groups.append([row])
        if any(len(g) > 1 for g in groups):
            groups = [g for g in groups if len(g) > 1]
        groups.sort(key=lambda g: float(g[0]["t"]))
        for i, group in enumerate(groups):
            times = [float(r["t"]) for r in group]
            offsets = sorted(_seconds(r["wall"]) - float(r["t"]) for r in group)
            gaps = sorted(b - a for a, b in zip(times, times[1:], strict=False))
            end = (
                float(groups[i + 1][0]["t"])
                if i + 1 < len(groups)
                else times[-1] + (gaps[len(gaps) // 2] if gaps else 0.0)
            )
            runs.append(
                ClockRun(
                    video_id=video_id,
                    t0=0.0 if i == 0 else times[0],
                    t1=max(end, times[-1]),
                    offset=offsets[len(offsets) // 2],
                    dated=bool(group[0]["dated"]),
                    readings=len(group),
                )
            )
    return runs


def load_runs(store: Store, video_ids: Sequence[str] | None = None) -> list[ClockRun]:
    """The clock runs of ``video_ids`` (every video when ``None``); none in a store made before
    clocks were read (the table is absent until the ``ocr`` stage writes it)."""
    if store.existing_dataset(store.clock_readings) is None:
        return []
    where = None
    if video_ids is not None:
        if not video_ids:
            return []
        where = f"video_id IN ({', '.join(sql_quote(v) for v in sorted(set(video_ids)))})"
    rows = store.rows(store.clock_readings, where=where, columns=["video_id", "t", "wall", "dated"])
    return clock_runs(rows.to_pylist())


def _windows(run: ClockRun, lo: Bound | None, hi: Bound | None) -> list[tuple[float, float]]:
    """``[lo, hi)`` as wall seconds (since :data:`UNDATED`'s midnight) over the days ``run`` covers.

    Full date-times apply as they are to a dated clock; a time of day (or any bound on an undated
    clock) applies on every day the run covers, a range whose end is not after its start crossing
    midnight."""
    first, last = run.wall_at(run.t0), run.wall_at(run.t1)
    if run.dated and not isinstance(lo, time) and not isinstance(hi, time):
        start = _seconds(lo) if isinstance(lo, datetime) else float("-inf")
        end = _seconds(hi) if isinstance(hi, datetime) else float("inf")
        return [(start, end)]
    low = lo.time() if isinstance(lo, datetime) else lo
    high = hi.time() if isinstance(hi, datetime) else hi
    windows = []
    day = first.date() - timedelta(days=1)
    while day <= last.date():
        opens = datetime.combine(day, low if low is not None else time())
        closes = datetime.combine(day + timedelta(days=0 if high is not None else 1), high or time())
        if closes <= opens:
            closes += timedelta(days=1)
        windows.append((_seconds(opens), _seconds(closes)))
        day += timedelta(days=1)
    return windows


def video_spans(
    runs: Iterable[ClockRun], lo: Bound | None, hi: Bound | None
) -> list[tuple[str, float, float]]:
    """The (video, start, end) spans, in video seconds, whose clock shows a time in ``[lo, hi)``."""
    spans = []
    for run in runs:
        for start, end in _windows(run, lo, hi):
            t0, t1 = max(run.t0, start - run.offset), min(run.t1, end - run.offset)
            if t1 > t0 or (t1 == t0 and run.t0 <= t0 <= run.t1 and start < end):
                spans.append((run.video_id, t0, max(t1, t0)))
    return sorted(spans, key=lambda s: (s[0], s[1]))


def spans_filter(spans: Sequence[tuple[str, float, float]]) -> str:
    """A Lance SQL filter for clips (``start``/``end`` columns) overlapping any of ``spans``."""
    return " OR ".join(
        f"(video_id = {sql_quote(v)} AND `end` > {t0!r} AND `start` <= {t1!r})" for v, t0, t1 in spans
    )
