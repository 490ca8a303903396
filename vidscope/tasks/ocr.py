"""Read on-screen text from sampled frames (the ``ocr`` stage).

OCR is the slowest embedded model, so it reads a subset of the stored frames (``ingest.ocr_fps``)
and, of those, only the frames whose text may have changed:

1. a frame that looks the same as the previous one (tiny grey thumbnails) keeps its result;
2. otherwise, when the reader can find text regions without reading them
   (:class:`~vidscope.models.protocols.text_reader.TextRegionFinder`) and ``ingest.ocr_gate_side``
   is not 0, the *gate* detects text regions at the stored frame size (a fraction of a full read's
   cost). Regions that cannot be a legible line of text (:func:`plausible_text`: thinner than a
   glyph, taller than a title, or not longer than high) and regions that a full read found empty
   whose pixels have not changed since are dropped; no regions left means no text; the same
   regions as the last frame read, with the same pixels inside them (compared in cells about one
   character wide), keep that read;
3. anything else is read in full.

Most frames are not even looked at: OCR looks at one sampled frame per
``ingest.ocr_min_text_seconds`` (a *probe*). When the probe shows the text of the frame before the
span — the same picture, no text as before, or the last read's regions with the same pixels — the
frames between keep that result unseen; otherwise the span is halved and each half probed the same
way, down to single frames looked at as above. So the cost
follows how often the text changes, plus one cheap look per span: text shown at least that long
always holds a probe or a frame looked at; briefer text between two probes that agree can be missed.

Text that stays on screen across consecutive sampled frames becomes one item with a time span
instead of one row per frame, whichever of the three produced the lines.

**Tickers** (issue 44). A burned-in clock, a frame counter or a news ticker changes at every look,
so "the same regions with the same pixels" never holds and every probe would end in full reads
(a 1-hour CCTV video: 22 minutes of OCR). A region becomes a *ticker* when a full read finds a clock
with seconds in it (:func:`~vidscope.tasks.clock.parse_clock`); when a line at the same place
changed in its digits alone at :data:`COUNTER_READS` full reads in a row, each within two sampled
frames of the one before (a counter); or when its pixels changed at :data:`TICKER_LOOKS` looks in a
row in time order (probes) *and* its cropped text read differently at two looks in a row (text
over moving footage changes its pixels at every look, its words never; a slide's words once).
A ticker is left out of the "did the text change" test, so the frame's other text is still read
when, and only when, it changes; the ticker itself is read once per ``ingest.ocr_clock_seconds``,
by recognising its crop alone when the reader can
(:class:`~vidscope.models.protocols.text_reader.LineRecogniser`, ~25 ms against ~0.5 s for a
frame). A ticker no gate region matched for :data:`TICKER_LOOKS` looks in a row is dropped.
Readings that parse as a clock go to the ``clock_readings`` table (wall-clock time,
:mod:`vidscope.tasks.clock`), the others become on-screen text items like any other.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from vidscope.core.images import decode_jpeg
from vidscope.core.settings import IngestSettings, Settings
from vidscope.models import registry
from vidscope.models.protocols.text_reader import (
    LineRecogniser,
    StoredSizeReader,
    TextLine,
    TextReader,
    TextRegionFinder,
)
from vidscope.tasks.clock import parse_clock
from vidscope.tasks.stage import (
    Stage,
    StageContext,
    StageNotApplicable,
    StageOutcome,
    role_config,
)

READ_BATCH = 64
#: Mean absolute difference (0–255) of 64x36 grey thumbnails under which a frame is "the same".
SAME_FRAME_DIFF = 2.0
#: Text similarity above which two reads are the same on-screen text (OCR misreads a character).
SAME_TEXT_RATIO = 0.8
#: Overlap (intersection over union) above which a gate region is "the same place" as one of the
#: last frame read.
SAME_REGION_IOU = 0.5
#: Mean absolute grey difference (0–255) of a region cell (a square about one character wide)
#: above which the text in it changed. JPEG noise on unchanged text stays under ~3; one changed
#: character moves its cell by tens.
CHANGED_CELL_DIFF = 10.0
#: A gate region thinner than this (px at the stored size, across the line) holds no legible
#: glyph: an enlarged full read (see below) upscales a 640x360 frame ~2x, so that is ~16 px there.
#: On the real sample footage (no on-screen text) the detector also returns specks 5-8 px thick.
MIN_TEXT_HEIGHT = 8.0
#: A full read detects text at the stored frame size (:class:`StoredSizeReader`, ~3x cheaper than
#: RapidOCR's default of enlarging a 640x360 frame to 1312x736) when every gate region is at least
#: this thick; a thinner one, or no region, and the frame is enlarged as before. Measured on lines
#: of DejaVu Sans in 640x360 and 320x180 frames: from an 8-px font (regions 12-20 px) both reads
#: give the same text; a 6-px font (regions 10-15 px) reads 0.74 of its characters at the stored
#: size against 0.85 enlarged. On the 12-minute slide lecture of benchmarks/ocr_clock.py all 24 full
#: reads give the same text at both sizes.
STORED_SIZE_TEXT_HEIGHT = 12.0
#: A gate region thicker than this share of the frame's shorter side is a blob of scene detail
#: (up to the whole frame on the real sample footage), not a line of text; the synthetic titles,
#: 1/8 of the frame high, give regions 0.11-0.15 of it.
MAX_TEXT_HEIGHT_SHARE = 0.4
#: A region must be at least this many times longer than thick: a line of 2+ glyphs (a big
#: two-glyph word such as "42" or "HI" gives 1.3-1.45). On the real sample footage most regions are
#: square texture 1.0-1.3x long, and the synthetic videos' walking square is mostly 1.0-1.25x (up
#: to 1.36x); the price is that a lone glyph (a single digit) is never read.
MIN_TEXT_ASPECT = 1.25
#: Regions a full read found empty are remembered (newest first) for this many reads.
BLANK_MEMORY = 32
#: Looks in a row (in time order) at which a region's pixels changed in place before it is read as a
#: ticker: 4 probes are 16 s at the default one probe per 4 s, longer than any slide is shown in
#: the lectures measured (30 s slides), so slides stay ordinary text.
TICKER_LOOKS = 4
#: Pixels of context around a ticker's region in the crop it is read from, as a share of its
#: height on each side; the region may also grow to the right (a counter gaining a digit).
#: Full reads in a row, each within two sampled frames of the one before, in which a line at the same
#: place changed in its digits alone ("FRAME 25", "FRAME 30"): a counter or clock, made a ticker at
#: once rather than after :data:`TICKER_LOOKS` probes (a slide's page number changes far less often).
COUNTER_READS = 2
TICKER_MARGIN = 0.25
TICKER_GROW = 1.0


def normalise_text(text: str) -> str:
    """Case-folded, whitespace-collapsed text used to compare reads."""
    return re.sub(r"\s+", " ", text).strip().casefold()


def thumbnail(image: np.ndarray) -> np.ndarray:
    """A tiny grey version of ``image`` for cheap "did anything change" tests."""
    return np.asarray(Image.fromarray(image).convert("L").resize((64, 36)), dtype=np.float32)


Region = tuple[int, int, int, int]  # x0, y0, x1, y1 (pixels, exclusive ends)


def region_of(box: tuple[float, ...], width: int, height: int) -> Region:
    """The axis-aligned pixel rectangle around a corner-point box, clipped to the frame."""
    xs, ys = box[0::2], box[1::2]
    x0, y0 = max(0, int(min(xs))), max(0, int(min(ys)))
    x1, y1 = min(width, int(np.ceil(max(xs))) + 1), min(height, int(np.ceil(max(ys))) + 1)
    return x0, y0, max(x0, x1), max(y0, y1)


def plausible_text(box: tuple[float, ...], width: int, height: int) -> bool:
    """Whether a detected corner-point box could hold a legible line of text (see the constants).

    Thickness and length are the box's two side lengths (detectors return rotated rectangles), so
    vertical and slanted lines count like horizontal ones.
    """
    corners = np.asarray(box[:8], dtype=np.float64).reshape(4, 2)
    sides = np.linalg.norm(corners - np.roll(corners, -1, axis=0), axis=1)
    thick, long = float(min(sides[0], sides[1])), float(max(sides[0], sides[1]))
    return MIN_TEXT_HEIGHT <= thick <= MAX_TEXT_HEIGHT_SHARE * min(width, height) and long >= (
        MIN_TEXT_ASPECT * thick
    )


def _iou(a: Region, b: Region) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def region_changed(grey: np.ndarray, before: np.ndarray, region: Region) -> bool:
    """Whether the pixels in ``region`` differ between two grey frames, cell by cell.

    The region is cut into squares as wide as it is high (about one character), so that one
    changed character in a long line is not averaged away by the unchanged rest.
    """
    x0, y0, x1, y1 = region
    if x1 <= x0 or y1 <= y0:
        return False
    diff = np.abs(grey[y0:y1, x0:x1] - before[y0:y1, x0:x1]).mean(axis=0)  # per column
    cells = max(1, round((x1 - x0) / (y1 - y0)))
    return max(float(cell.mean()) for cell in np.array_split(diff, cells)) > CHANGED_CELL_DIFF


@dataclass
class _LastRead:
    """The last frame read in full: its grey pixels, gate regions and lines."""

    grey: np.ndarray
    regions: list[Region]
    lines: list[TextLine]
    t: float = 0.0


def same_text(last: _LastRead, grey: np.ndarray, regions: list[Region]) -> bool:
    """Whether ``regions`` of the frame ``grey`` hold the text of the last frame read.

    Both ways: every region matches one of the last read's and every one of those is still there
    (text that appeared or went away means a new read), and no matched region's pixels changed.
    """
    if len(regions) != len(last.regions):
        return False
    for region in regions:
        match = max(last.regions, key=lambda old: _iou(region, old))
        if _iou(region, match) < SAME_REGION_IOU:
            return False
        if region_changed(grey, last.grey, region) or region_changed(grey, last.grey, match):
            return False
    return all(max(_iou(old, new) for new in regions) >= SAME_REGION_IOU for old in last.regions)


def holds_line(region: Region, lines: list[TextLine], width: int, height: int) -> bool:
    """Whether any read line overlaps ``region`` by at least 30 % of the smaller of the two."""
    for line in lines:
        box = region_of(line.box, width, height)
        w = min(box[2], region[2]) - max(box[0], region[0])
        h = min(box[3], region[3]) - max(box[1], region[1])
        smaller = min(
            (box[2] - box[0]) * (box[3] - box[1]), (region[2] - region[0]) * (region[3] - region[1])
        )
        if w > 0 and h > 0 and w * h >= 0.3 * smaller:
            return True
    return False


@dataclass
class BlankRegion:
    """A gate region that a full read found no text in, with the frame's grey pixels then."""

    region: Region
    grey: np.ndarray


def known_blank(blanks: list[BlankRegion], grey: np.ndarray, region: Region) -> bool:
    """Whether ``region`` is one a full read found empty, in the same place with the same pixels."""
    return any(
        _iou(region, b.region) >= SAME_REGION_IOU
        and not region_changed(grey, b.grey, region)
        and not region_changed(grey, b.grey, b.region)
        for b in blanks
    )


def grey_frame(image: np.ndarray) -> np.ndarray:
    """``image`` as float32 grey levels, the gate's pixels for region comparisons."""
    return np.asarray(Image.fromarray(image).convert("L"), dtype=np.float32)


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

    def __init__(self, interval: float, same_ratio: float = SAME_TEXT_RATIO) -> None:
        self.interval = interval
        self.same_ratio = same_ratio
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
                    and difflib.SequenceMatcher(None, item.norm, norm).ratio() >= self.same_ratio
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


def confident(lines: list[TextLine], settings: IngestSettings) -> list[TextLine]:
    """The lines of one frame worth keeping: at least ``ocr_min_score``, holding a letter or a
    digit (a line of nothing but symbols, such as "■" read from a square of scenery, is a shape,
    not text), and, when the frame holds nothing but single characters, at least
    ``ocr_lone_glyph_score`` (a lone glyph on a frame without text is most often scenery read as a
    character)."""
    kept = [ln for ln in lines if ln.score >= settings.ocr_min_score and any(ch.isalnum() for ch in ln.text)]
    if kept and all(len(ln.text.strip()) <= 1 for ln in kept):
        kept = [ln for ln in kept if ln.score >= settings.ocr_lone_glyph_score]
    return kept


@dataclass
class _Look:
    """A sampled frame as the cheap tests see it: pixels, thumbnail and (once the gate ran on it)
    its text-shaped regions, before any region read empty is set aside."""

    image: np.ndarray
    thumb: np.ndarray
    t: float = 0.0
    grey: np.ndarray | None = None
    regions: list[Region] | None = None


@dataclass
class Ticker:
    """A region whose text changes at every look (a clock, a counter, a ticker), read sparsely."""

    region: Region
    due: float  # the video second from which it is read again
    missing: int = 0  # looks in a row at which no gate region matched it


@dataclass
class _Streak:
    """A gate region and how many looks in a row its pixels changed in place."""

    region: Region
    changes: int
    text: str | None = None  # what its crop read, once it had changed long enough to be read
    text_changes: int = 0  # crop reads in a row that differed from the read before


class _Lines:
    """Decides the lines of each sampled frame, in order, as cheaply as it may (see the module
    docstring): the state is the frame before (thumbnail, lines), the last full read and the
    regions read empty; the counters say how each frame got its lines."""

    def __init__(self, reader: TextReader, settings: IngestSettings) -> None:
        self.reader, self.settings = reader, settings
        self.finder = reader if isinstance(reader, TextRegionFinder) and settings.ocr_gate_side > 0 else None
        self.stored_size: StoredSizeReader | None = None
        if self.finder is not None and isinstance(reader, StoredSizeReader):
            self.stored_size = reader
        self.thumb: np.ndarray | None = None
        self.lines: list[TextLine] = []
        self.last: _LastRead | None = None
        self.blanks: list[BlankRegion] = []
        how = ("reused", "no_text", "same", "read", "read_at_stored_size", "between", "gate_runs")
        self.counts = dict.fromkeys((*how, "ticker_reads"), 0)
        self.recogniser = reader if isinstance(reader, LineRecogniser) else None
        self.tickers: list[Ticker] = []
        #: (video second, line) of every ticker reading, in the order read.
        self.ticker_lines: list[tuple[float, TextLine]] = []
        self._streaks: list[_Streak] = []
        self._streak_look: _Look | None = None
        self._counters: list[_Streak] = []  # lines whose digits alone changed, read after read
        self.interval = max(1, round(settings.frame_fps / settings.ocr_fps)) / settings.frame_fps

    def look(self, jpeg: bytes, t: float = 0.0) -> _Look:
        image = decode_jpeg(jpeg)
        return _Look(image, thumbnail(image), t)

    # -------------------------------------------------------------- tickers

    def _ticker_of(self, region: Region) -> Ticker | None:
        return next((tk for tk in self.tickers if _same_place(region, tk.region)), None)

    def _promote(self, region: Region, t: float) -> None:
        if self.settings.ocr_clock_seconds > 0 and self._ticker_of(region) is None:
            self.tickers.append(Ticker(region, due=t))

    def _track_streaks(self, look: _Look) -> None:
        """Count, per region, the looks in a row (later and later) at which its pixels changed in
        place; promote a region to ticker at :data:`TICKER_LOOKS`; drop tickers no region matches."""
        before = self._streak_look
        if before is not None and look.t <= before.t:
            return  # a look inside a span already probed later: not in time order
        assert look.regions is not None and look.grey is not None
        streaks = []
        for region in look.regions:
            old = max(self._streaks, key=lambda s: _iou(region, s.region), default=None)
            changes = 0
            if (
                old is not None
                and before is not None
                and before.grey is not None
                and _iou(region, old.region) >= SAME_REGION_IOU
                and region_changed(look.grey, before.grey, region)
            ):
                changes = old.changes + 1
            streak = _Streak(region, changes)
            if old is not None and changes:
                streak.text, streak.text_changes = old.text, old.text_changes
            streaks.append(streak)
            if changes >= TICKER_LOOKS and self._ticker_of(region) is None:
                if self._text_changed(look, streak):
                    self._promote(region, look.t)
                elif not streak.text_changes:
                    # Same words (text over moving footage): the next crop read waits until its
                    # pixels have changed at TICKER_LOOKS more looks, so such a region costs one
                    # crop read per TICKER_LOOKS probes, not one per probe.
                    streak.changes = 0
            if (ticker := self._ticker_of(region)) is not None:
                ticker.region, ticker.missing = region, -1  # follow it (a counter gaining a digit)
        for ticker in self.tickers:
            ticker.missing += 1
        # Gone (the detector can miss a small region once): no region matched it for as many
        # looks in a row as it took to find it.
        self.tickers = [tk for tk in self.tickers if tk.missing < TICKER_LOOKS]
        self._streaks, self._streak_look = streaks, look

    def _text_changed(self, look: _Look, streak: _Streak) -> bool:
        """Whether the text in a region whose pixels keep changing changed too, at two crop reads in
        a row: each reads differently from the one before (the first from the last full read's
        line there). Text drawn over moving footage changes its pixels at every look and its words
        never, a slide's words once; only a reader that reads crops can tell (without one, pixels
        alone promote nothing)."""
        if self.recogniser is None:
            return False
        ((text, _),) = self.recogniser.recognise([_crop(look.image, streak.region)])
        before = streak.text
        if before is None and self.last is not None:
            height, width = look.image.shape[:2]
            there = [ln.text for ln in self.last.lines if holds_line(streak.region, [ln], width, height)]
            before = " ".join(there) if there else None
        streak.text = text
        changed = before is not None and (
            difflib.SequenceMatcher(None, normalise_text(before), normalise_text(text)).ratio()
            < SAME_TEXT_RATIO
        )
        streak.text_changes = streak.text_changes + 1 if changed else 0
        return streak.text_changes >= 2

    def _count_digit_changes(self, look: _Look, lines: list[TextLine]) -> None:
        """Promote lines whose digits alone changed at :data:`COUNTER_READS` full reads in a row,
        each close in time to the one before (see the constant)."""
        last = self.last
        if last is None or not 0 < look.t - last.t <= 2 * self.interval + 1e-9:
            self._counters = []
            return
        height, width = look.image.shape[:2]
        counters = []
        for line in lines:
            box = region_of(line.box, width, height)
            before = [
                ln for ln in last.lines if _iou(box, region_of(ln.box, width, height)) >= SAME_REGION_IOU
            ]
            if not any(_digits_changed(old.text, line.text) for old in before):
                continue
            old = max(self._counters, key=lambda c: _iou(box, c.region), default=None)
            changes = old.changes + 1 if old is not None and _iou(box, old.region) >= SAME_REGION_IOU else 1
            counters.append(_Streak(box, changes))
            if changes >= COUNTER_READS:
                home = [r for r in look.regions or [] if holds_line(r, [line], width, height)]
                self._promote(home[0] if home else box, look.t)
        self._counters = counters

    def _masked(self, regions: list[Region]) -> list[Region]:
        """``regions`` without the tickers: what the "did the text change" test compares."""
        return [r for r in regions if self._ticker_of(r) is None] if self.tickers else regions

    def _unmasked_last(self) -> _LastRead | None:
        if self.last is None or not self.tickers:
            return self.last
        return _LastRead(self.last.grey, self._masked(self.last.regions), self.last.lines)

    def visible(self, lines: list[TextLine], width: int, height: int) -> list[TextLine]:
        """``lines`` less those inside a ticker (a ticker's text is read and kept on its own)."""
        if not self.tickers:
            return lines
        return [
            ln for ln in lines if not any(holds_line(tk.region, [ln], width, height) for tk in self.tickers)
        ]

    def read_tickers(self, look: _Look, every: float) -> None:
        """Read the tickers due at ``look`` (each then due again ``every`` seconds later)."""
        due = [tk for tk in self.tickers if tk.due <= look.t + 1e-9]
        if not due:
            return
        height, width = look.image.shape[:2]
        if self.recogniser is None:
            lines = confident(self.reader.read(look.image), self.settings)
            for ticker in due:
                for line in lines:
                    if holds_line(ticker.region, [line], width, height):
                        self.ticker_lines.append((look.t, line))
        else:
            crops = [_crop(look.image, tk.region) for tk in due]
            for ticker, (text, score) in zip(due, self.recogniser.recognise(crops), strict=True):
                x0, y0, x1, y1 = ticker.region
                box = (float(x0), float(y0), float(x1), float(y0), float(x1), float(y1), float(x0), float(y1))
                line = TextLine(text=text, box=box, score=score)
                if text.strip() and confident([line], self.settings):
                    self.ticker_lines.append((look.t, line))
        for ticker in due:
            ticker.due = look.t + every
        self.counts["ticker_reads"] += len(due)

    def _gate(self, look: _Look) -> list[Region]:
        """The frame's text-shaped regions, less those known to be empty (the detection runs once
        per frame, the blank check each time: what is known empty changes as frames are read)."""
        assert self.finder is not None
        if look.regions is None:
            height, width = look.image.shape[:2]
            look.grey = grey_frame(look.image)
            look.regions = [
                region_of(b, width, height)
                for b in self.finder.find_text(look.image, self.settings.ocr_gate_side)
                if plausible_text(b, width, height)
            ]
            self.counts["gate_runs"] += 1
            self._track_streaks(look)
        assert look.grey is not None
        return [r for r in look.regions if not known_blank(self.blanks, look.grey, r)]

    def _same_frame(self, look: _Look) -> bool:
        return self.thumb is not None and float(np.abs(look.thumb - self.thumb).mean()) < SAME_FRAME_DIFF

    def unchanged(self, probe: _Look) -> str | None:
        """How ``probe`` is known to show the text of the frame before it without a full read
        (``reused``: the same picture; ``no_text``: no text, and none before; ``same``: the same
        regions and pixels as the last read, whose lines the frame before has), else None."""
        if self._same_frame(probe):
            return "reused"
        if self.finder is None:
            return None
        regions = self._masked(self._gate(probe))
        if not regions:
            return "no_text" if not self._other_lines(probe) else None
        last = self._unmasked_last()
        if last is not None and self.lines is last.lines:
            assert probe.grey is not None
            return "same" if same_text(last, probe.grey, regions) else None
        return None

    def _other_lines(self, look: _Look) -> list[TextLine]:
        """The lines of the frame before, less those of tickers."""
        height, width = look.image.shape[:2]
        return self.visible(self.lines, width, height)

    def settle(self, probe: _Look, how: str, skipped: int) -> list[TextLine]:
        """The probe and the ``skipped`` frames before it keep the lines of the frame before them."""
        self.counts[how] += 1
        self.counts["between"] += skipped
        self.thumb = probe.thumb
        return self.lines

    def decide(self, look: _Look) -> list[TextLine]:
        """The lines of the next frame, looked at by itself: the same picture as the frame before
        keeps its lines; else the gate (no text-shaped regions: no text; the last read's regions
        and pixels: its lines); else a full read."""
        if self._same_frame(look):
            lines, how = self.lines, "reused"
        elif self.finder is None:
            lines, how = self._read(look), "read"
        elif not (regions := self._masked(self._gate(look))):
            lines, how = [], "no_text"
        elif (
            (last := self._unmasked_last()) is not None
            and look.grey is not None
            and same_text(last, look.grey, regions)
        ):
            lines, how = self.last.lines if self.last is not None else [], "same"
        else:
            lines, how = self._read(look), "read"
        self.counts[how] += 1
        self.thumb, self.lines = look.thumb, lines
        return lines

    def _read(self, look: _Look) -> list[TextLine]:
        """Read the frame in full; with the gate, remember it (and its regions found empty)."""
        lines = confident(self._full_read(look), self.settings)
        if self.finder is None:
            return lines
        height, width = look.image.shape[:2]
        regions = self._gate(look)
        assert look.grey is not None
        held = [r for r in regions if holds_line(r, lines, width, height)]
        for line in lines:
            # A clock with seconds changes at every look: read it sparsely from now on.
            clock = parse_clock(line.text)
            if clock is not None and clock.seconds:
                home = [r for r in held if holds_line(r, [line], width, height)]
                self._promote(home[0] if home else region_of(line.box, width, height), look.t)
        self._count_digit_changes(look, lines)
        for ticker in self.tickers:
            if any(holds_line(ticker.region, [ln], width, height) for ln in lines):
                ticker.due = look.t  # the full read's ticker lines are read again, cheaply, below
        # Only when every line read lies in a gate region: text the gate cannot see must not end
        # up behind a region marked empty.
        if all(any(holds_line(r, [ln], width, height) for r in held) for ln in lines):
            self.blanks = [BlankRegion(r, look.grey) for r in regions if r not in held] + self.blanks
            del self.blanks[BLANK_MEMORY:]
            self.last = _LastRead(look.grey, held, lines, look.t)
        else:
            self.last = _LastRead(look.grey, regions, lines, look.t)
        return lines

    def _full_read(self, look: _Look) -> list[TextLine]:
        """The reader's lines for the frame: at the stored size when the gate found text and every
        region of it is thick enough to be found there (:data:`STORED_SIZE_TEXT_HEIGHT`)."""
        if self.stored_size is not None:
            self._gate(look)  # the detection runs once per look; its regions are kept on it
            thickness = [min(x1 - x0, y1 - y0) for x0, y0, x1, y1 in look.regions or []]
            if thickness and min(thickness) >= STORED_SIZE_TEXT_HEIGHT:
                self.counts["read_at_stored_size"] += 1
                return self.stored_size.read_at_stored_size(look.image)
        return self.reader.read(look.image)


def _same_place(a: Region, b: Region) -> bool:
    """Whether two regions are the same place: they overlap by half the smaller of the two (a
    read line's box is tighter than the gate's region around it)."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    smaller = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return w > 0 and h > 0 and w * h >= 0.5 * smaller


def _digits_changed(before: str, after: str) -> bool:
    """Whether two reads differ, and only in their digits ("FRAME 25" / "FRAME 30")."""
    a, b = normalise_text(before), normalise_text(after)
    return a != b and re.sub(r"\d+", "#", a) == re.sub(r"\d+", "#", b) and any(c.isdigit() for c in b)


def _crop(image: np.ndarray, region: Region) -> np.ndarray:
    """The pixels of ``region`` with a margin (and room to grow right), for reading it alone."""
    height, width = image.shape[:2]
    x0, y0, x1, y1 = region
    pad = max(2, round(TICKER_MARGIN * (y1 - y0)))
    grow = round(TICKER_GROW * (y1 - y0))
    return np.ascontiguousarray(
        image[max(0, y0 - pad) : min(height, y1 + pad), max(0, x0 - pad) : min(width, x1 + pad + grow)]
    )


def _run(ctx: StageContext) -> StageOutcome:
    reader: TextReader | None = registry.text_reader(ctx.settings)
    if reader is None:
        raise StageNotApplicable("no text reader configured (models.text_reader)")
    settings, store, video = ctx.settings.ingest, ctx.store, ctx.video
    step = max(1, round(settings.frame_fps / settings.ocr_fps))
    interval = step / settings.frame_fps
    # Frames per probe: a span of text at least ocr_min_text_seconds long holds one of them.
    every = max(1, int(settings.ocr_min_text_seconds / interval + 1e-9))
    tracker = TextTracker(interval=interval)
    total_frames = store.count(store.frames, video.video_id)
    decider = _Lines(reader, settings)
    sampled = 0
    window: list[dict[str, Any]] = []

    def settle_window(rows: list[dict[str, Any]]) -> None:
        """Lines for a span of frames: its last frame probes it; a probe that disagrees splits the
        span in halves, each settled the same way (a frame's look, gate regions included, is
        made once), so a text change costs a few looks rather than one per frame of the span."""
        looks: dict[int, _Look] = {}

        def look(i: int) -> _Look:
            if i not in looks:
                looks[i] = decider.look(rows[i]["jpeg"], float(rows[i]["t"]))
            return looks[i]

        def shown(i: int, lines: list[TextLine]) -> list[TextLine]:
            if not decider.tickers or not lines:
                return lines
            height, width = look(i).image.shape[:2]
            return decider.visible(lines, width, height)

        def settle(first: int, end: int) -> None:
            nonlocal sampled
            if end - first > 1 and sampled:
                how = decider.unchanged(look(end - 1))
                if how is not None:
                    lines = shown(end - 1, decider.settle(look(end - 1), how, end - first - 1))
                    for row in rows[first:end]:
                        tracker.add(sampled, row["t"], lines)
                        sampled += 1
                    return
                middle = (first + end) // 2
                settle(first, middle)
                settle(middle, end)
                return
            for i in range(first, end):
                tracker.add(sampled, rows[i]["t"], shown(i, decider.decide(look(i))))
                sampled += 1

        settle(0, len(rows))
        for i, row in enumerate(rows):  # the tickers due in this span, read from their crops
            if any(tk.due <= float(row["t"]) + 1e-9 for tk in decider.tickers):
                decider.read_tickers(look(i), settings.ocr_clock_seconds)

    for first in range(0, total_frames, READ_BATCH * step):
        batch = store.rows(
            store.frames,
            video_id=video.video_id,
            where=f"frame_index >= {first} AND frame_index < {first + READ_BATCH * step} "
            f"AND frame_index % {step} = 0",
            columns=["frame_index", "t", "jpeg"],
        ).to_pylist()
        for row in batch:
            window.append(row)
            if len(window) == every or (sampled == 0 and len(window) == 1):
                settle_window(window)
                window = []
        ctx.progress("ocr", min(first + READ_BATCH * step, total_frames), total_frames)
    if window:
        settle_window(window)
    clocks, ticker_items = _ticker_rows(decider.ticker_lines, settings.ocr_clock_seconds, video.duration)
    items = sorted(
        [*tracker.items(video.duration), *ticker_items], key=lambda i: (i.t, i.box[1] if i.box else 0)
    )
    rows = [
        {
            "video_id": video.video_id,
            "item_index": i,
            "t": item.t,
            "t_end": item.t_end,
            "text": item.text,
            "box": _box8(item.box),
            "score": float(item.score),
        }
        for i, item in enumerate(items)
    ]
    store.replace_video_rows(store.ocr, video.video_id, rows)
    store.replace_video_rows(
        store.clock_readings, video.video_id, [{"video_id": video.video_id, **c} for c in clocks]
    )
    counts = decider.counts
    return StageOutcome(
        rows=len(rows),
        details={
            "frames_sampled": sampled,
            "frames_read": counts["read"],
            "frames_read_at_stored_size": counts["read_at_stored_size"],
            "frames_reused": counts["reused"],
            "frames_gated_no_text": counts["no_text"],
            "frames_gated_same_text": counts["same"],
            "frames_between_probes": counts["between"],
            "gate_runs": counts["gate_runs"],
            "ticker_reads": counts["ticker_reads"],
            "tickers": len(decider.tickers),
            "clock_readings": len(clocks),
            "reader": reader.name,
        },
    )


def _box8(box: tuple[float, ...]) -> list[float]:
    return [float(v) for v in box[:8]] + [0.0] * (8 - len(box[:8]))


def _ticker_rows(
    readings: list[tuple[float, TextLine]], every: float, duration: float
) -> tuple[list[dict[str, Any]], list[_OpenItem]]:
    """Ticker readings split into clock readings (rows of ``clock_readings`` without the video id)
    and on-screen text items (the same text read in a row merges, each read holding ``every`` s;
    only the very same text: "FRAME 40" and "FRAME 90" are two readings of a counter)."""
    clocks: list[dict[str, Any]] = []
    tracker = TextTracker(interval=every, same_ratio=1.0)
    by_time: dict[float, list[TextLine]] = {}
    for t, line in readings:
        clock = parse_clock(line.text)
        if clock is not None:
            clocks.append(
                {
                    "reading_index": len(clocks),
                    "t": t,
                    "text": line.text.strip(),
                    "wall": clock.wall,
                    "dated": clock.dated,
                    "box": _box8(line.box),
                }
            )
        else:
            by_time.setdefault(t, []).append(line)
    for index, t in enumerate(sorted(by_time)):
        tracker.add(index, t, by_time[t])
    return clocks, tracker.items(duration)


def _config(settings: Settings) -> dict[str, Any]:
    return {
        **role_config(settings, "text_reader", "reader"),
        "ocr_fps": settings.ingest.ocr_fps,
        "min_score": settings.ingest.ocr_min_score,
        "lone_glyph_score": settings.ingest.ocr_lone_glyph_score,
        "gate_side": settings.ingest.ocr_gate_side,
        "min_text_seconds": settings.ingest.ocr_min_text_seconds,
        "clock_seconds": settings.ingest.ocr_clock_seconds,
    }


OCR = Stage(
    name="ocr",
    # 2: the text-region gate decides which frames are read; 3: only text-shaped regions count;
    # 4: one probe per ocr_min_text_seconds settles the frames between when the text did not change;
    # 5: tickers (clocks, counters) are read sparsely and masked out of the change test; clocks
    # are stored as wall-clock readings
    version=5,
    run=_run,
    config=_config,
    needs=("frames",),
    description="on-screen text (PP-OCR via rapidocr) of frames whose text regions changed, merged "
    "across frames while it stays on screen",
)
