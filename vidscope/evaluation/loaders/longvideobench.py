"""LongVideoBench (referring reasoning over long interleaved videos; DVD reports 71.6 on val).

Format (``lvb_val.json`` of the release; not redistributed here): a list of questions::

    {"id": "...", "video_id": "...", "video_path": "<video_id>.mp4", "subtitle_path": "..._en.json",
     "question": "...", "candidates": ["...", ...], "correct_choice": 2,
     "question_category": "T3O", "topic_category": "...", "level": "L2-Relation",
     "duration_group": 600, "duration": 412.3, "position": [...]}

The answer is an index into ``candidates`` (up to five). Categories are the 17 question
categories; the dimension is the level (perception vs relation); the duration group is the
benchmark's bucket (15, 60, 600, 3600: (8,15], (15,60], (180,600], (900,3600] seconds). The test
split has no ``correct_choice``; its items carry no answer.
"""

from __future__ import annotations

from pathlib import Path

from vidscope.evaluation.items import (
    BenchmarkItem,
    choice_answer,
    first,
    options_of,
    question_text,
    read_records,
    unique_ids,
)

NAME = "longvideobench"


def load(path: Path | str, *, subtitles: bool = False) -> list[BenchmarkItem]:
    """Every question of a LongVideoBench annotation file (``lvb_val.json`` / ``lvb_test_wo_gt.json``)."""
    items = []
    for n, row in enumerate(read_records(Path(path))):
        qid = str(first(row, ("id", "question_id"), f"{path}[{n}]"))
        where = f"{path}: {qid}"
        options = options_of(row["candidates"], where)
        video = str(first(row, ("video_path", "video_id"), where))
        group = row.get("duration_group")
        items.append(
            BenchmarkItem(
                benchmark=NAME,
                question_id=qid,
                kind="multiple_choice",
                video_ids=(video,),
                question=question_text(row.get("question"), where),
                options=options,
                answer=choice_answer(row["correct_choice"], options, where)
                if row.get("correct_choice") is not None
                else None,
                categories=(str(row["question_category"]),) if row.get("question_category") else (),
                dimension=row.get("level"),
                duration_group=str(group) if group is not None else None,
                duration=float(row["duration"]) if row.get("duration") is not None else None,
                subtitles=str(row["subtitle_path"]) if subtitles and row.get("subtitle_path") else None,
                extra={k: row[k] for k in ("topic_category", "position") if row.get(k) is not None},
            )
        )
    return list(unique_ids(items))
