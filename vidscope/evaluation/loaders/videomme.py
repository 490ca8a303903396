"""Video-MME (short / medium / long videos, with or without subtitles; DVD reports 67.3 on long).

Video-MME's terms forbid redistributing it, so this follows its documented release:

* the Hugging Face ``videomme/test-*.parquet`` (also read as JSON/JSONL), one row per question:
  ``video_id`` ("001"), ``duration`` ("short" | "medium" | "long"), ``domain``, ``sub_category``,
  ``url``, ``videoID`` (the YouTube id), ``question_id`` ("001-1"), ``task_type``, ``question``,
  ``options`` (``["A. ...", "B. ...", ...]``) and ``answer`` ("C");
* the repository's nested JSON: a list of videos ``{"video_id", "duration", "domain",
  "sub_category", "videoID"?, "questions": [{"question_id", "task_type", "question", "options",
  "answer"}]}``.

Videos are ``data/<videoID>.mp4`` and subtitles ``subtitle/<videoID>.srt``. ``split="long"`` (the
default, the split DVD reports) keeps long videos; ``None`` keeps all. ``subtitles=True`` names
each item's ``.srt`` file, which :func:`read_srt` turns into the text given to the model.
Categories are the task types (12), the dimension is the domain (6).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from vidscope.evaluation.items import (
    BenchmarkItem,
    choice_answer,
    first,
    options_of,
    question_text,
    read_records,
    unique_ids,
)

NAME = "videomme"
Split = Literal["short", "medium", "long"]


def _flatten(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Nested per-video records → one record per question (flat rows pass through)."""
    rows: list[dict[str, Any]] = []
    for record in records:
        if "questions" in record:
            video = {k: v for k, v in record.items() if k != "questions"}
            rows.extend({**video, **q} for q in record["questions"])
        else:
            rows.append(record)
    return rows


def load(path: Path | str, split: Split | None = "long", *, subtitles: bool = False) -> list[BenchmarkItem]:
    """Video-MME questions of ``split`` (all when None), naming subtitle files when asked."""
    items = []
    for row in _flatten(read_records(Path(path))):
        if split is not None and row.get("duration") != split:
            continue
        qid = str(row["question_id"])
        where = f"{path}: {qid}"
        youtube = str(first(row, ("videoID", "youtube_id", "video_id"), where))
        options = options_of(row["options"], where)
        items.append(
            BenchmarkItem(
                benchmark=NAME,
                question_id=qid,
                kind="multiple_choice",
                video_ids=(youtube,),
                question=question_text(row.get("question"), where),
                options=options,
                answer=choice_answer(row["answer"], options, where),
                categories=(str(row["task_type"]),),
                dimension=row.get("domain"),
                duration_group=row.get("duration"),
                subtitles=f"{youtube}.srt" if subtitles else None,
                extra={k: row[k] for k in ("video_id", "sub_category", "url") if row.get(k) is not None},
            )
        )
    return list(unique_ids(items))


_TIMING = re.compile(r"^\d{1,2}:\d{2}:\d{2}[,.]\d{1,3}\s*-->")
_TAG = re.compile(r"<[^>]+>")


def read_srt(path: Path | str) -> str:
    """The spoken text of an ``.srt`` file, one cue per line (numbers, timings and tags dropped)."""
    cues: list[str] = []
    current: list[str] = []
    timed = False  # a block's number comes before its timing line; text after it may be digits
    for raw in Path(path).read_text(encoding="utf-8-sig", errors="replace").splitlines():
        line = raw.strip()
        if not line:
            if current:
                cues.append(" ".join(current))
            current, timed = [], False
        elif _TIMING.match(line):
            timed = True
        elif timed:
            current.append(_TAG.sub("", line))
    if current:
        cues.append(" ".join(current))
    return "\n".join(c for c in cues if c)
