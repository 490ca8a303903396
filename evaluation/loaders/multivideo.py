"""Records of multi-video question benchmarks (MVX-Bench, CrossVid), read the same way.

Neither benchmark's question file is available here, and their releases name fields variously, so
a record is read by the first present of several names (assumptions, stated once):

* id: ``id`` | ``question_id`` | ``qid`` | ``uid``
* task: ``task`` | ``task_type`` | ``question_type`` | ``type``
* videos: ``videos`` | ``video_ids`` | ``video_list`` (a list of names or ``{"id"|"path"|...}``
  objects), else a single ``video`` | ``video_id``
* options: ``options`` | ``candidates`` | ``choices`` (a list, labelled ``"A. ..."`` or not, or a
  ``{"A": ...}`` mapping), absent for open-ended questions
* answer: ``answer`` | ``gt`` | ``ground_truth`` | ``correct_choice`` (a letter, index or option text)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from vidscope.evaluation.items import (
    AnnotationError,
    BenchmarkItem,
    choice_answer,
    first,
    options_of,
    question_text,
    read_records,
    unique_ids,
)

ID_FIELDS = ("id", "question_id", "qid", "uid")
TASK_FIELDS = ("task", "task_type", "question_type", "type")
VIDEO_LIST_FIELDS = ("videos", "video_ids", "video_list")
VIDEO_FIELDS = ("video", "video_id")
OPTION_FIELDS = ("options", "candidates", "choices")
ANSWER_FIELDS = ("answer", "gt", "ground_truth", "correct_choice")


def _video_name(value: Any, where: str) -> str:
    if isinstance(value, dict):
        return str(first(value, ("id", "video_id", "path", "video_path", "name"), where))
    return str(value)


def videos_of(record: dict[str, Any], where: str) -> tuple[str, ...]:
    """The record's videos, in the order given."""
    listed = first(record, VIDEO_LIST_FIELDS, where, default=None)
    if listed is None:
        return (_video_name(first(record, VIDEO_FIELDS, where), where),)
    if not isinstance(listed, list) or not listed:
        raise AnnotationError(f"{where}: the video list is empty or not a list")
    return tuple(_video_name(v, where) for v in listed)


def load_records(
    path: Path | str, benchmark: str, dimension_of: Callable[[dict[str, Any], str], str | None]
) -> list[BenchmarkItem]:
    """Every record of a multi-video question file as an item of ``benchmark``."""
    items = []
    for n, record in enumerate(read_records(Path(path))):
        qid = str(first(record, ID_FIELDS, f"{path}[{n}]", default=n))
        where = f"{path}: {qid}"
        task = str(first(record, TASK_FIELDS, where, default="")) or None
        raw_options = first(record, OPTION_FIELDS, where, default=None)
        options = options_of(raw_options, where) if raw_options else ()
        raw_answer = first(record, ANSWER_FIELDS, where, default=None)
        if options:
            answer = choice_answer(raw_answer, options, where) if raw_answer is not None else None
        else:
            answer = str(raw_answer) if raw_answer is not None else None
        items.append(
            BenchmarkItem(
                benchmark=benchmark,
                question_id=qid,
                kind="multiple_choice" if options else "open_ended",
                video_ids=videos_of(record, where),
                question=question_text(record.get("question"), where),
                options=options,
                answer=answer,
                categories=(task,) if task else (),
                dimension=dimension_of(record, task or ""),
            )
        )
    return list(unique_ids(items))
