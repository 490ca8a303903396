"""A video's summary, chapters and highlights as the CLI, the HTTP API and MCP give them.

The ``chapters`` ingestion stage (:mod:`vidscope.tasks.chapters`) writes them into the store;
:func:`read_summary` reads them back as one :class:`VideoOverview`, and :func:`as_markdown` /
:func:`as_webvtt` write the chapter list in the two formats people paste or load next to a video.
No Prefect and no model: reading a summary is a store read.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from vidscope.core.timecodes import fmt_time
from vidscope.storage import Store
from vidscope.storage.chapters import KIND_CHAPTER, KIND_HIGHLIGHT, KIND_SUMMARY
from vidscope.storage.videos import VideoRecord


class Chapter(BaseModel):
    """A part of the video with its title and summary, in the video's own words."""

    start: float = Field(description="Seconds into the video.")
    end: float
    title: str
    summary: str = Field(description="Its most representative sentences (empty: nothing said or shown).")


class Highlight(BaseModel):
    """A moment that stands out from the rest of the video."""

    start: float
    end: float
    text: str = Field(description="What is said (else shown) there.")
    why: str = Field("", description="What makes it stand out.")


class VideoOverview(BaseModel):
    """What a video is about: its summary, its chapters (covering it) and its highlights."""

    video_id: str
    file: str
    summary: str
    chapters: list[Chapter]
    highlights: list[Highlight]
    note: str | None = Field(None, description="Why the overview is thin (e.g. no speech or text).")


class NotSummarized(LookupError):
    """The video has no summary yet (the stage has not run, or failed): the reason in one line."""


def read_summary(store: Store, video: VideoRecord) -> VideoOverview:
    """The stored overview of ``video``; :class:`NotSummarized` with the reason when there is none."""
    rows = store.rows(store.chapters, video_id=video.video_id, order_by=["kind", "item_index"]).to_pylist()
    if not any(r["kind"] == KIND_CHAPTER for r in rows):
        raise NotSummarized(_why_not(store, video))
    summary = next((r for r in rows if r["kind"] == KIND_SUMMARY), None)
    return VideoOverview(
        video_id=video.video_id,
        file=video.file_name,
        summary=(summary or {}).get("text") or "",
        chapters=[
            Chapter(start=r["start"], end=r["end"], title=r["title"] or "", summary=r["text"] or "")
            for r in rows
            if r["kind"] == KIND_CHAPTER
        ],
        highlights=[
            Highlight(start=r["start"], end=r["end"], text=r["text"] or "", why=r["why"] or "")
            for r in rows
            if r["kind"] == KIND_HIGHLIGHT
        ],
        note=(summary or {}).get("why") or None,
    )


def _why_not(store: Store, video: VideoRecord) -> str:
    from vidscope.tasks.stage import ledger_rows

    row = ledger_rows(store, video.video_id).get("chapters")
    if row is None:
        return (
            f"{video.file_name} is not summarised yet: its chapters stage has not run "
            f"(vidscope ingest {video.file_name})"
        )
    return f"{video.file_name} is not summarised: its chapters stage is {row['status']}" + (
        f" ({row['error']})" if row["error"] else ""
    )


def _one_line(text: str) -> str:
    return " ".join(text.split())


def as_markdown(overview: VideoOverview) -> str:
    """The chapter list as people paste it under a video: one ``0:00 Title`` line per chapter."""
    # Rounded down: a link to the second a chapter starts in never skips its first words.
    return "".join(f"{fmt_time(math.floor(c.start))} {_one_line(c.title)}\n" for c in overview.chapters)


def _vtt_time(seconds: float) -> str:
    millis = max(0, round(seconds * 1000))
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"{hours:02d}:{minutes:02d}:{rest // 1000:02d}.{rest % 1000:03d}"


def _vtt_text(text: str) -> str:
    """A cue's payload on one line, with WebVTT's three special characters escaped (so a title
    read off the screen is shown as text, never taken as a tag or a cue timing arrow)."""
    return _one_line(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def as_webvtt(overview: VideoOverview) -> str:
    """The chapters as a WebVTT file of chapter cues (the ``<track kind="chapters">`` of a player)."""
    cues = [
        f"{i}\n{_vtt_time(c.start)} --> {_vtt_time(c.end)}\n{_vtt_text(c.title) or '-'}\n"
        for i, c in enumerate(overview.chapters, 1)
    ]
    return "WEBVTT\n\n" + "\n".join(cues)
