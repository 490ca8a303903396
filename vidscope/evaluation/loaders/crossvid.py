"""CrossVid (cross-video reasoning; AgentCVR reports 42.0, accuracy per dimension).

The question file is not available here; records are read as described in
:mod:`vidscope.evaluation.loaders.multivideo`. CrossVid groups its ten tasks into four dimensions;
a record's own ``dimension`` field wins, else the task's abbreviation or full name is looked up in
:data:`TASK_DIMENSIONS` (taken from the paper's task list; an unknown task gets no dimension and
is still scored overall and per task). How each task is scored follows the release's
``eval/*.py``: single choice by its letter, BU's multi-select by the set of letters, FSA by the
IoU of an interval, PSS by the exact order (its segments asked about as separate clips); CCQA is
free-form and scored by an LLM judge on its scoring points (``score_CCQA.py``; see
:mod:`vidscope.evaluation.scoring`). A dimension's score is the mean of its tasks' scores
(:data:`DIMENSION_AVERAGE`).

As the release's scripts treat each question on its own, a record that cannot be read is one
line and that question skipped (an unusable item the run reports), never the whole file. MSR and
MOC (UAV views with bounding boxes, not modelled here) are skipped the same way and reported as
*missing* tasks, so the overall score is labelled with the tasks it covers (``O.Avg (8 of 10
tasks)``). BU's gold is read in every form the release's ``BU.py`` accepts (it compares the reply
with ``"".join(answer)``): ``["A", "C"]``, ``"AC"``, ``"A, C"``, ``"A,C"``.

``parse`` (loader option, ``--parse``): ``strict`` (the default) scores replies as the release's
scripts do, by string equality with the gold after trimming (see
:func:`vidscope.evaluation.scoring.strict_reading`); ``lenient`` reads them with our extraction
rules (:mod:`vidscope.evaluation.answers`). The mode is kept in each item's ``extra["parse"]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Literal

from vidscope.evaluation.items import AnnotationError, BenchmarkItem
from vidscope.evaluation.loaders.multivideo import load_records

ParseMode = Literal["strict", "lenient"]
#: How replies are read: as strictly as the release's scripts (the default), or by our rules.
PARSE_MODES: Final = ("strict", "lenient")
#: ``extra`` key of an item's parse mode.
PARSE = "parse"

NAME = "crossvid"
#: A dimension's score is the mean of its tasks' scores, the overall score (O.Avg) the mean of all
#: ten tasks' (README: "C.Avg: Average accuracy on Comparative Analysis tasks (BU, NC, CC, PEA)";
#: "O.Avg: Overall average accuracy across all ten tasks"); see ``scoring.dimension_means``.
DIMENSION_AVERAGE: Final = "tasks"

COMPARATIVE = "Comparative Analysis"
TEMPORAL = "Temporal Understanding"
MULTI_VIEW = "Multi-view Reasoning"
FREE_FORM = "Free-form QA"

#: Task (abbreviation and full name, lower case) → dimension.
TASK_DIMENSIONS = {
    "bu": COMPARATIVE,
    "behavioral understanding": COMPARATIVE,
    "nc": COMPARATIVE,
    "narrative comprehension": COMPARATIVE,
    "cc": COMPARATIVE,
    "culinary comparison": COMPARATIVE,
    "pea": COMPARATIVE,
    "procedural error analysis": COMPARATIVE,
    "pi": TEMPORAL,
    "plot inference": TEMPORAL,
    "fsa": TEMPORAL,
    "functional step alignment": TEMPORAL,
    "pss": TEMPORAL,
    "procedural step sequencing": TEMPORAL,
    "msr": MULTI_VIEW,
    "multi-view spatial reasoning": MULTI_VIEW,
    "moc": MULTI_VIEW,
    "multi-view object counting": MULTI_VIEW,
    "ccqa": FREE_FORM,
    "comparative culinary qa": FREE_FORM,
}

#: The ten tasks by their abbreviations, in the paper's order (O.Avg is their mean).
TASKS: Final = ("BU", "NC", "CC", "PEA", "PI", "FSA", "PSS", "MSR", "MOC", "CCQA")
#: Task names (abbreviation or full name, lower case) whose gold is a set of letters.
MULTI_SELECT: Final = frozenset({"bu", "behavioral understanding"})


def task_abbreviation(task: str) -> str | None:
    """``"Behavioral Understanding"`` or ``"bu"`` → ``"BU"``; None for a task not of the ten."""
    key = task.strip().lower()
    if key.upper() in TASKS:
        return key.upper()
    names = [name for name in TASK_DIMENSIONS if name == key]
    if not names:
        return None
    # Full names follow their abbreviation in TASK_DIMENSIONS.
    keys = list(TASK_DIMENSIONS)
    return keys[keys.index(names[0]) - 1].upper()


def _dimension(record: dict[str, Any], task: str) -> str | None:
    value = record.get("dimension")
    if value is not None:
        return str(value)
    return TASK_DIMENSIONS.get(task.strip().lower())


def load(path: Path | str, parse: str = "strict") -> list[BenchmarkItem]:
    """Every question of a CrossVid question file (the release's ``QA/BU.json`` holds one task,
    named by the file; a record's own task field wins); a record that cannot be used is an
    unusable item with its reason. ``parse``: ``strict`` or ``lenient`` (see the module)."""
    if parse not in PARSE_MODES:
        raise AnnotationError(f"parse={parse!r}: choose strict (the release's string equality) or lenient")
    stem = Path(path).stem
    return load_records(
        path,
        NAME,
        _dimension,
        stem if stem.lower() in TASK_DIMENSIONS else None,
        skip_bad=True,
        multi_select_tasks=MULTI_SELECT,
        extra={PARSE: parse},
    )
