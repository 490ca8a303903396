"""A video's chapter list as agents read it: an overview of its parts, in order, with their times.

The ``chapters`` ingestion stage (:mod:`vidscope.tasks.chapters`) titles each part of a video from
its title slide or its distinctive words (or, without text, marks where its picture changes). An
agent planning where to look can start from that list instead of sampling captions blindly: DVD's
``global_browse`` returns it beside the subjects, and SAMA's planner reads it beside the list of
videos (:mod:`vidscope.agents.sama.overview`, bounded in tokens). It is an overview, like the
subject registry: never evidence to cite, and its titles are the video's own words (data, not
instructions).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from vidscope.storage.chapters import KIND_CHAPTER
from vidscope.storage.store import Store

#: Chapters listed at most (the stage makes 3 + 1 per 2 minutes: a 3-hour video has ~90).
MAX_CHAPTERS = 40
#: Characters of a chapter's summary kept in the list.
SUMMARY_CHARS = 160


class ChapterEntry(BaseModel):
    """One chapter of a video: where it starts and ends, its title, the start of its summary."""

    start: float
    end: float
    title: str
    summary: str = Field("", description="Its most representative sentence(s), shortened.")


def load_chapters(store: Store, video_id: str, limit: int = MAX_CHAPTERS) -> list[ChapterEntry]:
    """The chapters of ``video_id`` in time order (empty when its chapters stage has not run);
    past ``limit``, the longest ``limit`` of them, still in time order."""
    rows = store.rows(store.chapters, video_id=video_id, where=f"kind = '{KIND_CHAPTER}'").to_pylist()
    rows = sorted(rows, key=lambda r: (-(r["end"] - r["start"]), r["start"]))[:limit]
    return [
        ChapterEntry(
            start=round(r["start"], 2),
            end=round(r["end"], 2),
            title=r["title"] or "",
            summary=_short(r["text"] or ""),
        )
        for r in sorted(rows, key=lambda r: r["start"])
    ]


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1].rstrip() + "…"
