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

CrossVid's release (``QA/<TASK>.json``, one file per task, fields as its ``eval/*.py`` scripts read
them) adds: the task from the file name when records carry none; ``"video A"``/``"video B"``
(FSA, CCQA); a list of letters as the answer of a multi-select question (BU, "1-3 correct
choices": the item's answer is the letters in order, ``"AC"``, and :data:`RULE` is ``set``); two
numbers as the answer of an open question (FSA: the gold interval in video 2, rule ``interval``,
asked about the ``ref_segment`` of video 1); a ``"2->3->1->4"`` order (PSS, rule ``order``); and
``scoring_points`` of a free-form answer (CCQA, rule ``judge``).

A PSS record (``video``, ``segments``: ``{label: [start, end]}`` in shuffled order, no question)
keeps its segments in ``extra["segments"]`` as ``[[start, end], ...]`` in the record's order and
gets :data:`ORDER_QUESTION` (our words for the paper's: the N videos are N shuffled segments of
one video; in what order do they happen); the ``evaluate`` flow cuts each segment into a clip
and asks about the clips, segment k as the k-th video (:mod:`vidscope.evaluation.segments`). The
segments' times are never put in the question: they would give the order away. Fewer than two
``[start, end]`` pairs (0 <= start < end), or a gold that is no order of the segments, is an
:class:`AnnotationError`.

MSR and MOC records (``vid``, ``objects``, ``{A1}``-style object placeholders) need the UAV frame
folders and bounding-box files the release's scripts read, which are not modelled here (and no
CrossVid data is at hand to build them against): with ``skip_bad`` (CrossVid) such a record is an
unusable item whose reason is :data:`UAV_REFUSAL`, skipped by the run and its task reported
missing; otherwise the file is refused in one line.

A video's role (MVX-Bench's reference and candidate videos) is read from a video object's
``role`` field, or from ``reference_video`` / ``candidate_videos`` fields of the record; the roles
are kept in ``extra["roles"]`` (one per video, in order) for the agents' request.
"""

from __future__ import annotations

import re
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
    unusable_item,
)
from vidscope.evaluation.metrics import order_of

ID_FIELDS = ("id", "question_id", "qid", "uid")
TASK_FIELDS = ("task", "task_type", "question_type", "type")
VIDEO_LIST_FIELDS = ("videos", "video_ids", "video_list")
VIDEO_FIELDS = ("video", "video_id")
OPTION_FIELDS = ("options", "candidates", "choices")
ANSWER_FIELDS = ("answer", "gt", "ground_truth", "correct_choice")
PAIR_FIELDS = ("video A", "video B")
#: ``extra`` key naming how an item that is not single-choice is scored (see ``scoring.score_rules``).
RULE = "rule"
#: ``extra`` key of the videos' roles (``"reference"``, ``"candidate"``), one per video.
ROLES = "roles"


def _video_name(value: Any, where: str) -> str:
    if isinstance(value, dict):
        return str(first(value, ("id", "video_id", "path", "video_path", "name"), where))
    return str(value)


def videos_of(record: dict[str, Any], where: str) -> tuple[str, ...]:
    """The record's videos, in the order given."""
    if all(record.get(name) for name in PAIR_FIELDS):
        return tuple(str(record[name]) for name in PAIR_FIELDS)
    if record.get("reference_video") and isinstance(record.get("candidate_videos"), list):
        return (str(record["reference_video"]), *(str(v) for v in record["candidate_videos"]))
    listed = first(record, VIDEO_LIST_FIELDS, where, default=None)
    if listed is None:
        return (_video_name(first(record, VIDEO_FIELDS, where), where),)
    if not isinstance(listed, list) or not listed:
        raise AnnotationError(f"{where}: the video list is empty or not a list")
    return tuple(_video_name(v, where) for v in listed)


def roles_of(record: dict[str, Any], n_videos: int) -> tuple[str, ...]:
    """Each video's role, when the record gives them (else empty)."""
    if record.get("reference_video") and isinstance(record.get("candidate_videos"), list):
        return ("reference", *["candidate"] * (n_videos - 1))
    listed = first(record, VIDEO_LIST_FIELDS, "", default=None)
    if isinstance(listed, list) and listed and all(isinstance(v, dict) and v.get("role") for v in listed):
        return tuple(str(v["role"]) for v in listed)
    return ()


def _numbers(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in value
    )


#: The question of a CrossVid PSS record, which carries none (the wording is ours; the paper's
#: prompt shows the N segments of one video as shuffled clips and asks for their order).
ORDER_QUESTION = (
    "The {n} videos are {n} segments of one video, shown in shuffled order: segment 1 is video 1, "
    "segment 2 is video 2, and so on. In what order do the segments happen in the original video?"
)
#: ``extra`` key of an ordering record's segments: ``[[start, end], ...]`` in the record's order.
SEGMENTS = "segments"


def segments_of(value: Any, where: str) -> list[list[float]]:
    """A PSS record's ``segments`` (``{label: [start, end]}``, or a list of pairs) as ``[[start,
    end], ...]`` in the record's order, which is the shuffled order its segments are shown in
    (``PSS.py`` numbers them as it iterates the mapping; the labels are not shown)."""
    pairs = list(value.values()) if isinstance(value, dict) else value
    if not isinstance(pairs, list) or len(pairs) < 2:
        raise AnnotationError(f"{where}: segments must map at least two labels to [start, end] in seconds")
    out = []
    for n, pair in enumerate(pairs, 1):
        if not (_numbers(pair) and len(pair) == 2 and 0 <= pair[0] < pair[1]):
            raise AnnotationError(f"{where}: segment {n} is {str(pair)[:40]}, not [start, end] in seconds")
        out.append([float(pair[0]), float(pair[1])])
    return out


def _check_order(answer: str | None, n_segments: int, where: str) -> None:
    """An ordering record's gold answer names each of its segments once."""
    order = order_of(answer)
    if answer is not None and (order is None or sorted(order) != list(range(1, n_segments + 1))):
        raise AnnotationError(f"{where}: the answer {answer[:40]!r} is no order of the {n_segments} segments")


def _question(record: dict[str, Any], where: str, segments: list[list[float]] | None) -> str:
    """The question, or for CrossVid's FSA and PSS records (which carry none) the paper's question
    in our words: FSA names the reference segment's times; PSS shows its segments as clips, never
    their times (they would give the order away)."""
    segment: Any = record.get("ref_segment")
    if record.get("question") is None and _numbers(segment) and len(segment) == 2:
        return (
            "Which step in video 2 is functionally equivalent to the step shown between "
            f"{segment[0]:g}s and {segment[1]:g}s in video 1? Answer with a time interval of video 2 "
            'in seconds, the start and end separated by a comma, e.g. "15,23".'
        )
    if record.get("question") is None and segments is not None:
        return ORDER_QUESTION.format(n=len(segments))
    return question_text(record.get("question"), where)


#: Why MSR/MOC records (``vid``, ``objects``, ``{A1}`` placeholders) are not asked: what they need
#: is not modelled, so such a record is an unusable item and its task is reported missing.
UAV_REFUSAL = (
    "CrossVid MSR/MOC records need the UAV views and bounding boxes (uav/frames/<view>/<vid>-<view> "
    "frame folders, uav/bbox/<view>/<vid>.json boxes put in the prompt), which are not modelled here: "
    "the task is reported missing"
)


def _is_uav(record: dict[str, Any]) -> bool:
    return "vid" in record and "objects" in record


def load_records(
    path: Path | str,
    benchmark: str,
    dimension_of: Callable[[dict[str, Any], str], str | None],
    default_task: str | None = None,
    *,
    skip_bad: bool = False,
    multi_select_tasks: frozenset[str] = frozenset(),
    extra: dict[str, Any] | None = None,
) -> list[BenchmarkItem]:
    """Every record of a multi-video question file as an item of ``benchmark`` (``default_task``:
    the task of records that name none).

    ``skip_bad``: a record that cannot be read (or an MSR/MOC record) becomes an *unusable* item
    (:func:`~vidscope.evaluation.items.unusable_item`: no videos, its reason in one line) that the
    run skips and reports, instead of refusing the file; a file that is no list of records, or
    repeats an id, is still refused. ``multi_select_tasks``: tasks (lower case) whose gold is a
    set of letters even when written as one string (``"AC"``, ``"A, C"``). ``extra``: added to
    every item's ``extra`` (the parse mode)."""
    items = []
    for n, record in enumerate(read_records(Path(path))):
        qid = str(first(record, ID_FIELDS, f"{path}[{n}]", default=n))
        where = f"{path}: {qid}"
        task = str(first(record, TASK_FIELDS, where, default="")) or default_task
        try:
            if _is_uav(record):
                raise AnnotationError(f"{where}: {UAV_REFUSAL}")
            item = _item(record, benchmark, qid, where, task, dimension_of, multi_select_tasks)
        except AnnotationError as exc:
            if not skip_bad:
                raise
            reason = str(exc).splitlines()[0] if str(exc) else "unreadable record"
            categories = (task,) if task else ()
            item = unusable_item(benchmark, qid, reason, categories, dimension_of(record, task or ""))
        if extra:
            item = item.model_copy(update={"extra": {**item.extra, **extra}})
        items.append(item)
    return list(unique_ids(items))


def _item(
    record: dict[str, Any],
    benchmark: str,
    qid: str,
    where: str,
    task: str | None,
    dimension_of: Callable[[dict[str, Any], str], str | None],
    multi_select_tasks: frozenset[str],
) -> BenchmarkItem:
    """One readable record as an item (an :class:`AnnotationError` says what is wrong with it)."""
    segments = segments_of(record[SEGMENTS], where) if record.get(SEGMENTS) is not None else None
    raw_options = first(record, OPTION_FIELDS, where, default=None)
    options = options_of(raw_options, where) if raw_options else ()
    raw_answer = first(record, ANSWER_FIELDS, where, default=None)
    extra: dict[str, Any] = {}
    intervals: tuple[tuple[float, float], ...] = ()
    multi = (task or "").strip().lower() in multi_select_tasks
    if options and (isinstance(raw_answer, list) or (multi and raw_answer is not None)):
        answer: str | None = "".join(gold_letters(raw_answer, options, where))
        extra[RULE] = "set"
        # The release's BU script compares the reply with "".join(answer): "AC" for ["A", "C"],
        # and a gold written "A, C" as that very string.
        joined = "".join(str(a) for a in raw_answer) if isinstance(raw_answer, list) else str(raw_answer)
        extra[GOLD_TEXT] = joined
    elif options:
        answer = choice_answer(raw_answer, options, where) if raw_answer is not None else None
    elif _numbers(raw_answer) and len(raw_answer) == 2:
        intervals = ((float(raw_answer[0]), float(raw_answer[1])),)
        answer = f"{raw_answer[0]:g},{raw_answer[1]:g}"
        extra[RULE] = "interval"
    else:
        answer = str(raw_answer) if raw_answer is not None else None
        if answer is not None and (segments is not None or (order_of(answer) and "->" in answer)):
            extra[RULE] = "order"
        elif record.get("scoring_points"):
            extra[RULE] = "judge"
            extra["scoring_points"] = record["scoring_points"]
    video_ids = videos_of(record, where)
    if segments is not None:
        if len(video_ids) != 1:
            raise AnnotationError(f"{where}: segments are cut from one video, not {len(video_ids)}")
        if extra.get(RULE) == "order":
            _check_order(answer, len(segments), where)
        extra[SEGMENTS] = segments
    roles = roles_of(record, len(video_ids))
    if roles:
        extra[ROLES] = list(roles)
    return BenchmarkItem(
        benchmark=benchmark,
        question_id=qid,
        kind="multiple_choice" if options else "open_ended",
        video_ids=video_ids,
        question=_question(record, where, segments),
        options=options,
        answer=answer,
        categories=(task,) if task else (),
        dimension=dimension_of(record, task or ""),
        intervals=intervals,
        extra=extra,
    )


#: ``extra`` key of a multi-select gold as the release's script compares it (``"".join(answer)``).
GOLD_TEXT = "gold_text"
_SEPARATORS = re.compile(r"(?:\s*(?:,|;|/|&|\band\b)\s*|\s+)", re.IGNORECASE)


def gold_letters(value: Any, options: tuple[str, ...], where: str) -> list[str]:
    """The sorted letters of a multi-select gold in any form the release's BU script accepts: a
    list (``["A", "C"]``, ``["C", "A"]``, indices), or one string of letters (``"AC"``, ``"A, C"``,
    ``"A,C"``, ``"A C"``); an option's text names its letter. A letter beyond the options, or
    none at all, is an :class:`AnnotationError`."""
    parts: list[Any] = list(value) if isinstance(value, list | tuple) else [value]
    letters: set[str] = set()
    texts = [o.strip() for o in options]
    for part in parts:
        if isinstance(part, str) and part.strip() in texts:
            letters.add(choice_answer(part, options, where))
            continue
        if isinstance(part, str):
            tokens = [t for t in _SEPARATORS.split(part.strip().strip("()[]")) if t]
            if tokens and all(t.isalpha() and t.isupper() for t in tokens):
                for token in tokens:
                    for char in token:
                        letters.add(choice_answer(char, options, where))
                continue
        letters.add(choice_answer(part, options, where))
    if not letters:
        raise AnnotationError(f"{where}: the list of answers is empty")
    return sorted(letters)
