"""Scoring benchmark items the way the papers do.

* Multiple choice: the model's free-form answer goes through
  :func:`~vidscope.evaluation.answers.extract_choice`; an answer that chose nothing, and an item
  the run has no answer for, is wrong. Accuracy is reported overall, per category (a question
  with several categories, as in LVBench, counts in each), per duration group and per dimension;
  the macro average over categories is MLVU's M-Avg. MVX-Bench reports per task (the categories),
  CrossVid per dimension. Items without a gold answer (EgoSchema's full set, the two MLVU
  questions whose answer is no candidate) are not scored and are listed instead.
* Grounding: R@0.3/0.5/0.7 and mIoU against the item's gold interval
  (:func:`~vidscope.evaluation.metrics.grounding_scores`).
* Retrieval: R@1/5/10 with the item's video as gold (:func:`~vidscope.evaluation.metrics.recall_at_k`),
  MdR and MnR (:func:`~vidscope.evaluation.metrics.rank_scores`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from vidscope.evaluation.answers import extract_choice
from vidscope.evaluation.items import LETTERS, BenchmarkItem, Interval
from vidscope.evaluation.metrics import grounding_scores, rank_scores, recall_at_k


@dataclass(frozen=True)
class Accuracy:
    """Correct answers out of scored questions."""

    correct: int
    total: int

    @property
    def value(self) -> float:
        """The fraction correct (0 when nothing was scored)."""
        return self.correct / self.total if self.total else 0.0


@dataclass
class ChoiceReport:
    """Multiple-choice accuracy, overall and by each grouping the benchmarks report."""

    overall: Accuracy
    by_category: dict[str, Accuracy]
    by_duration_group: dict[str, Accuracy]
    by_dimension: dict[str, Accuracy]
    #: The letter each scored question was read as choosing (None: it chose nothing).
    chosen: dict[str, str | None] = field(default_factory=dict)
    #: Questions left out because the benchmark gives no gold answer for them.
    unscored: list[str] = field(default_factory=list)
    #: Answered questions whose answer named no option the rules could read (scored wrong, and
    #: counted apart from wrong choices: a parsing problem is not a reasoning error).
    unparsed: list[str] = field(default_factory=list)

    @property
    def macro(self) -> float:
        """The mean of the per-category accuracies (MLVU's M-Avg); 0 without categories."""
        values = [a.value for a in self.by_category.values()]
        return sum(values) / len(values) if values else 0.0


def is_correct(item: BenchmarkItem, letter: str | None) -> bool:
    """Whether choosing ``letter`` answers ``item``: its gold letter, or an option with the same text
    (some releases list a candidate twice, and either copy is the right answer)."""
    if letter is None or item.answer is None or letter not in LETTERS[: len(item.options)]:
        return False
    gold = item.options[LETTERS.index(item.answer)]
    return letter == item.answer or item.options[LETTERS.index(letter)].strip() == gold.strip()


def _group(
    scored: Sequence[tuple[BenchmarkItem, bool]], keys: Callable[[BenchmarkItem], Iterable[str]]
) -> dict[str, Accuracy]:
    tally: dict[str, list[int]] = {}
    for item, right in scored:
        for key in keys(item):
            counts = tally.setdefault(key, [0, 0])
            counts[0] += int(right)
            counts[1] += 1
    return {key: Accuracy(c, t) for key, (c, t) in sorted(tally.items())}


def score_choices(items: Iterable[BenchmarkItem], answers: Mapping[str, str | None]) -> ChoiceReport:
    """Accuracy of free-form ``answers`` (by question id) on the multiple-choice ``items``.

    Pass the items the run attempted: one with no entry in ``answers`` counts as wrong.
    """
    scored: list[tuple[BenchmarkItem, bool]] = []
    chosen: dict[str, str | None] = {}
    unscored: list[str] = []
    unparsed: list[str] = []
    for item in items:
        if item.kind != "multiple_choice":
            raise ValueError(f"{item.question_id} is a {item.kind} item, not multiple choice")
        if item.answer is None:
            unscored.append(item.question_id)
            continue
        said = answers.get(item.question_id)
        letter = extract_choice(said, item.options)
        chosen[item.question_id] = letter
        if letter is None and said and said.strip():
            unparsed.append(item.question_id)
        scored.append((item, is_correct(item, letter)))
    return ChoiceReport(
        overall=Accuracy(sum(right for _, right in scored), len(scored)),
        by_category=_group(scored, lambda i: i.categories),
        by_duration_group=_group(scored, lambda i: (i.duration_group,) if i.duration_group else ()),
        by_dimension=_group(scored, lambda i: (i.dimension,) if i.dimension else ()),
        chosen=chosen,
        unscored=unscored,
        unparsed=unparsed,
    )


def score_grounding(
    items: Sequence[BenchmarkItem], predictions: Mapping[str, Interval | None]
) -> dict[str, float]:
    """R@0.3/0.5/0.7 and mIoU of predicted intervals (by question id; missing = IoU 0)."""
    golds = []
    for item in items:
        if not item.intervals:
            raise ValueError(f"{item.question_id} has no gold interval")
        golds.append(item.intervals[0])
    return grounding_scores([predictions.get(i.question_id) for i in items], golds)


def score_retrieval(
    items: Sequence[BenchmarkItem], rankings: Mapping[str, Sequence[str]], gallery: int | None = None
) -> dict[str, float]:
    """R@1/5/10, MdR and MnR of ranked video names per question id; the item's video(s) are the
    gold. ``gallery``: how many videos were searched (default: the items' distinct videos); a gold
    video missing from a ranking is ranked last."""
    gold = {i.question_id: i.video_ids for i in items}
    ranked = {q: rankings.get(q, []) for q in gold}
    size = gallery if gallery is not None else len({v for i in items for v in i.video_ids})
    return {**recall_at_k(ranked, gold), **rank_scores(ranked, gold, size)}
