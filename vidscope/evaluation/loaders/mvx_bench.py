"""MVX-Bench (multi-video questions; SAMA reports 52.7, accuracy per task).

The question file is not available here; records are read as described in
:mod:`vidscope.evaluation.loaders.multivideo` (a JSON/JSONL list of questions, each with its task,
its list of videos, options and a gold letter). Results are reported per task (the items'
categories) and overall. A ``dimension`` field, when a record has one, is kept.

Options that name videos ("Video A" … "Video D", the candidates of a retrieval-style question) are
mapped to the candidate videos, as SAMA's Meta Planner maps each video to an identifier: "Video A"
is the first candidate (the videos whose role is ``candidate``, else every video after a
``reference`` one, else every video), "Video B" the second, and so on. The mapping is kept in
``extra["option_videos"]`` (option letter → the benchmark's video name); the agent is told which
video each option is (:func:`vidscope.agents.multi_video.name_option_videos`), and an answer that
names the video (its id, its file name or stem, "video 2") instead of the letter is scored as that
letter (:func:`vidscope.evaluation.scoring.video_choice`). An option naming a video beyond the
candidates is left unmapped.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from vidscope.evaluation.items import BenchmarkItem
from vidscope.evaluation.loaders.multivideo import ROLES, load_records

NAME = "mvx_bench"
#: ``extra`` key of the options that name candidate videos: option letter -> video name.
OPTION_VIDEOS = "option_videos"
_VIDEO_OPTION = re.compile(r"^\s*video\s+([A-Z])\s*$", re.IGNORECASE)


def candidates(item: BenchmarkItem) -> list[str]:
    """The item's candidate videos in order: those whose role is ``candidate``, else those after a
    ``reference`` video, else all of them."""
    roles = item.extra.get(ROLES) or []
    if roles and "candidate" in roles:
        return [v for v, role in zip(item.video_ids, roles, strict=False) if role == "candidate"]
    return list(item.video_ids)


def option_videos(item: BenchmarkItem) -> dict[str, str]:
    """Option letter -> candidate video for the options that name one ("Video B": the second)."""
    pool = candidates(item)
    out: dict[str, str] = {}
    for n, text in enumerate(item.options):
        named = _VIDEO_OPTION.match(text)
        if named is None:
            continue
        index = ord(named.group(1).upper()) - ord("A")
        if index < len(pool):
            out[chr(ord("A") + n)] = pool[index]
    return out


def _dimension(record: dict[str, Any], task: str) -> str | None:
    value = record.get("dimension")
    return str(value) if value is not None else None


def load(path: Path | str) -> list[BenchmarkItem]:
    """Every question of an MVX-Bench question file, its video options mapped to its candidates."""
    items = []
    for item in load_records(path, NAME, _dimension):
        mapped = option_videos(item)
        if mapped:
            item = item.model_copy(update={"extra": {**item.extra, OPTION_VIDEOS: mapped}})
        items.append(item)
    return items
