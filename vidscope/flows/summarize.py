"""A video's summary, chapters and highlights as the CLI, the HTTP API and MCP give them.

The ``chapters`` ingestion stage (:mod:`vidscope.tasks.chapters`) writes them into the store;
:func:`read_summary` reads them back as one :class:`VideoOverview`, and :func:`as_markdown` /
:func:`as_webvtt` write the chapter list in the two formats people paste or load next to a video.
:func:`chapter_moments` finds chapters by their title and summary for ``search --moments``;
:func:`read_digest` lists what the library gained in a window (``vidscope digest``, the nightly
deployment's Markdown artifact). No Prefect and no model: both are store reads.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, Field

from vidscope.core.timecodes import fmt_time
from vidscope.storage import Store
from vidscope.storage.chapters import KIND_CHAPTER, KIND_HIGHLIGHT, KIND_SENTENCE, KIND_SUMMARY
from vidscope.storage.videos import VideoRecord

if TYPE_CHECKING:
    from vidscope.agents.moments import Moment, MomentFilters


class Source(BaseModel):
    """A sentence a model wrote for a chapter summary and the clips it rests on (their span)."""

    text: str
    clips: list[int]
    start: float
    end: float


class Chapter(BaseModel):
    """A part of the video with its title and summary, in the video's own words (or, with a
    planner, the model's checked words about them)."""

    start: float = Field(description="Seconds into the video.")
    end: float
    title: str
    summary: str = Field(description="Its most representative sentences (empty: nothing said or shown).")
    title_from: str = Field(
        "",
        description="How the title was made: title slide, distinctive words, picture change, model "
        "title, or 'extractive title (...); model reply refused: why'.",
    )
    sources: list[Source] = Field(
        default_factory=list, description="With a planner: each summary sentence and the clips it cites."
    )


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
            Chapter(
                start=r["start"],
                end=r["end"],
                title=r["title"] or "",
                summary=r["text"] or "",
                title_from=r["why"] or "",
                sources=[
                    Source(text=w["text"] or "", clips=list(w["clips"] or []), start=w["start"], end=w["end"])
                    for w in rows
                    if w["kind"] == KIND_SENTENCE and w["why"] == f"chapter {r['item_index']}"
                ],
            )
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


# ------------------------------------------------------------------------------------ the digest

#: ``--since`` units: seconds, minutes, hours, days, weeks.
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
#: The longest window a digest reads back (more than the API's longest, ``9999w``).
MAX_SINCE_DAYS = 70_000


def parse_since(text: str) -> timedelta:
    """A window such as ``1d``, ``12h``, ``30m``, ``2w`` or ``90s`` (a number and one unit);
    ``ValueError`` naming what is accepted for anything else."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text or "", re.IGNORECASE)
    if match is None:
        raise ValueError(f"--since {text!r} is not a window: a number and a unit, e.g. 1d, 12h, 30m, 2w")
    seconds = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if not 0 < seconds <= MAX_SINCE_DAYS * 86400:
        raise ValueError(f"--since {text!r} must be more than 0 s and at most {MAX_SINCE_DAYS} days")
    return timedelta(seconds=seconds)


class DigestVideo(BaseModel):
    """One video the library gained: when, how long, its summary and its chapter titles."""

    video_id: str
    file: str
    added_at: str = Field(description="When it was ingested (ISO 8601, UTC).")
    duration: float
    summary: str
    chapters: list[str] = Field(description="Its chapter titles, in order.")
    note: str | None = Field(None, description="Why its overview is thin, or why there is none.")


class Digest(BaseModel):
    """What the library gained in a window: the videos ingested in it, newest first, with counts."""

    since: str = Field(description="Start of the window (ISO 8601, UTC).")
    until: str
    videos: list[DigestVideo]
    count: int = Field(description="Videos ingested in the window.")
    seconds: float = Field(description="Their total duration.")
    chapters: int = Field(description="Their chapters in all.")
    not_summarized: int = Field(description="Of them, videos without a summary yet.")
    library: int = Field(description="Videos in the whole library.")


def read_digest(store: Store, since: timedelta, now: datetime | None = None) -> Digest:
    """The videos ``store`` gained in the ``since`` before ``now`` (default: now), newest first."""
    until = now or datetime.now(UTC)
    start = until - since
    rows = store.rows(store.videos).to_pylist()
    fresh = sorted(
        (r for r in rows if r["added_at"] is not None and start <= r["added_at"] <= until),
        key=lambda r: (r["added_at"], r["file_name"]),
        reverse=True,
    )
    videos = []
    for row in fresh:
        record = VideoRecord(**row)
        try:
            overview = read_summary(store, record)
            summary, titles, note = overview.summary, [c.title for c in overview.chapters], overview.note
        except NotSummarized as exc:
            summary, titles, note = "", [], str(exc)
        videos.append(
            DigestVideo(
                video_id=record.video_id,
                file=record.file_name,
                added_at=row["added_at"].isoformat(),
                duration=record.duration,
                summary=summary,
                chapters=titles,
                note=note,
            )
        )
    return Digest(
        since=start.isoformat(),
        until=until.isoformat(),
        videos=videos,
        count=len(videos),
        seconds=round(sum(v.duration for v in videos), 3),
        chapters=sum(len(v.chapters) for v in videos),
        not_summarized=sum(1 for v in videos if not v.chapters),
        library=len(rows),
    )


def _md_text(text: str) -> str:
    """Text from a video inside Markdown: one line, with Markdown's and HTML's markup characters
    escaped so a title read off the screen shows as the words it is, never as a link or a tag."""
    return re.sub(r"([\\`*_{}\[\]()#|<>&~])", r"\\\1", _one_line(text))


def digest_markdown(digest: Digest) -> str:
    """The digest as Markdown (the nightly deployment's artifact): counts, then a section per video."""
    hours = digest.seconds / 3600
    lines = [
        f"# What the library gained since {digest.since[:16].replace('T', ' ')} UTC",
        "",
        f"{digest.count} video(s), {fmt_time(digest.seconds)} ({hours:.1f} h), {digest.chapters} chapter(s); "
        f"{digest.not_summarized} not summarised; {digest.library} video(s) in the library.",
    ]
    for video in digest.videos:
        lines += ["", f"## {_md_text(video.file)} ({fmt_time(video.duration)}, {video.video_id[:12]})", ""]
        if video.summary:
            lines += [_md_text(video.summary), ""]
        if video.note:
            lines += [f"*{_md_text(video.note)}*", ""]
        lines += [f"{i}. {_md_text(title)}" for i, title in enumerate(video.chapters, 1)]
    return "\n".join(lines).rstrip() + "\n"


# ------------------------------------------------------------------------------------ chapter moments

#: Chapters a moment search embeds at most (the ones sharing most words with the query, then the
#: ones holding its clip moments): a query pays for ~16 short texts, whatever the library's size.
CHAPTER_CANDIDATES = 16


def chapter_text(title: str, summary: str) -> str:
    """What a chapter moment says: its title, then its summary (once when they are the same words)."""
    title, summary = _one_line(title), _one_line(summary)
    if title.casefold() == summary.casefold():
        return title
    return f"{title} — {summary}" if title and summary else title or summary


def _same_span(row: dict[str, Any], moment: Moment) -> bool:
    """Whether a chapter covers (nearly) the span of a clip moment already shown: 90 % or more of
    their union overlaps, so listing the chapter would show the same moment twice."""
    if row["video_id"] != moment.video_id:
        return False
    inter = min(row["end"], moment.end) - max(row["start"], moment.start)
    union = max(row["end"], moment.end) - min(row["start"], moment.start)
    return union > 0 and inter / union >= 0.9


def chapter_moments(
    store: Store,
    query: str,
    embed: Callable[[Sequence[str]], np.ndarray],
    *,
    near: Sequence[Moment] = (),
    filters: MomentFilters | None = None,
    min_relevance: float = 0.0,
    k: int = 3,
) -> list[Moment]:
    """The chapters whose title and summary match ``query``, as moments of kind ``chapter`` (best
    first, at most ``k``, relevance at least ``min_relevance``).

    Candidates are the chapters sharing content words with the query, then those holding one of the
    ``near`` (clip) moments, at most :data:`CHAPTER_CANDIDATES`; each scores as the cosine of its
    text and the query in ``embed``'s space (the same relevance clip moments carry). ``filters``
    restrict them as they restrict clip moments (videos, time range, ingestion dates).
    """
    from vidscope.agents.moments import Moment, MomentFilters
    from vidscope.tasks.topic_tiling import content_words

    filters = filters or MomentFilters()
    rows = [r for r in store.rows(store.chapters, where=f"kind = '{KIND_CHAPTER}'").to_pylist() if r["title"]]
    videos = {
        r["video_id"]: r
        for r in store.rows(store.videos, columns=["video_id", "file_name", "added_at"]).to_pylist()
    }
    rows = [r for r in rows if r["video_id"] in videos and _allowed(r, videos[r["video_id"]], filters)]
    if rows and (filters.clock_from is not None or filters.clock_to is not None):
        from vidscope.tasks.clock import load_runs, video_spans  # the burned-in clock's range

        spans = video_spans(
            load_runs(store, sorted({r["video_id"] for r in rows})), filters.clock_from, filters.clock_to
        )
        rows = [
            r
            for r in rows
            if any(v == r["video_id"] and r["end"] > a and r["start"] <= b for v, a, b in spans)
        ]
    if not rows:
        return []
    asked = set(content_words(query))
    near_spans = {(m.video_id, m.start) for m in near}

    def overlap(row: dict[str, Any]) -> tuple[int, bool]:
        words = set(content_words(f"{row['title']} {row['text'] or ''}"))
        holds = any(v == row["video_id"] and row["start"] <= t < row["end"] for v, t in near_spans)
        return len(asked & words), holds

    scored = [(overlap(r), r) for r in rows]
    candidates = [r for key, r in sorted(scored, key=lambda p: (-p[0][0], not p[0][1])) if key[0] or key[1]]
    # A chapter spanning what a clip moment already spans (a short video's only chapter) repeats it.
    candidates = [r for r in candidates if not any(_same_span(r, m) for m in near)][:CHAPTER_CANDIDATES]
    if not candidates or k < 1:
        return []
    vectors = embed([query, *(chapter_text(r["title"], r["text"] or "") for r in candidates)])
    similarity = [float(np.asarray(v) @ np.asarray(vectors[0])) for v in vectors[1:]]
    found = [
        Moment(
            video_id=r["video_id"],
            file=videos[r["video_id"]]["file_name"],
            start=r["start"],
            end=r["end"],
            score=0.0,
            relevance=round(min(1.0, max(0.0, s)), 3),
            text=chapter_text(r["title"], r["text"] or ""),
            kind="chapter",
        )
        for s, r in zip(similarity, candidates, strict=True)
        if s >= min_relevance
    ]
    return sorted(found, key=lambda m: -(m.relevance or 0.0))[:k]


def _allowed(row: dict[str, Any], video: dict[str, Any], filters: MomentFilters) -> bool:
    if filters.videos is not None and row["video_id"] not in filters.videos:
        return False
    if filters.start is not None and row["end"] <= filters.start:
        return False
    if filters.end is not None and row["start"] >= filters.end:
        return False
    added = video["added_at"]
    if filters.added_after is not None and (added is None or added < _aware(filters.added_after)):
        return False
    return not (filters.added_before is not None and (added is None or added >= _aware(filters.added_before)))


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


# ------------------------------------------------------------------------------------ the transcript


class TranscriptLine(BaseModel):
    """A line said (``speech``) or, in a video without speech, shown on screen (``screen``)."""

    start: float
    end: float
    text: str
    source: str = Field(description="'speech' (a transcript segment) or 'screen' (on-screen text).")


#: Lines a transcript holds at most (a 3-hour talk is ~2,000 segments).
MAX_TRANSCRIPT_LINES = 5000


def read_transcript(store: Store, video: VideoRecord) -> list[TranscriptLine]:
    """What ``video`` says, line by line in time order; for a video without speech, the texts it
    shows (each distinct text once per showing, consecutive frames merged). Empty: neither."""
    said = store.rows(store.transcripts, video_id=video.video_id, columns=["start", "end", "text"])
    lines = [
        TranscriptLine(start=r["start"], end=r["end"], text=_one_line(r["text"]), source="speech")
        for r in said.to_pylist()
        if r["text"] and r["text"].strip()
    ]
    if not lines:
        shown = store.rows(
            store.ocr, video_id=video.video_id, columns=["t", "t_end", "text", "box"]
        ).to_pylist()
        open_lines: dict[str, TranscriptLine] = {}
        for row in sorted(shown, key=lambda r: (r["t"], min((r["box"] or [0.0])[1::2] or [0.0]))):
            text = _one_line(row["text"] or "")
            if not text:
                continue
            line = open_lines.get(text)
            if line is not None and row["t"] <= line.end + 1.0:  # the same text, still on screen
                line.end = max(line.end, row["t_end"])
                continue
            open_lines[text] = TranscriptLine(start=row["t"], end=row["t_end"], text=text, source="screen")
            lines.append(open_lines[text])
    return sorted(lines, key=lambda line: line.start)[:MAX_TRANSCRIPT_LINES]
