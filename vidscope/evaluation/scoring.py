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
* Multi-select (CrossVid BU): the answer's letters as a set must equal the gold set
  (:func:`~vidscope.evaluation.metrics.letter_set`); counted in the multiple-choice accuracy.
* Rules for open questions (``item.extra["rule"]``, set by the multi-video loader;
  :func:`score_rules`): ``order`` (CrossVid PSS) is right only in the exact gold order,
  ``interval`` (CrossVid FSA) scores the IoU of the answer's interval with the gold one (averaged:
  the task's figure is the mean IoU), ``judge`` (CrossVid CCQA) asks a judge model whether the
  answer covers each scoring point and gets it right (score = covered + correct over twice the
  points, as ``score_CCQA.py``); without a judge those items are listed as unscored.
* Dimensions averaged over tasks (CrossVid; :func:`dimension_means`): a dimension's score is the
  mean of its tasks' scores (multiple-choice accuracy, or the rule's mean), and the overall score
  the mean over all tasks, as CrossVid's leaderboard forms C.Avg, T.Avg, M.Avg and O.Avg.
* Strict parsing (CrossVid by default, ``item.extra["parse"] == "strict"``; :func:`strict_reading`):
  the release's ``eval/*.py`` compare the model's reply with the gold *as strings*
  (``answer == gold``; BU ``answer == "".join(gold)``; PSS ``"2->3->1->4"`` exactly; FSA
  ``answer.split(",")`` into two floats, else IoU 0). Strict mode does the same on the agent's
  response (its choice when it gave one, else its words), after trimming surrounding whitespace and
  reading the inside of an ``<answer></answer>`` tag (the scripts' "extractable" prompt variant):
  ``"B"`` is B; ``"B."``, ``"(B)"``, ``"The answer is B"`` choose nothing (unparsed); BU's ``"CA"``
  is wrong where the gold is ``["A", "C"]``. ``--parse lenient`` reads replies with
  :mod:`~vidscope.evaluation.answers`' rules and compares letter sets and orders.
* Options that name videos (MVX-Bench "Video A" …, mapped to the candidates by its loader): an
  answer that names no letter but names one option's video (its id, file name, stem, "video 2")
  chose that option (:func:`video_choice`).
* Retrieval: R@1/5/10 with the item's video as gold (:func:`~vidscope.evaluation.metrics.recall_at_k`),
  MdR and MnR (:func:`~vidscope.evaluation.metrics.rank_scores`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vidscope.evaluation.answers import extract_choice
from vidscope.evaluation.items import LETTERS, BenchmarkItem, Interval
from vidscope.evaluation.metrics import (
    grounding_scores,
    interval_of,
    letter_set,
    order_match,
    order_of,
    rank_scores,
    recall_at_k,
    set_match,
    temporal_iou,
)

#: ``item.extra`` key of an item's scoring rule (written by the multi-video loader).
RULE = "rule"
#: ``item.extra`` keys of the parse mode (``"strict"``/``"lenient"``) and of a multi-select gold as
#: the release's script joins it (written by the CrossVid loader).
PARSE = "parse"
GOLD_TEXT = "gold_text"

_ANSWER_TAG = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.DOTALL)


def is_strict(item: BenchmarkItem) -> bool:
    """Whether ``item``'s replies are read as strictly as its release's scripts read them."""
    return item.extra.get(PARSE) == "strict"


def strict_reading(said: str | None) -> str | None:
    """A reply as the release's scripts compare it: the inside of its first ``<answer>`` tag when it
    has one (``utils/extract.py``), else the whole reply; trimmed (the scripts do not trim: a
    reply ending in a newline would be wrong there; we do not count whitespace against an agent)."""
    if said is None:
        return None
    tagged = _ANSWER_TAG.search(said)
    return (tagged.group(1) if tagged else said).strip()


def strict_choice(item: BenchmarkItem, said: str | None) -> str | None:
    """What a strict reading chose: the reply itself when it is one valid letter (a letter string,
    or the gold's own form, for a multi-select item); None (unparsed) otherwise."""
    text = strict_reading(said)
    if not text:
        return None
    valid = LETTERS[: len(item.options)]
    if item.extra.get(RULE) == "set":
        if text == item.extra.get(GOLD_TEXT) or all(c in valid for c in text):
            return text
        return None
    return text if len(text) == 1 and text in valid else None


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
    (some releases list a candidate twice, and either copy is the right answer). Strictly read
    items are right only when ``letter`` is the gold string (a multi-select's joined gold)."""
    if is_strict(item):
        gold = item.extra.get(GOLD_TEXT, item.answer) if item.extra.get(RULE) == "set" else item.answer
        return letter is not None and gold is not None and letter == gold
    if item.extra.get(RULE) == "set":
        return item.answer is not None and set_match(letter_set(letter, len(item.options)), item.answer)
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


#: ``item.extra`` key of options that name candidate videos (MVX-Bench): letter -> video name.
OPTION_VIDEOS = "option_videos"


def _video_names(name: str, position: int, store_id: str | None) -> list[str]:
    """What an answer may call a video: its benchmark name, file name and stem (a stem of three
    characters or more that is not only digits), its store id, and "video N" (its place)."""
    names = [name, Path(name).name, f"video {position}"]
    stem = Path(name).stem
    if len(stem) >= 3 and not stem.isdigit():
        names.append(stem)
    if store_id:
        names.append(store_id)
    return names


def video_choice(item: BenchmarkItem, said: str | None, store_ids: Sequence[str] = ()) -> str | None:
    """The option an answer chose by naming its video instead of its letter (MVX-Bench's "Video A"
    … options, mapped to the candidates by the loader): the letter whose video, alone, the answer
    names (``store_ids``: the store ids of the item's videos, in order, as the agent saw them)."""
    mapped: dict[str, str] = item.extra.get(OPTION_VIDEOS) or {}
    if not said or not mapped:
        return None
    found = set()
    for letter, video in mapped.items():
        position = item.video_ids.index(video) if video in item.video_ids else -1
        store_id = store_ids[position] if 0 <= position < len(store_ids) else None
        for name in _video_names(video, position + 1, store_id):
            if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", said, re.IGNORECASE):
                found.add(letter)
                break
    return found.pop() if len(found) == 1 else None


def score_choices(
    items: Iterable[BenchmarkItem],
    answers: Mapping[str, str | None],
    videos: Mapping[str, Sequence[str]] | None = None,
) -> ChoiceReport:
    """Accuracy of free-form ``answers`` (by question id) on the multiple-choice ``items``.

    Pass the items the run attempted: one with no entry in ``answers`` counts as wrong. ``videos``:
    the store ids each question's agent saw (an answer naming an option's video by its id counts
    as that option, :func:`video_choice`).
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
        if is_strict(item):
            letter = strict_choice(item, said)
        elif item.extra.get(RULE) == "set":
            letters = letter_set(said, len(item.options))
            letter = "".join(sorted(letters)) if letters else None
        else:
            letter = extract_choice(said, item.options) or video_choice(
                item, said, (videos or {}).get(item.question_id, ())
            )
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


#: A judge: (item, answer) → (covered, correct) per scoring point of the item, or None when it
#: could not judge (the item is then unscored).
Judge = Callable[[BenchmarkItem, str], tuple[list[bool], list[bool]] | None]


@dataclass
class RuleReport:
    """Scores of open questions with a rule: per question (0-1) and the mean per task."""

    per_question: dict[str, float] = field(default_factory=dict)
    by_category: dict[str, float] = field(default_factory=dict)
    #: Questions that could not be scored (a judge rule without a judge, or the judge failed).
    unscored: list[str] = field(default_factory=list)
    #: Points and weights of judged questions: (covered + correct, 2 x points), summed per task as
    #: ``score_CCQA.py`` sums them (a ratio of sums, not a mean of ratios).
    judged: dict[str, tuple[int, int]] = field(default_factory=dict)


def _strict_interval(text: str | None) -> Interval | None:
    """``FSA.py``'s reading: the reply split at its comma into exactly two numbers, else nothing."""
    parts = (text or "").split(",")
    if len(parts) != 2:
        return None
    try:
        start, end = float(parts[0]), float(parts[1])
    except ValueError:
        return None
    return (start, end) if math.isfinite(start) and math.isfinite(end) else None


def read_order(item: BenchmarkItem, said: str | None) -> tuple[int, ...] | None:
    """The order an ``order`` item's answer gives (None: none readable); strictly read, only the
    ``"2->3->1->4"`` form (digits joined by ``->``, as ``PSS.py`` asks for it)."""
    if is_strict(item):
        text = strict_reading(said) or ""
        return order_of(text) if re.fullmatch(r"\d+(?:->\d+)*", text) else None
    return order_of(said)


def read_interval(item: BenchmarkItem, said: str | None) -> Interval | None:
    """The interval an ``interval`` item's answer gives (None: none readable); strictly read, as
    ``FSA.py`` reads it: split at its comma into exactly two numbers."""
    return _strict_interval(strict_reading(said)) if is_strict(item) else interval_of(said)


def rule_score(item: BenchmarkItem, said: str | None) -> float:
    """The score of an ``order`` or ``interval`` item's answer (0 when it cannot be read). A strict
    order is right only as the gold's very string (``PSS.py``: ``answer == gold``)."""
    rule = item.extra.get(RULE)
    if rule == "order":
        order = read_order(item, said)
        if is_strict(item):
            return float(order is not None and strict_reading(said) == (item.answer or "").strip())
        gold = order_of(item.answer)
        return float(gold is not None and order_match(order, gold))
    if rule == "interval":
        predicted = read_interval(item, said)
        return 0.0 if predicted is None or not item.intervals else temporal_iou(predicted, item.intervals[0])
    raise ValueError(f"{item.question_id}: no automatic rule {rule!r}")


def score_rules(
    items: Iterable[BenchmarkItem], answers: Mapping[str, str | None], judge: Judge | None = None
) -> RuleReport:
    """Scores of the open ``items`` that have a rule; one with no answer scores 0."""
    report = RuleReport()
    sums: dict[str, list[float]] = {}
    for item in items:
        rule = item.extra.get(RULE)
        said = answers.get(item.question_id)
        if rule == "judge":
            verdict = judge(item, said or "") if judge is not None and said else None
            if said and (verdict is None or not verdict[0] or len(verdict[0]) != len(verdict[1])):
                report.unscored.append(item.question_id)
                continue
            covered, correct = verdict or ([], [])
            points = max(len(covered), len(item.extra.get("scoring_points") or []), 1)
            got, weight = sum(covered) + sum(correct), 2 * points
            report.judged[item.question_id] = (got, weight)
        elif rule in ("order", "interval"):
            got, weight = rule_score(item, said), 1  # type: ignore[assignment]
        else:
            continue
        report.per_question[item.question_id] = got / weight
        for category in item.categories or ("all",):
            tally = sums.setdefault(category, [0.0, 0.0])
            tally[0] += got
            tally[1] += weight
    report.by_category = {k: num / den for k, (num, den) in sorted(sums.items())}
    return report


def dimension_means(
    task_scores: Mapping[str, float], dimension_of: Mapping[str, str]
) -> dict[str, dict[str, float]]:
    """Each dimension's tasks with their scores (``task_scores`` by task; ``dimension_of``: each
    task's dimension; a task without one is in no dimension), dimensions sorted by name.

    CrossVid's README: "C.Avg: Average accuracy on Comparative Analysis tasks (BU, NC, CC, PEA)",
    "O.Avg: Overall average accuracy across all ten tasks". The averages are over tasks, not over
    questions: the leaderboard's O.Avg is the ten tasks' mean (Gemini-2.5-Pro: (4 x 54.7 + 3 x
    56.0 + 2 x 28.7 + 59.8) / 10 = 50.4, its O.Avg; the mean of the four dimensions would be 49.8).
    """
    out: dict[str, dict[str, float]] = {}
    for task, score in sorted(task_scores.items()):
        if task in dimension_of:
            out.setdefault(dimension_of[task], {})[task] = score
    return dict(sorted(out.items()))


def mean(values: Iterable[float]) -> float:
    """The mean of ``values`` (0 for none)."""
    listed = list(values)
    return sum(listed) / len(listed) if listed else 0.0


def task_coverage(
    scored: Iterable[str],
    tasks: Sequence[str],
    name_of: Callable[[str], str | None],
    why: Mapping[str, str],
) -> tuple[str, dict[str, str]]:
    """The overall score's name and the benchmark's tasks it leaves out, each with why.

    ``scored``: the tasks with a score (as the items name them); ``tasks``: every task of the
    benchmark (CrossVid's ten), named as ``name_of`` names a task; ``why``: a reason per task
    (the loader's, for a task whose questions it could not use). The name is ``"O.Avg"`` when every
    task is scored, else ``"O.Avg (8 of 10 tasks)"``: a mean over fewer tasks than the paper's is
    never silently called the paper's O.Avg."""
    listed = list(scored)
    covered = {name_of(t) or t for t in listed}
    missing = {
        task: why.get(task, "no question of this task was scored in this run")
        for task in tasks
        if task not in covered
    }
    if not missing:
        return "O.Avg", {}
    return f"O.Avg ({len(listed)} of {len(tasks)} tasks)", missing
