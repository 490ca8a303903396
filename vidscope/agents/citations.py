"""Checking citations: a cited range is verified only by tool calls that *found* something there.

Every tool result states the ranges it supports (:meth:`~vidscope.agents.tools.ToolResult.support`):
where a detection, an OCR line, a transcript line, a clip hit or a look that saw something lies,
each with its evidence level and what was found. :class:`Evidence` collects them over one
conversation and checks each citation against them:

- **Most of it, not a touch.** At least :data:`MIN_SUPPORTED_SHARE` of the cited range must lie
  inside the union of ranges supported at a verifying level; a 30-s citation that shares 0.1 s with
  a supported range is not verified (its level is ``echoed``, with the share in the note).
- **Perceived before retrieved.** The level is ``perceived`` when perceived supports alone cover
  that share, else ``retrieved`` when perceived and retrieved supports together do.
- **Whole-video looks verify nothing.** A look that did not say where it saw something supports its
  whole looked range (``localized=False``); when such looks together cover
  :data:`WHOLE_VIDEO_SHARE` of a video (one look over everything, or two halves), they say nothing
  about *where*, and count as ``echoed``. The same holds for one support of any kind that wide,
  except a localized one no longer than :data:`ONE_CLIP_SECONDS`: on a video of one or two clips
  (a 4-s title card), the clip whose text or speech matched is as precise as the store can be.
- Short supports (an OCR line or a detection on one frame) count :data:`MIN_SUPPORT_SECONDS` wide
  around their time, so a citation of the second they are in can be covered.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from vidscope.agents.answers import VERIFYING_LEVELS, Citation, Support

if TYPE_CHECKING:
    from vidscope.agents.tools import ToolContext, ToolResult

#: Seconds a citation may run past the end of the video (containers round durations).
DURATION_TOLERANCE = 0.5
#: A range that covers at least this share of the video is an overview: it verifies nothing by
#: its range alone (a frame_inspect or text_extract over the whole video, or two looks at halves).
WHOLE_VIDEO_SHARE = 0.9
#: A localized support this short (about one retrieval clip, ``[ingest] clip_seconds`` 5 s, and a
#: shorter last one) keeps its level even when it spans (nearly) a whole short video.
ONE_CLIP_SECONDS = 10.0
#: The share of a cited range that supported ranges must cover for it to be verified.
MIN_SUPPORTED_SHARE = 0.5
#: A support shorter than this (seconds) counts this wide around its middle: a text line or a
#: detection seen on one sampled frame.
MIN_SUPPORT_SECONDS = 1.0
#: Supports named per citation (most overlapping first).
SHOWN_SUPPORTS = 3


def merged(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """``spans`` joined where they overlap or touch, in time order."""
    out: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def covered(start: float, end: float, spans: Iterable[tuple[float, float]]) -> float:
    """Seconds of [start, end] inside the union of ``spans``."""
    return sum(max(0.0, min(end, b) - max(start, a)) for a, b in merged(spans))


def _widened(support: Support) -> tuple[float, float]:
    if support.end - support.start >= MIN_SUPPORT_SECONDS:
        return support.start, support.end
    middle = (support.start + support.end) / 2
    return middle - MIN_SUPPORT_SECONDS / 2, middle + MIN_SUPPORT_SECONDS / 2


class Evidence:
    """The ranges tool calls of one conversation supported, each with its level and what was found
    (what citations are checked against)."""

    def __init__(self) -> None:
        self.supports: list[Support] = []
        self.calls = 0

    def add(self, result: ToolResult | None, tool: str = "") -> None:
        """Remember what ``result`` (one call of ``tool``) supports."""
        if result is None:
            return
        self.calls += 1
        for found in result.support():
            self.supports.append(found.model_copy(update={"tool": tool or found.tool, "call": self.calls}))

    def effective(self, video_id: str, duration: float) -> list[tuple[Support, str]]:
        """The supports of ``video_id`` with the level they count at: overviews demoted to echoed."""
        mine = [s for s in self.supports if s.video_id == video_id]
        wide = duration * WHOLE_VIDEO_SHARE if duration > 0 else float("inf")
        unlocalized = [(s.start, s.end) for s in mine if not s.localized and s.level in VERIFYING_LEVELS]
        looks_cover_all = sum(b - a for a, b in merged(unlocalized)) >= wide
        out = []
        for support in mine:
            level = support.level
            width = support.end - support.start
            as_precise_as_clips = support.localized and width <= ONE_CLIP_SECONDS
            too_wide = (width >= wide and not as_precise_as_clips) or (
                not support.localized and looks_cover_all
            )
            if level in VERIFYING_LEVELS and too_wide:
                level = "echoed"  # a look over (nearly) the whole video says nothing about where
            out.append((support, level))
        return out

    def assess(
        self, video_id: str, start: float, end: float, duration: float
    ) -> tuple[str, float, list[Support]]:
        """The level of [start, end], the share of it verifying supports cover, and those supports
        (most overlapping first)."""
        counted = self.effective(video_id, duration)
        length = max(end - start, 1e-9)

        def share(levels: Sequence[str]) -> float:
            return covered(start, end, (_widened(s) for s, lv in counted if lv in levels)) / length

        perceived, verifying = share(("perceived",)), share(VERIFYING_LEVELS)
        touching = [(s, lv) for s, lv in counted if (a := _widened(s))[0] < end and start < a[1]]
        if perceived >= MIN_SUPPORTED_SHARE:
            level = "perceived"
        elif verifying >= MIN_SUPPORTED_SHARE:
            level = "retrieved"
        elif touching:
            level = "echoed"
        else:
            level = "none"

        def overlap(s: Support) -> float:
            a, b = _widened(s)
            return min(end, b) - max(start, a)

        supporting = sorted((s for s, lv in touching if lv in VERIFYING_LEVELS), key=lambda s: -overlap(s))
        return level, verifying, supporting[:SHOWN_SUPPORTS]

    def level(self, video_id: str, start: float, end: float, duration: float) -> str:
        """The evidence level of [start, end] (one of ``EVIDENCE_LEVELS``)."""
        return self.assess(video_id, start, end, duration)[0]

    def check(self, ctx: ToolContext, video_id: str, start: float, end: float) -> Citation:
        """A :class:`Citation` for [start, end] of ``video_id``: its evidence level, the supports
        behind it, and verified or the reason not."""
        from vidscope.agents.tools import ToolError

        def cite(note: str, level: str = "none", support: Sequence[Support] = ()) -> Citation:
            verified = not note and level in VERIFYING_LEVELS
            return Citation(
                video_id=video_id,
                start=start,
                end=end,
                verified=verified,
                evidence=level,
                note=note,
                support=list(support),
            )

        try:
            duration = ctx.video(video_id).duration
        except ToolError as exc:
            return cite(str(exc))
        if not (start < end):
            return cite("the range is empty or reversed")
        if start < 0 or end > duration + DURATION_TOLERANCE:
            return cite(f"outside the video (duration {duration:.1f}s)")
        level, share, supporting = self.assess(video_id, start, end, duration)
        cap = ctx.config.citation_max_seconds
        if end - start > cap:
            return cite(f"wider than {cap:g} s: it does not say where the answer is", level, supporting)
        if level == "none":
            return cite("no tool returned specific evidence in this range")
        if level == "echoed":
            if share > 0:
                return cite(
                    f"only {share:.0%} of it lies where a tool found something (at least "
                    f"{MIN_SUPPORTED_SHARE:.0%} must)",
                    level,
                    supporting,
                )
            return cite(
                "only looks that found nothing, hints, overviews or the model's own ranges cover it", level
            )
        return cite("", level, supporting)


def parse_citations(
    ctx: ToolContext, evidence: Evidence, raw: Sequence[Any], default_video: str
) -> list[Citation]:
    """Check citations given as ``[start, end]`` pairs (or ``{video_id, start, end}`` objects)."""
    citations = []
    for item in raw:
        video_id = default_video
        try:
            if isinstance(item, dict):
                video_id = str(item.get("video_id") or default_video)
                start, end = float(item["start"]), float(item["end"])
            else:
                start, end = (float(x) for x in item)
        except (TypeError, ValueError, KeyError):
            citations.append(
                Citation(
                    video_id=video_id,
                    start=-1,
                    end=-1,
                    verified=False,
                    note=f"not a [start, end] pair: {item!r}",
                )
            )
            continue
        citations.append(evidence.check(ctx, video_id, start, end))
    return citations
