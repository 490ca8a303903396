"""CrossVid (cross-video reasoning; AgentCVR reports 42.0, accuracy per dimension).

The question file is not available here; records are read as described in
:mod:`vidscope.evaluation.loaders.multivideo`. CrossVid groups its ten tasks into four dimensions;
a record's own ``dimension`` field wins, else the task's abbreviation or full name is looked up in
:data:`TASK_DIMENSIONS` (taken from the paper's task list; an unknown task gets no dimension and
is still scored overall and per task). How each task is scored follows the release's
``eval/*.py``: single choice by its letter, BU's multi-select by the set of letters, FSA by the
IoU of an interval, PSS by the exact order (its segments asked about as separate clips); CCQA is
free-form and scored by an LLM judge on its scoring points (``score_CCQA.py``; see
:mod:`vidscope.evaluation.scoring`). MSR and MOC (UAV views with bounding boxes) are refused.
A dimension's score is the mean of its tasks' scores (:data:`DIMENSION_AVERAGE`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from vidscope.evaluation.items import BenchmarkItem
from vidscope.evaluation.loaders.multivideo import load_records

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


def _dimension(record: dict[str, Any], task: str) -> str | None:
    value = record.get("dimension")
    if value is not None:
        return str(value)
    return TASK_DIMENSIONS.get(task.strip().lower())


def load(path: Path | str) -> list[BenchmarkItem]:
    """Every question of a CrossVid question file (the release's ``QA/BU.json`` holds one task,
    named by the file; a record's own task field wins)."""
    stem = Path(path).stem
    return load_records(path, NAME, _dimension, stem if stem.lower() in TASK_DIMENSIONS else None)
