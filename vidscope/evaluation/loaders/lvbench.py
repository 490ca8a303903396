"""LVBench (extreme long videos, 6 question types; DVD reports 74.2).

Format (``video_info.meta.jsonl`` of the LVBench repository), one video per line::

    {"key": "<YouTube id>", "type": "cartoon", "video_info": {"duration_minutes": ...},
     "qa": [{"uid": "...", "question": "...\\n(A) ...\\n(B) ...\\n(C) ...\\n(D) ...",
             "answer": "D", "question_type": ["key information retrieval", ...],
             "time_reference": "00:15-00:19"}]}

The options are embedded in the question text as ``(A) ...`` lines and are split off here. A
question may have several question types; it counts in each of them per type, as LVBench's own
per-type table does. ``time_reference`` (``MM:SS-MM:SS`` or ``HH:MM:SS-HH:MM:SS``, sometimes several
comma-separated ranges) becomes the gold interval(s). Videos are ``<key>.mp4``. The file is not
redistributed here; this follows the repository's documented layout, and fields named differently
in other copies (``video_id`` for ``key``, ``id`` for ``uid``) are accepted too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from vidscope.evaluation.items import (
    AnnotationError,
    BenchmarkItem,
    Interval,
    choice_answer,
    first,
    question_text,
    unique_ids,
)

NAME = "lvbench"

_OPTION_LINE = re.compile(r"^\s*\(([A-J])\)\s*(.*)$")
_RANGE = re.compile(r"(\d+(?::\d+){1,2})\s*-\s*(\d+(?::\d+){1,2})")


def split_question(text: str) -> tuple[str, tuple[str, ...]]:
    """``"Q?\\n(A) x\\n(B) y"`` → ``("Q?", ("x", "y"))``; the options must be A, B, C... in order."""
    question_lines: list[str] = []
    options: list[str] = []
    for line in text.splitlines():
        match = _OPTION_LINE.match(line)
        if match and ord(match.group(1)) - ord("A") == len(options):
            options.append(match.group(2).strip())
        elif options:
            options[-1] = f"{options[-1]} {line.strip()}".strip()  # an option wrapped over lines
        else:
            question_lines.append(line)
    return "\n".join(question_lines).strip(), tuple(options)


def clock_seconds(text: str) -> float:
    """``"01:02:03"`` → 3723.0, ``"02:03"`` → 123.0."""
    seconds = 0.0
    for part in text.split(":"):
        seconds = seconds * 60 + float(part)
    return seconds


def time_references(text: str | None) -> tuple[Interval, ...]:
    """Every ``start-end`` clock range in a time reference, in seconds."""
    if not text:
        return ()
    return tuple((clock_seconds(a), clock_seconds(b)) for a, b in (m.groups() for m in _RANGE.finditer(text)))


def load(path: Path | str) -> list[BenchmarkItem]:
    """Every question of an LVBench ``video_info.meta.jsonl``."""
    path = Path(path)
    items = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        video = json.loads(line)
        key = str(first(video, ("key", "video_id", "video"), f"{path}:{number}"))
        info = video.get("video_info") or {}
        minutes = info.get("duration_minutes")
        duration = float(minutes) * 60 if minutes is not None else info.get("duration")
        for qa in video.get("qa", []):
            uid = str(first(qa, ("uid", "id", "question_id"), f"{path}:{number}"))
            where = f"{path}:{number}: {uid}"
            question, options = split_question(question_text(qa.get("question"), where))
            if not options:
                raise AnnotationError(f"{where}: no '(A) ...' option lines in the question")
            types = qa.get("question_type") or []
            items.append(
                BenchmarkItem(
                    benchmark=NAME,
                    question_id=uid,
                    kind="multiple_choice",
                    video_ids=(key,),
                    question=question,
                    options=options,
                    answer=choice_answer(qa["answer"], options, where),
                    categories=tuple(types) if isinstance(types, list) else (str(types),),
                    dimension=video.get("type"),
                    duration=float(duration) if duration is not None else None,
                    intervals=time_references(qa.get("time_reference")),
                )
            )
    return list(unique_ids(items))
