"""``samples.jsonl``: one line per benchmark question, with everything a reviewer needs to check it.

``predictions.jsonl`` is the run's own record (what resuming reads); ``summary.json`` holds the
numbers. Neither lets a reviewer read one question's fate without joining files: the question and
its options live in the annotation file, the letter read from the answer and the score in the
scorer. Each line here has them together: the question id, the question, the options with their
letters, the gold answer, the agent's response and explicit choice, what the scorer read from it
(``parsed``), the score, the status, the error, and the trace file (as lmms-eval's
``--log_samples`` keeps one record per document).

Every question of the annotation file ends as one :data:`ItemStatus`:

* ``scored``: answered, and the scorer read an answer from it (a letter, an interval, an order,
  a ranking, a judge's verdict);
* ``unparsed``: answered, but nothing could be read (no option named, no interval given); it
  scores 0 in both the strict and the answered figures: a parsing problem is still a wrong answer,
  only counted apart;
* ``unscored``: answered, with nothing to score it against (no gold answer, an open question
  with no rule, a judge that gave no verdict);
* ``failed``: no answer; ``stage`` says where (``ingest``: a video could not be ingested,
  ``segment``: a clip could not be cut, ``answer``: the agent raised after its retries) and
  ``error`` why. Strict figures count it wrong, figures over answered questions leave it out;
* ``skipped``: never asked: a video was not found under the root, or the run has not got to it
  (``--limit``); in no figure.

The lines are written with the report (:func:`vidscope.evaluation.report.write_report`), in the
annotation file's order, and rewritten whole each time the run resumes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from vidscope.evaluation.items import LETTERS, BenchmarkItem
from vidscope.evaluation.runs import Prediction

SAMPLES_FILE = "samples.jsonl"

#: How a question of the benchmark ended (see the module's docstring).
ItemStatus = Literal["scored", "unparsed", "unscored", "failed", "skipped"]
#: The statuses in the order reports list them.
STATUSES: tuple[ItemStatus, ...] = ("scored", "unparsed", "unscored", "failed", "skipped")
#: The statuses of questions that got an answer.
ANSWERED: frozenset[str] = frozenset({"scored", "unparsed", "unscored"})


class Sample(BaseModel):
    """One question as a reviewer checks it: asked what, answered what, read as what, scored how."""

    question_id: str
    benchmark: str
    kind: str
    categories: list[str] = Field(default_factory=list)
    videos: list[str] = Field(default_factory=list, description="The benchmark's names of its videos.")
    question: str
    options: list[str] = Field(default_factory=list, description="'A. text' per option.")
    gold: str | None = Field(None, description="The gold letter(s), interval or video; None: not given.")
    response: str | None = Field(None, description="The agent's answer as it gave it (None: no answer).")
    choice: str | None = Field(None, description="The option the agent chose explicitly, if it did.")
    choice_source: str | None = Field(
        None, description="given (the answer action's choice) or read (from the answer's words)."
    )
    parsed: str | None = Field(
        None, description="What the scorer read: a letter, 'start-end' seconds, an order, the top video."
    )
    score: float | None = Field(None, description="1/0, an IoU, a rule's score; None: not scored.")
    status: ItemStatus
    stage: str | None = Field(None, description="Where a failed question failed.")
    error: str | None = Field(None, description="Why it failed, or why it was skipped.")
    trace: str | None = Field(None, description="The answer's trace file, relative to the run directory.")
    steps: int | None = None
    seconds: float | None = None


def seconds_range(interval: Sequence[float] | None) -> str | None:
    """``(12.0, 15.5)`` as ``"12-15.5"``; None stays None."""
    return None if interval is None else f"{interval[0]:g}-{interval[1]:g}"


def gold_of(item: BenchmarkItem) -> str | None:
    """The item's gold answer as text: letter(s), an interval, the gold video(s), the reference."""
    if item.kind == "grounding":
        return seconds_range(item.intervals[0]) if item.intervals else None
    if item.kind == "retrieval":
        return ", ".join(item.video_ids)
    return item.answer


def sample(
    item: BenchmarkItem,
    prediction: Prediction | None,
    status: ItemStatus,
    *,
    parsed: str | None = None,
    score: float | None = None,
    stage: str | None = None,
    error: str | None = None,
) -> Sample:
    """The line of ``item`` (``prediction``: its answer or failure, None when never asked)."""
    answered = prediction is not None and not prediction.failed
    return Sample(
        question_id=item.question_id,
        benchmark=item.benchmark,
        kind=item.kind,
        categories=list(item.categories),
        videos=list(item.video_ids),
        question=item.question,
        options=[f"{LETTERS[n]}. {text}" for n, text in enumerate(item.options)],
        gold=gold_of(item),
        response=prediction.answer if answered and prediction is not None else None,
        choice=prediction.choice if answered and prediction is not None else None,
        choice_source=prediction.choice_source if answered and prediction is not None else None,
        parsed=parsed,
        score=score,
        status=status,
        stage=stage,
        error=error,
        trace=prediction.trace if prediction is not None else None,
        steps=prediction.steps if answered and prediction is not None else None,
        seconds=prediction.seconds if answered and prediction is not None else None,
    )


def write_samples(run_dir: Path, samples: Iterable[Sample]) -> Path:
    """Write ``samples.jsonl`` (whole, then renamed into place); returns its path."""
    path = Path(run_dir) / SAMPLES_FILE
    temporary = path.with_suffix(".jsonl.tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        for line in samples:
            handle.write(line.model_dump_json() + "\n")
    temporary.replace(path)
    return path


def read_samples(run_dir: Path) -> list[Sample]:
    """The lines of a run's ``samples.jsonl`` (none when it has not been written)."""
    path = Path(run_dir) / SAMPLES_FILE
    if not path.is_file():
        return []
    return [
        Sample.model_validate(json.loads(line))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
