"""The report of an evaluation run: scores, a Markdown table, PNG plots, and two runs side by side.

Scores use :mod:`vidscope.evaluation.scoring` over the questions the run attempted: every question
with an answer, plus those that failed (no answer: a video that could not be ingested, an agent
that raised after its retries). A failure is not a wrong answer, and the report keeps them apart:
every metric is given *strict* (a failed question counts wrong, or IoU 0, or a miss, as the papers
count an unanswered question) and *over answered questions* (failures left out), side by side with
the counts, and every question ends with a status (scored, unparsed, unscored, failed, skipped;
:mod:`vidscope.evaluation.samples`, one ``samples.jsonl`` line each). Questions not attempted yet
(a ``--limit``, videos missing) are skipped and counted. Every accuracy comes with a 95 % Wilson
score interval (:mod:`vidscope.evaluation.stats`: it holds for small groups) and, per category, the
chance level. ``report.md`` embeds the plots of :mod:`vidscope.evaluation.plots` (files next to
it), lists the wrong answers with a link to each one's trace and the failed questions with their
stage and error, grouped by cause. ``summary.json`` holds every number the Markdown shows and each
scored question's outcome, so :func:`compare_markdown` pairs two runs without re-scoring them, over
the questions both answered, saying how many it left out.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from vidscope.core.errors import invalid_fields
from vidscope.evaluation.items import LETTERS, BenchmarkItem, unusable
from vidscope.evaluation.loaders import BENCHMARKS, BenchmarkSpec
from vidscope.evaluation.metrics import RANK_METRICS, temporal_iou
from vidscope.evaluation.plots import PLOT_FILES, write_plots
from vidscope.evaluation.runs import Prediction, RunSpec
from vidscope.evaluation.samples import (
    ANSWERED,
    SAMPLES_FILE,
    STATUSES,
    ItemStatus,
    Sample,
    sample,
    seconds_range,
    write_samples,
)
from vidscope.evaluation.scoring import (
    RULE,
    Judge,
    dimension_means,
    is_correct,
    is_strict,
    mean,
    read_interval,
    read_order,
    score_choices,
    score_grounding,
    score_retrieval,
    score_rules,
    task_coverage,
)
from vidscope.evaluation.stats import (
    ACCURACY_METHOD,
    PAIRED_METHOD,
    paired_proportions,
    percentile,
    wilson,
)

__all__ = [
    "PLOT_FILES",
    "REPORT_FILE",
    "SUMMARY_FILE",
    "DimensionScore",
    "GroupScore",
    "RunSummary",
    "compare_markdown",
    "read_summary",
    "report_markdown",
    "summarise",
    "write_report",
]

REPORT_FILE = "report.md"
SUMMARY_FILE = "summary.json"
#: At most this many wrong answers are listed in ``report.md`` (``summary.json`` has them all).
WRONG_ROWS = 100
#: Question and answer text in the wrong-answer table is cut to this many characters.
CELL_CHARS = 160


class GroupScore(BaseModel):
    """Correct out of total for one category, duration group or dimension (or the whole run), with
    the 95 % Wilson interval of its accuracy; the same over the group's answered questions (its
    failures left out); and the accuracy of guessing (the mean of 1/options)."""

    correct: int
    total: int = Field(description="Questions scored: answered, unparsed and failed (strict).")
    accuracy: float = Field(description="Strict: a failed question counts wrong.")
    low: float | None = None
    high: float | None = None
    answered: int | None = Field(None, description="Questions that got an answer (failures left out).")
    answered_accuracy: float | None = Field(None, description="correct / answered.")
    answered_low: float | None = None
    answered_high: float | None = None
    chance: float | None = None


class QuestionScore(BaseModel):
    """One multiple-choice question in the run's score: right or wrong, the categories it counts
    in, and whether it was answered (``scored``, ``unparsed``) or ``failed`` (and where)."""

    correct: bool
    categories: list[str] = Field(default_factory=list)
    status: str = "scored"
    stage: str | None = None


class DimensionScore(BaseModel):
    """A dimension's score averaged over its tasks, and those tasks' scores (0-1)."""

    score: float
    tasks: dict[str, float]


class WrongAnswer(BaseModel):
    """A multiple-choice question the run got wrong, as the report's table shows it."""

    question_id: str
    question: str
    gold: str
    predicted: str = Field(description="The option the answer was read as choosing, or 'none'.")
    answer: str
    citations: list[str] = Field(default_factory=list, description="'video start-end s' per citation.")
    trace: str | None = None


class RunSummary(BaseModel):
    """Every number of a run's report (``summary.json``)."""

    run: str
    benchmark: str
    agent: str
    ablations: list[str] = Field(default_factory=list)
    models: dict[str, str | None] = Field(default_factory=dict)
    questions: int = Field(description="Questions the annotation file holds (after the loader's split).")
    ready: int = Field(description="Questions whose videos were all found.")
    answered: int
    failed: list[str] = Field(default_factory=list, description="Questions with no answer (see failures).")
    failures: dict[str, str] = Field(
        default_factory=dict, description="Each failed question's stage and error ('ingest: video …')."
    )
    failure_groups: dict[str, int] = Field(
        default_factory=dict, description="Failed questions per stage and error, most first."
    )
    not_attempted: int = 0
    outcomes: dict[str, int] = Field(
        default_factory=dict,
        description="Questions per status: scored, unparsed, unscored, failed, skipped "
        "(:mod:`vidscope.evaluation.samples`).",
    )
    open_ended: int = Field(0, description="Answered open-ended questions (no automatic score).")
    rule_scores: dict[str, float] = Field(
        default_factory=dict,
        description="Open questions scored by a rule, the mean per task (CrossVid FSA: IoU, PSS: exact "
        "order, CCQA: judged points).",
    )
    rule_per_question: dict[str, float] = Field(
        default_factory=dict, description="Each rule-scored question's score (0-1; order: 1 or 0)."
    )
    task_scores: dict[str, float] = Field(
        default_factory=dict,
        description="Each task's score (accuracy, or its rule's mean), for benchmarks whose "
        "dimensions average their tasks (CrossVid).",
    )
    dimension_scores: dict[str, DimensionScore] = Field(
        default_factory=dict,
        description="Each dimension's score as CrossVid forms it: the mean of its tasks' scores, as "
        "the leaderboard's C.Avg / T.Avg / M.Avg.",
    )
    missing_tasks: dict[str, str] = Field(
        default_factory=dict,
        description="The benchmark's tasks this run scored no question of, each with why (CrossVid "
        "MSR/MOC: not modelled); the overall score's name then says how many tasks it averages, "
        "'O.Avg (8 of 10 tasks)'.",
    )
    unusable: dict[str, str] = Field(
        default_factory=dict,
        description="Questions the loader could not use (a malformed record, a task not modelled), "
        "each with its one-line reason; skipped, never asked.",
    )
    judge_model: str | None = Field(
        None, description="The model that judged free-form answers (CrossVid CCQA), as configured."
    )
    judge_note: str | None = Field(
        None, description="Why free-form answers were not judged, or a warning about the judge."
    )
    judge_unscored: list[str] = Field(
        default_factory=list,
        description="Free-form answers left unscored: no judge model (the judge role), or it failed.",
    )
    unscored: list[str] = Field(default_factory=list, description="Questions without a gold answer.")
    missing_videos: list[str] = Field(default_factory=list)
    scores: dict[str, float] = Field(
        default_factory=dict, description="Strict: over the questions attempted, a failed one counts wrong."
    )
    answered_scores: dict[str, float] = Field(
        default_factory=dict, description="The same metrics over the questions that got an answer."
    )
    accuracy_interval: tuple[float, float] | None = Field(
        None, description="The 95 % interval of the overall (strict) accuracy."
    )
    overall: GroupScore | None = Field(
        None, description="Multiple-choice accuracy, strict and over answered questions, with counts."
    )
    interval_method: str | None = Field(None, description="How the accuracies' intervals are computed.")
    ranks: dict[str, float] = Field(
        default_factory=dict, description="Retrieval: median and mean rank of the gold video (MdR, MnR)."
    )
    by_category: dict[str, GroupScore] = Field(default_factory=dict)
    by_duration_group: dict[str, GroupScore] = Field(default_factory=dict)
    by_dimension: dict[str, GroupScore] = Field(default_factory=dict)
    mean_steps: float = Field(0.0, description="Trace steps per answer (every call, nudge and refusal).")
    mean_iterations: float = Field(
        0.0,
        description="Reasoning iterations per answer as DVD's Tab. 7 counts them: model replies that "
        "called tools or answered (a multi-call reply is one; nudges and refusals are none).",
    )
    phases: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="A phased agent's (AVI) mean passes and mean seconds per phase, per answer.",
    )
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    seconds: float = 0.0
    latency_p50: float = 0.0
    latency_p95: float = 0.0
    forced: int = Field(0, description="Answers forced at a step limit (or after prose replies).")
    fallback: int = Field(
        0, description="Answers where the agent reached none and the extractive answer stood in."
    )
    not_perceived: int = Field(
        0, description="AVI answers whose citations no targeted perception call saw anything at."
    )
    skipped: dict[str, int] = Field(
        default_factory=dict, description="Runs per protocol step they skipped (AVI: retrieve, perception)."
    )
    unparsed: list[str] = Field(
        default_factory=list,
        description="Multiple-choice answers that named no option (scored wrong, counted apart).",
    )
    evidence: dict[str, int] = Field(
        default_factory=dict, description="Citations per evidence level; only perceived and retrieved verify."
    )
    per_question: dict[str, QuestionScore] = Field(
        default_factory=dict, description="Scored multiple-choice questions (what eval compare pairs)."
    )
    retrieval: dict[str, Any] = Field(
        default_factory=dict,
        description="Retrieval runs: how the queries ranked (fine stage used and wanted, thresholds "
        "and their source, mean and median |V_contro|, pool, gallery) and |V_contro| per query.",
    )
    optional_failed: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Answered questions whose videos lack an optional stage that failed at ingestion "
        "('video: stage: reason'); they were answered without it.",
    )
    wrong: list[WrongAnswer] = Field(default_factory=list)
    samples: list[Sample] = Field(
        default_factory=list, exclude=True, description="One line per question, for samples.jsonl."
    )


#: The agents' evidence levels, strongest first (``vidscope.agents.answers.EVIDENCE_LEVELS``; the
#: evaluation layer sits below the agents and only reads the names from the predictions).
EVIDENCE_ORDER = ("perceived", "retrieved", "echoed", "none")


def _group_score(members: Sequence[tuple[BenchmarkItem, bool]], failed: Collection[str]) -> GroupScore:
    """The strict and answered accuracy of ``members`` (item, right), with their Wilson intervals."""
    correct = sum(right for _, right in members)
    strict = wilson(correct, len(members))
    answered = sum(item.question_id not in failed for item, _ in members)
    over_answered = wilson(correct, answered) if answered else None
    chance = [1 / len(item.options) for item, _ in members if item.options]
    return GroupScore(
        correct=correct,
        total=len(members),
        accuracy=strict.value,
        low=strict.low,
        high=strict.high,
        answered=answered,
        answered_accuracy=over_answered.value if over_answered else None,
        answered_low=over_answered.low if over_answered else None,
        answered_high=over_answered.high if over_answered else None,
        chance=sum(chance) / len(chance) if chance else None,
    )


def _groups(
    scored: Sequence[tuple[BenchmarkItem, bool]],
    keys: Callable[[BenchmarkItem], Iterable[str]],
    failed: Collection[str],
) -> dict[str, GroupScore]:
    """Each group's score (``keys(item)``: the groups an item counts in), groups sorted by name."""
    members: dict[str, list[tuple[BenchmarkItem, bool]]] = {}
    for item, right in scored:
        for key in keys(item):
            members.setdefault(key, []).append((item, right))
    return {name: _group_score(group, failed) for name, group in sorted(members.items())}


def _clip(text: str, limit: int = CELL_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _option(item: BenchmarkItem, letter: str | None) -> str:
    if letter is None or not letter or not set(letter) <= set(LETTERS[: len(item.options)]):
        return "none"
    if len(letter) > 1:
        return letter
    return f"{letter}. {_clip(item.options[LETTERS.index(letter)], 80)}"


def _wrong(item: BenchmarkItem, letter: str | None, prediction: Prediction) -> WrongAnswer:
    names = dict(zip(prediction.video_ids, item.video_ids, strict=False))
    return WrongAnswer(
        question_id=item.question_id,
        question=_clip(item.question, 300),
        gold=_option(item, item.answer),
        predicted=_option(item, letter),
        answer=_clip(prediction.answer, 300),
        citations=[f"{names.get(v, v[:12])} {start:g}-{end:g} s" for v, start, end in prediction.citations],
        trace=prediction.trace,
    )


#: The error of a question listed as failed without one (a caller that only knew it failed).
FAILED_WITHOUT_ERROR = "failed after its retries"


def _failures(
    ready: Sequence[BenchmarkItem],
    predictions: Mapping[str, Prediction],
    failed: Iterable[str] | Mapping[str, str],
) -> dict[str, tuple[str | None, str]]:
    """``(stage, error)`` of every ``ready`` question that has no answer: a failed line in the
    predictions, or one named in ``failed`` (ids, or ids with their error) that was not answered."""
    named = failed.items() if isinstance(failed, Mapping) else ((q, None) for q in failed)
    out: dict[str, tuple[str | None, str]] = {
        q: (p.stage, p.error or FAILED_WITHOUT_ERROR) for q, p in predictions.items() if p.failed
    }
    for question, error in named:
        if question not in predictions:
            out.setdefault(question, (None, error or FAILED_WITHOUT_ERROR))
    ready_ids = {i.question_id for i in ready}
    return {q: v for q, v in sorted(out.items()) if q in ready_ids}


def failure_reason(item: BenchmarkItem, stage: str | None, error: str) -> str:
    """``stage: error`` with the item's own video named generically, so that the questions on
    every video that failed the same way fall in one group."""
    for name in item.video_ids:
        error = error.replace(f"the video {name} ", "the video ").replace(f"video {name} ", "a video ")
    return f"{stage}: {error}" if stage else error


def _answered_macro(groups: Mapping[str, GroupScore]) -> float | None:
    """The mean over categories of their accuracy over answered questions (categories with none
    answered are left out)."""
    values = [g.answered_accuracy for g in groups.values() if g.answered_accuracy is not None]
    return sum(values) / len(values) if values else None


def summarise(
    spec: RunSpec,
    items: Sequence[BenchmarkItem],
    ready: Sequence[BenchmarkItem],
    predictions: Mapping[str, Prediction],
    failed: Iterable[str] | Mapping[str, str],
    missing_videos: Sequence[str],
    judge: Judge | None = None,
) -> RunSummary:
    """Score the run's attempted questions: ``ready`` items (their videos found) with a prediction
    (answered, or failed with its stage and error) or named in ``failed`` (ids, or id -> error).

    Each metric is given strict (a failed question counts wrong, as the papers count an unanswered
    one) in ``scores``, and over the answered questions only in ``answered_scores``; every question
    of ``items`` ends with a status (``summary.outcomes``, ``summary.samples``). ``judge`` scores
    free-form answers that have scoring points (without it they stay unscored)."""
    failures = _failures(ready, predictions, failed)
    answers = {q: p for q, p in predictions.items() if not p.failed}
    attempted = [i for i in ready if i.question_id in answers or i.question_id in failures]
    summary = RunSummary(
        run=spec.name,
        benchmark=spec.benchmark,
        agent=spec.agent,
        ablations=list(spec.ablations),
        models=spec.models,
        questions=len(items),
        ready=len(ready),
        answered=sum(i.question_id in answers for i in attempted),
        failed=list(failures),
        not_attempted=len(ready) - len(attempted),
        missing_videos=list(missing_videos),
        interval_method=ACCURACY_METHOD,
    )
    summary.unusable = {i.question_id: reason for i in items if (reason := unusable(i))}
    # Strictly scored items (CrossVid) read the agent's given choice, else its words as they are
    # (a choice our lenient rules read from the words is not the reply; Prediction.reply).
    strict_ids = {i.question_id for i in ready if is_strict(i)}
    responses = {q: p.reply(q in strict_ids) for q, p in answers.items()}
    #: What the scorer read from each answer, and each scored question's score (0-1).
    parsed: dict[str, str | None] = {}
    score: dict[str, float] = {}
    choices = [i for i in attempted if i.kind == "multiple_choice"]
    if choices:
        report = score_choices(choices, responses, {q: p.video_ids for q, p in answers.items()})
        scored = [
            (i, is_correct(i, report.chosen[i.question_id]))
            for i in choices
            if i.question_id in report.chosen
        ]
        for item, right in scored:
            parsed[item.question_id] = report.chosen[item.question_id]
            score[item.question_id] = float(right)
        if scored:
            summary.overall = _group_score(scored, failures)
            summary.accuracy_interval = (summary.overall.low or 0.0, summary.overall.high or 0.0)
            summary.scores["accuracy"] = summary.overall.accuracy
            if summary.overall.answered_accuracy is not None:
                summary.answered_scores["accuracy"] = summary.overall.answered_accuracy
        summary.by_category = _groups(scored, lambda i: i.categories, failures)
        summary.by_duration_group = _groups(
            scored, lambda i: (i.duration_group,) if i.duration_group else (), failures
        )
        summary.by_dimension = _groups(scored, lambda i: (i.dimension,) if i.dimension else (), failures)
        if len(summary.by_category) > 1:
            summary.scores["M-Avg"] = report.macro
            answered_macro = _answered_macro(summary.by_category)
            if answered_macro is not None:
                summary.answered_scores["M-Avg"] = answered_macro
        summary.unscored = report.unscored
        summary.per_question = {
            i.question_id: QuestionScore(
                correct=right,
                categories=list(i.categories),
                status=_status(i.question_id, failures, score, parsed),
                stage=failures[i.question_id][0] if i.question_id in failures else None,
            )
            for i, right in scored
        }
        summary.wrong = [
            _wrong(i, report.chosen[i.question_id], answers[i.question_id])
            for i, right in scored
            if not right and i.question_id in answers
        ]
    grounding = [i for i in attempted if i.kind == "grounding" and i.intervals]
    if grounding:
        intervals = {q: p.interval for q, p in answers.items() if p.interval is not None}
        summary.scores.update(score_grounding(grounding, intervals))
        answered_grounding = [i for i in grounding if i.question_id in answers]
        if answered_grounding:
            summary.answered_scores.update(score_grounding(answered_grounding, intervals))
        for item in grounding:
            predicted = intervals.get(item.question_id)
            parsed[item.question_id] = seconds_range(predicted)
            score[item.question_id] = temporal_iou(predicted, item.intervals[0]) if predicted else 0.0
    retrieval = [i for i in attempted if i.kind == "retrieval"]
    if retrieval:
        gallery = len({v for i in ready if i.kind == "retrieval" for v in i.video_ids})
        rankings = {q: p.ranking for q, p in answers.items()}
        ranked = score_retrieval(retrieval, rankings, gallery)
        summary.ranks = {k: ranked.pop(k) for k in RANK_METRICS}
        summary.scores.update(ranked)
        answered_retrieval = [i for i in retrieval if i.question_id in answers]
        if answered_retrieval:
            again = score_retrieval(answered_retrieval, rankings, gallery)
            summary.answered_scores.update({k: v for k, v in again.items() if k not in RANK_METRICS})
        for item in retrieval:
            top = rankings.get(item.question_id) or []
            # An empty ranking is an answer ("nothing matches"), not an unreadable one.
            parsed[item.question_id] = top[0] if top else "(nothing ranked)"
            score[item.question_id] = float(bool(top) and top[0] in item.video_ids)
    ruled = [i for i in attempted if i.kind == "open_ended" and i.extra.get(RULE)]
    if ruled:
        rules = score_rules(ruled, responses, judge)
        summary.rule_scores = rules.by_category
        summary.rule_per_question = rules.per_question
        summary.judge_unscored = rules.unscored
        for item in ruled:
            q = item.question_id
            if q in rules.per_question:
                score[q] = rules.per_question[q]
            parsed[q] = _rule_read(item, responses.get(q), rules.judged.get(q))
    spec_of = BENCHMARKS.get(spec.benchmark)
    if spec_of is not None and spec_of.dimension_average == "tasks":
        _task_averages(summary, attempted, spec_of, items)
    summary.open_ended = sum(
        i.kind == "open_ended" and not i.extra.get(RULE) and i.question_id in answers for i in attempted
    )
    summary.samples = _samples(items, ready, predictions, failures, missing_videos, parsed, score)
    summary.outcomes = {status: 0 for status in STATUSES}
    for line in summary.samples:
        summary.outcomes[line.status] += 1
    summary.unparsed = [
        s.question_id for s in summary.samples if s.status == "unparsed" and s.kind == "multiple_choice"
    ]
    by_id = {i.question_id: i for i in ready}
    summary.failures = {q: f"{stage}: {error}" if stage else error for q, (stage, error) in failures.items()}
    reasons = Counter(failure_reason(by_id[q], stage, error) for q, (stage, error) in failures.items())
    summary.failure_groups = dict(reasons.most_common())
    done = [answers[i.question_id] for i in attempted if i.question_id in answers]
    if done:
        summary.mean_steps = sum(p.steps for p in done) / len(done)
        summary.mean_iterations = sum(p.iterations for p in done) / len(done)
        for phase in sorted({name for p in done for name in p.phase_passes}):
            summary.phases[phase] = {
                "passes": round(sum(p.phase_passes.get(phase, 0) for p in done) / len(done), 3),
                "seconds": round(sum(p.phase_seconds.get(phase, 0.0) for p in done) / len(done), 3),
            }
        summary.input_tokens = sum(p.input_tokens for p in done)
        summary.output_tokens = sum(p.output_tokens for p in done)
        costs = [p.cost_usd for p in done if p.cost_usd is not None]
        summary.cost_usd = sum(costs) if costs else None
        summary.seconds = sum(p.seconds for p in done)
        summary.latency_p50 = percentile([p.seconds for p in done], 50)
        summary.latency_p95 = percentile([p.seconds for p in done], 95)
        summary.forced = sum(p.forced for p in done)
        summary.fallback = sum(p.fallback for p in done)
        summary.not_perceived = sum(p.perceived is False for p in done)
        summary.skipped = dict(Counter(step for p in done for step in p.skipped))
        summary.optional_failed = {p.question_id: p.optional_failed for p in done if p.optional_failed}
        summary.retrieval = retrieval_provenance([p for p in done if p.retrieval is not None])
        for level in EVIDENCE_ORDER:
            count = sum(p.evidence.get(level, 0) for p in done)
            if count:
                summary.evidence[level] = count
    return summary


def _rule_read(item: BenchmarkItem, said: str | None, judged: tuple[int, int] | None) -> str | None:
    """What an open question's rule read from its answer: an order, an interval, judged points."""
    rule = item.extra.get(RULE)
    if rule == "order":
        order = read_order(item, said)
        return "->".join(str(n) for n in order) if order else None
    if rule == "interval":
        return seconds_range(read_interval(item, said))
    if rule == "judge" and judged is not None:
        return f"{judged[0]} of {judged[1]} points"
    return None


def _status(
    question: str,
    failures: Mapping[str, tuple[str | None, str]],
    score: Mapping[str, float],
    parsed: Mapping[str, str | None],
) -> ItemStatus:
    """How an attempted question ended: failed, unscored (nothing to score it against), unparsed
    (nothing read from its answer) or scored."""
    if question in failures:
        return "failed"
    if question not in score:
        return "unscored"
    return "unparsed" if parsed.get(question) is None else "scored"


def _samples(
    items: Sequence[BenchmarkItem],
    ready: Sequence[BenchmarkItem],
    predictions: Mapping[str, Prediction],
    failures: Mapping[str, tuple[str | None, str]],
    missing_videos: Sequence[str],
    parsed: Mapping[str, str | None],
    score: Mapping[str, float],
) -> list[Sample]:
    """Every question of ``items`` as its ``samples.jsonl`` line, in the annotation file's order."""
    ready_ids = {i.question_id for i in ready}
    missing = set(missing_videos)
    out: list[Sample] = []
    for item in items:
        q = item.question_id
        prediction = predictions.get(q)
        if reason := unusable(item):
            out.append(sample(item, None, "skipped", error=reason))
        elif q not in ready_ids:
            absent = next((v for v in item.video_ids if v in missing), item.video_id)
            out.append(sample(item, None, "skipped", error=f"video {absent} not found under the root"))
        elif q in failures:
            stage, error = failures[q]
            out.append(sample(item, prediction, "failed", score=score.get(q), stage=stage, error=error))
        elif prediction is None:
            out.append(sample(item, None, "skipped", error="not asked yet (--limit)"))
        else:
            status = _status(q, failures, score, parsed)
            out.append(sample(item, prediction, status, parsed=parsed.get(q), score=score.get(q)))
    return out


def _task_averages(
    summary: RunSummary,
    attempted: Sequence[BenchmarkItem],
    spec: BenchmarkSpec,
    items: Sequence[BenchmarkItem],
) -> None:
    """Task, dimension and overall scores averaged over tasks, as CrossVid's leaderboard forms
    them (README, "Metrics Description"; :func:`~vidscope.evaluation.scoring.dimension_means`):
    a task's score is its accuracy or its rule's mean, a dimension's the mean of its tasks', and
    ``O.Avg`` the mean over every task scored (all ten in the paper)."""
    tasks = {name: group.accuracy for name, group in summary.by_category.items()}
    tasks.update(summary.rule_scores)
    if not tasks:
        return
    dimension_of = {c: i.dimension for i in attempted if i.dimension for c in i.categories}
    summary.task_scores = dict(sorted(tasks.items()))
    summary.dimension_scores = {
        dimension: DimensionScore(score=mean(scores.values()), tasks=scores)
        for dimension, scores in dimension_means(tasks, dimension_of).items()
    }
    why = {spec.task_name(c) or c: r for i in items if (r := unusable(i)) for c in i.categories}
    label, summary.missing_tasks = task_coverage(tasks, spec.tasks, spec.task_name, why)
    summary.scores[label] = mean(tasks.values())
    # Over answered questions: a multiple-choice task's answered accuracy; a rule's task as it is
    # when none of its questions failed (its figure is then over answered questions already). A
    # task with no such figure leaves the answered overall score out rather than averaging fewer.
    failed = set(summary.failed)
    answered = {
        n: g.answered_accuracy for n, g in summary.by_category.items() if g.answered_accuracy is not None
    }
    for task, value in summary.rule_scores.items():
        if not any(task in i.categories and i.question_id in failed for i in attempted):
            answered[task] = value
    if answered.keys() == tasks.keys():
        summary.answered_scores[label] = mean(answered.values())


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


#: Characters Markdown (and the HTML it may contain) would read as markup.
_MARKUP = re.compile(r"([\\`*_\[\]|~])")


def cell(text: str) -> str:
    """``text`` (from a benchmark file, a video or a model) as literal text in a Markdown table
    cell: one line, markup characters escaped, ``<`` and ``&`` as entities."""
    text = " ".join(str(text).split()).replace("&", "&amp;").replace("<", "&lt;")
    return _MARKUP.sub(r"\\\1", text)


def _span(low: float | None, high: float | None) -> str:
    return "—" if low is None or high is None else f"{_pct(low)}–{_pct(high)}"


def _interval(group: GroupScore) -> str:
    return _span(group.low, group.high)


def _group_table(title: str, groups: Mapping[str, GroupScore]) -> list[str]:
    if not groups:
        return []
    lines = [
        "",
        f"### {title}",
        "",
        "| group | correct | total | accuracy % | 95 % interval | answered | over answered % "
        "| 95 % interval | chance % |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for k, g in groups.items():
        answered = "—" if g.answered is None else str(g.answered)
        over = "—" if g.answered_accuracy is None else _pct(g.answered_accuracy)
        lines.append(
            f"| {cell(k)} | {g.correct} | {g.total} | {_pct(g.accuracy)} | {_interval(g)} | {answered} | "
            f"{over} | {_span(g.answered_low, g.answered_high)} | "
            f"{'—' if g.chance is None else _pct(g.chance)} |"
        )
    return lines


def _dimension_table(summary: RunSummary) -> list[str]:
    """Scores per dimension as the mean of their tasks' scores (CrossVid's C.Avg, T.Avg, ...)."""
    lines = [
        "",
        "### Score per dimension",
        "",
        f"A dimension's score is the mean of its tasks' scores, and O.Avg the mean over the "
        f"{len(summary.task_scores)} tasks scored, as CrossVid's leaderboard forms them (over its ten "
        "tasks). A task's score is its accuracy, or its rule's mean (FSA: IoU, PSS: exact order, "
        "CCQA: judged points).",
        "",
        "| dimension | score % | tasks (score %) |",
        "|---|---|---|",
    ]
    for name, dimension in summary.dimension_scores.items():
        tasks = ", ".join(f"{cell(task)} {_pct(value)}" for task, value in dimension.tasks.items())
        lines.append(f"| {cell(name)} | {_pct(dimension.score)} | {tasks} |")
    return lines


def _wrong_table(summary: RunSummary) -> list[str]:
    if not summary.wrong:
        return []
    lines = [
        "",
        f"## Wrong answers ({len(summary.wrong)})",
        "",
        "| question | gold | prediction | answer | citations | trace |",
        "|---|---|---|---|---|---|",
    ]
    for w in summary.wrong[:WRONG_ROWS]:
        trace = f"[trace]({w.trace})" if w.trace else "—"
        cited = "; ".join(cell(c) for c in w.citations[:4]) or "—"
        lines.append(
            f"| {cell(w.question_id)}: {cell(_clip(w.question))} | {cell(w.gold)} | {cell(w.predicted)} | "
            f"{cell(_clip(w.answer))} | {cited} | {trace} |"
        )
    if len(summary.wrong) > WRONG_ROWS:
        lines += ["", f"{len(summary.wrong) - WRONG_ROWS} more in `{SUMMARY_FILE}` (`wrong`)."]
    return lines


def report_markdown(summary: RunSummary) -> str:
    """The run's report as Markdown: counts, scores with intervals, plots, groups, cost, the wrong
    answers, missing videos. The plots are linked by file name (they sit next to ``report.md``)."""
    cost = "unknown (no prices configured)" if summary.cost_usd is None else f"${summary.cost_usd:.4f}"
    title = f"# {cell(summary.benchmark)} · {cell(summary.agent)} · run {cell(summary.run)}"
    lines = [title, ""]
    if summary.ablations:
        lines += [f"Ablations: {', '.join(cell(a) for a in summary.ablations)}.", ""]
    lines += [
        f"Questions {summary.questions}, videos found for {summary.ready}, answered {summary.answered}, "
        f"failed {len(summary.failed)}, not attempted yet {summary.not_attempted}.",
        "",
        _outcome_line(summary),
        "",
        "| metric | strict % | 95 % interval | over answered % | 95 % interval |",
        "|---|---|---|---|---|",
    ]
    overall = summary.overall
    for name, value in summary.scores.items():
        strict = answered = "—"
        if name == "accuracy" and overall is not None:
            strict = _interval(overall)
            answered = _span(overall.answered_low, overall.answered_high)
        over = summary.answered_scores.get(name)
        over_text = "—" if over is None else _pct(over)
        lines.append(f"| {cell(name)} | {_pct(value)} | {strict} | {over_text} | {answered} |")
    if overall is not None:
        lines += [
            "",
            f"Strict figures count a failed question wrong (accuracy: {overall.correct} right of "
            f"{overall.total}); figures over answered questions leave failures out ({overall.correct} "
            f"of {overall.answered}). An answer naming no option counts wrong in both.",
        ]
    lines += [
        "",
        f"Intervals: {ACCURACY_METHOD} (95 %) for every accuracy; it holds for small groups (3 right "
        "of 3 is 43.9–100.0, not 100.0–100.0). Other metrics are given without an interval.",
        "",
        f"Every question's record (question, options, gold, response, the choice read, score, status, "
        f"error, trace): `{SAMPLES_FILE}`.",
        "",
        f"![accuracy per category]({PLOT_FILES[0]})",
        "",
        f"![latency per question]({PLOT_FILES[1]})",
        "",
        f"![steps, tokens and cost per question]({PLOT_FILES[2]})",
    ]
    if summary.ranks:
        lines += [
            "",
            "Rank of the gold video (1 is best): "
            + ", ".join(f"{k} {v:g}" for k, v in summary.ranks.items()),
        ]
    lines += _group_table("Accuracy per category", summary.by_category)
    lines += _group_table("Accuracy per duration group", summary.by_duration_group)
    if summary.dimension_scores:
        lines += _dimension_table(summary)
    else:
        lines += _group_table("Accuracy per dimension", summary.by_dimension)
    lines += [
        "",
        f"Mean reasoning iterations {summary.mean_iterations:.2f} (model replies that called tools or "
        f"answered, as DVD's Tab. 7 counts them); mean steps {summary.mean_steps:.2f} (every call, "
        f"nudge and refusal); tokens {summary.input_tokens} in / "
        f"{summary.output_tokens} out; cost {cost}; {summary.seconds:.1f} s answering "
        f"(per question p50 {summary.latency_p50:.2f} s, p95 {summary.latency_p95:.2f} s).",
    ]
    if summary.phases:
        per_phase = ", ".join(
            f"{cell(name)} {v['passes']:g} passes, {v['seconds']:.2f} s" for name, v in summary.phases.items()
        )
        lines.append(f"Per phase, mean per answer: {per_phase}.")
    if summary.forced:
        lines.append(f"{summary.forced} answers were forced (step limit or prose replies).")
    if summary.fallback:
        lines.append(
            f"{summary.fallback} answers are the extractive answer standing in: the agent reached "
            "no answer in words."
        )
    if summary.skipped:
        steps = ", ".join(f"{step} {n}" for step, n in sorted(summary.skipped.items()))
        lines.append(f"Runs that skipped a step of their paper's protocol: {steps}.")
    if summary.not_perceived:
        lines.append(
            f"{summary.not_perceived} AVI answers were not perceived (no targeted look saw anything "
            "where they point): their citations verify nothing."
        )
    if summary.unparsed:
        lines.append(
            f"{len(summary.unparsed)} answers named no option the extraction rules could read "
            "(scored wrong): " + ", ".join(summary.unparsed[:20])
        )
    if summary.evidence:
        levels = ", ".join(f"{level} {n}" for level, n in summary.evidence.items())
        lines.append(f"Citations by evidence level: {levels} (only perceived and retrieved verify).")
    if summary.rule_scores:
        scored = ", ".join(f"{cell(task)} {100 * value:.1f}" for task, value in summary.rule_scores.items())
        lines.append(
            f"Open questions scored by their rule (x100; interval: mean IoU, order: exact): {scored}."
        )
    lines += _coverage_lines(summary)
    if summary.judge_unscored:
        lines.append(
            f"{len(summary.judge_unscored)} free-form answers are not scored: they need an LLM judge "
            "(the judge role) and none may judge this run or it gave no usable verdict."
        )
    if summary.open_ended:
        lines.append(f"{summary.open_ended} open-ended answers are in the predictions, not scored.")
    if summary.unscored:
        lines.append(f"{len(summary.unscored)} questions have no gold answer and are not scored.")
    lines += _wrong_table(summary)
    lines += _failed_lines(summary)
    lines += _optional_lines(summary)
    lines += _retrieval_lines(summary)
    if summary.missing_videos:
        shown = ", ".join(cell(v) for v in summary.missing_videos[:50])
        more = len(summary.missing_videos) - 50
        lines += ["", f"**Missing videos** ({len(summary.missing_videos)}): {shown}"]
        if more > 0:
            lines[-1] += f" and {more} more"
    return "\n".join(lines) + "\n"


#: Unusable questions listed one by one in the report (all of them in summary.json).
UNUSABLE_ROWS = 50


def _coverage_lines(summary: RunSummary) -> list[str]:
    """Who judged, the tasks the overall score leaves out, and the questions never asked because
    the loader could not use them (one line each)."""
    lines: list[str] = []
    if summary.judge_model:
        lines.append(f"Free-form answers judged by {cell(summary.judge_model)}.")
    if summary.judge_note:
        lines.append(f"**Judge:** {cell(summary.judge_note)}")
    if summary.missing_tasks:
        lines += ["", f"**Missing tasks** ({len(summary.missing_tasks)}; not in the overall score):", ""]
        lines += [f"- {cell(task)}: {cell(why)}" for task, why in summary.missing_tasks.items()]
    if summary.unusable:
        lines += ["", f"**Not asked** ({len(summary.unusable)} questions the loader could not use):", ""]
        shown = list(summary.unusable.items())[:UNUSABLE_ROWS]
        lines += [f"- {cell(q)}: {cell(reason)}" for q, reason in shown]
        if len(summary.unusable) > UNUSABLE_ROWS:
            lines.append(f"- and {len(summary.unusable) - UNUSABLE_ROWS} more (summary.json: unusable)")
    return lines


def _outcome_line(summary: RunSummary) -> str:
    """How every question ended, in one line."""
    counts = summary.outcomes
    if not counts:
        return ""
    return (
        f"Outcomes: scored {counts.get('scored', 0)}, unparsed {counts.get('unparsed', 0)} (answered, "
        f"nothing read), unscored {counts.get('unscored', 0)} (nothing to score against), failed "
        f"{counts.get('failed', 0)}, skipped {counts.get('skipped', 0)} (video missing or not asked yet)."
    )


#: At most this many failed questions are named in ``report.md`` (``summary.json`` has them all).
FAILED_ROWS = 50


def retrieval_provenance(predictions: Sequence[Prediction]) -> dict[str, Any]:
    """How a retrieval run's queries ranked, over its answered ``predictions``: the fine stages
    used (and wanted, when another was used), the thresholds and their sources, |V_contro| (the
    candidates surviving the veto, MAVIS Tab. 2 and 4) per query with its mean and median."""
    records = {p.question_id: p.retrieval or {} for p in predictions}
    if not records:
        return {}
    contro = {q: int(r.get("v_contro") or 0) for q, r in records.items()}
    values = sorted(contro.values())
    middle = len(values) // 2
    median = values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2
    thresholds = Counter(
        f"tau_soft {r.get('tau_soft')} / tau_hard {r.get('tau_hard')} ({r.get('thresholds')})"
        for r in records.values()
    )
    return {
        "queries": len(records),
        "rerank": dict(Counter(str(r.get("rerank")) for r in records.values())),
        "rerank_wanted": dict(
            Counter(str(r["rerank_wanted"]) for r in records.values() if r.get("rerank_wanted"))
        ),
        "thresholds": dict(thresholds),
        "warnings": sorted({str(r["warning"]) for r in records.values() if r.get("warning")}),
        "v_contro_mean": round(sum(values) / len(values), 2),
        "v_contro_median": median,
        "pool_mean": round(sum(int(r.get("pool") or 0) for r in records.values()) / len(records), 2),
        "gallery": max((int(r.get("gallery") or 0) for r in records.values()), default=0) or None,
        "v_contro": contro,
    }


def _retrieval_lines(summary: RunSummary) -> list[str]:
    """The retrieval provenance of the run: one line each, then |V_contro| per query."""
    r = summary.retrieval
    if not r:
        return []
    used = ", ".join(f"{cell(k)} {n}" for k, n in r["rerank"].items())
    lines = [
        "",
        "## How the queries were ranked",
        "",
        f"- Fine stage used: {used} (of {r['queries']} queries).",
    ]
    if r["rerank_wanted"]:
        wanted = ", ".join(f"{cell(k)} {n}" for k, n in r["rerank_wanted"].items())
        lines.append(f"- **Configured but not used** (fell back): {wanted}.")
    lines.append(f"- Thresholds: {'; '.join(f'{cell(k)} × {n}' for k, n in r['thresholds'].items())}.")
    lines += [f"- **Warning:** {cell(w)}" for w in r["warnings"]]
    gallery = f" over a gallery of {r['gallery']} videos" if r.get("gallery") else ""
    lines += [
        f"- |V_contro| (candidates surviving the veto, MAVIS Tab. 2/4): mean {r['v_contro_mean']:g}, "
        f"median {r['v_contro_median']:g}; pool mean {r['pool_mean']:g}{gallery}.",
        "",
        "| query | \\|V_contro\\| |",
        "|---|---|",
    ]
    rows = list(r["v_contro"].items())
    lines += [f"| {cell(q)} | {n} |" for q, n in rows[:FAILED_ROWS]]
    if len(rows) > FAILED_ROWS:
        lines += ["", f"{len(rows) - FAILED_ROWS} more in `{SUMMARY_FILE}` (`retrieval.v_contro`)."]
    return lines


def _optional_lines(summary: RunSummary) -> list[str]:
    """The answered questions whose videos lack a failed optional stage, grouped by what failed."""
    if not summary.optional_failed:
        return []
    groups = Counter(reason for reasons in summary.optional_failed.values() for reason in reasons)
    lines = [
        "",
        f"## Answered without an optional stage ({len(summary.optional_failed)} questions)",
        "",
        "An optional ingestion stage failed on their videos; they were answered without its rows "
        "(the tools that read them said so). By stage:",
        "",
    ]
    lines += [f"- {n} × {cell(reason)}" for reason, n in groups.most_common()]
    return lines


def _failed_lines(summary: RunSummary) -> list[str]:
    if not summary.failed:
        return []
    attempted = len(summary.failed) + summary.answered
    groups = "; ".join(f"{n} × {cell(reason)}" for reason, n in summary.failure_groups.items())
    lines = [
        "",
        f"## Failed ({len(summary.failed)} of {attempted} attempted)",
        "",
        "No answer came back: counted wrong in the strict figures, left out of those over answered "
        f"questions. By cause: {groups}.",
        "",
    ]
    for question in summary.failed[:FAILED_ROWS]:
        lines.append(f"- {cell(question)}: {cell(summary.failures.get(question, ''))}")
    if len(summary.failed) > FAILED_ROWS:
        lines += ["", f"{len(summary.failed) - FAILED_ROWS} more in `{SUMMARY_FILE}` (`failures`)."]
    return lines


def write_report(run_dir: Path, summary: RunSummary, predictions: Sequence[Prediction]) -> list[Path]:
    """Write ``summary.json``, ``report.md``, the plots and (when the summary has them, as
    :func:`summarise` gives them) ``samples.jsonl`` into ``run_dir``; returns the files."""
    run_dir = Path(run_dir)
    plots = write_plots(run_dir, summary, [p for p in predictions if not p.failed])
    (run_dir / SUMMARY_FILE).write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (run_dir / REPORT_FILE).write_text(report_markdown(summary), encoding="utf-8")
    samples = [write_samples(run_dir, summary.samples)] if summary.samples else []
    return [run_dir / SUMMARY_FILE, run_dir / REPORT_FILE, *samples, *plots]


def read_summary(run_dir: Path) -> RunSummary:
    """The ``summary.json`` of a finished run."""
    path = Path(run_dir) / SUMMARY_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir} has no {SUMMARY_FILE}; is it an evaluation run?")
    # Whatever is wrong with the file, the one line names it (JSON's and pydantic's own messages
    # name neither the file nor, for pydantic, anything on their first line).
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ValueError(f"{path} is not the JSON of a run summary ({reason})") from exc
    try:
        return RunSummary.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"{path} is not a run summary vidscope reads ({invalid_fields(exc, 2)})") from exc


def _paired(a: RunSummary, b: RunSummary, ids: Sequence[str]) -> str:
    """``| n | A % | B % | B − A | interval |`` cells over the questions ``ids`` both runs answered."""
    if not ids:
        return "| 0 | — | — | — | — |"
    xs = [a.per_question[q].correct for q in ids]
    ys = [b.per_question[q].correct for q in ids]
    diff = paired_proportions(xs, ys)
    return (
        f"| {len(ids)} | {_pct(sum(xs) / len(xs))} | {_pct(sum(ys) / len(ys))} | "
        f"{100 * diff.value:+.1f} | {100 * diff.low:+.1f} to {100 * diff.high:+.1f} |"
    )


def _label(summary: RunSummary) -> str:
    ablations = f" ({', '.join(summary.ablations)})" if summary.ablations else ""
    return cell(f"{summary.run}: {summary.agent}{ablations}")


def _answered_ids(summary: RunSummary) -> set[str]:
    """The multiple-choice questions the run answered (failed ones left out; a summary written
    before statuses were recorded names its failures in ``failed``)."""
    failed = set(summary.failed)
    return {q for q, s in summary.per_question.items() if s.status in ANSWERED and q not in failed}


class LeftOut(BaseModel):
    """The questions a comparison of two runs leaves out, and why."""

    failed_in_a: list[str] = Field(default_factory=list)
    failed_in_b: list[str] = Field(default_factory=list)
    failed_in_both: list[str] = Field(default_factory=list)
    one_run_only: list[str] = Field(
        default_factory=list, description="Scored by one run and not attempted (or not held) by the other."
    )
    stages_a: dict[str, int] = Field(default_factory=dict, description="A's failures per stage.")
    stages_b: dict[str, int] = Field(default_factory=dict)

    @property
    def total(self) -> int:
        """Questions left out."""
        return (
            len(self.failed_in_a) + len(self.failed_in_b) + len(self.failed_in_both) + len(self.one_run_only)
        )


def _stages(summary: RunSummary, ids: Iterable[str]) -> dict[str, int]:
    counts = Counter(
        (summary.per_question[q].stage if q in summary.per_question else None) or "unknown stage" for q in ids
    )
    return dict(counts.most_common())


def left_out(a: RunSummary, b: RunSummary) -> LeftOut:
    """Which of the two runs' scored questions a comparison leaves out: every question one of them
    did not answer (failed in A, in B, in both), or only one of them scored."""
    answered_a, answered_b = _answered_ids(a), _answered_ids(b)
    out = LeftOut()
    for q in sorted(set(a.per_question) | set(b.per_question)):
        in_a, in_b = q in a.per_question, q in b.per_question
        ok_a, ok_b = q in answered_a, q in answered_b
        if ok_a and ok_b:
            continue
        if not (in_a and in_b):
            out.one_run_only.append(q)
        elif not ok_a and not ok_b:
            out.failed_in_both.append(q)
        elif not ok_a:
            out.failed_in_a.append(q)
        else:
            out.failed_in_b.append(q)
    out.stages_a = _stages(a, out.failed_in_a + out.failed_in_both)
    out.stages_b = _stages(b, out.failed_in_b + out.failed_in_both)
    return out


def left_out_line(a: RunSummary, b: RunSummary) -> str | None:
    """One line saying how many questions a comparison leaves out and why (None: none)."""
    gone = left_out(a, b)
    if not gone.total:
        return None

    def why(stages: Mapping[str, int]) -> str:
        return f" ({', '.join(f'{stage} {n}' for stage, n in stages.items())})" if stages else ""

    return (
        f"left out {gone.total} questions not answered by both runs: failed in A "
        f"{len(gone.failed_in_a)}, failed in B {len(gone.failed_in_b)}, failed in both "
        f"{len(gone.failed_in_both)}; A's failures by stage{why(gone.stages_a) or ' (none)'}, B's"
        f"{why(gone.stages_b) or ' (none)'}; scored by only one run {len(gone.one_run_only)}"
    )


def compare_markdown(a: RunSummary, b: RunSummary) -> str:
    """Two runs side by side as Markdown: accuracy over the questions both answered, overall and
    per category, each with B − A in points and its 95 % interval for paired proportions; first,
    loudly, how many questions were left out and why (failed in A, in B, scored by one run only);
    then each run's usage. Raises ``ValueError`` (one line) when no question was answered by both."""
    for run in (a, b):
        if not run.per_question:
            raise ValueError(
                f"run {run.run} has no per-question scores (no multiple-choice questions scored, or "
                "a report from before they were recorded: run its eval command again)"
            )
    answered_b = _answered_ids(b)
    shared = [q for q in a.per_question if q in _answered_ids(a) and q in answered_b]
    gone = left_out_line(a, b)
    if not shared:
        raise ValueError(
            f"runs {a.run} and {b.run} share no scored question that both answered ({a.benchmark}: "
            f"{len(a.per_question)} scored, {len(_answered_ids(a))} answered; {b.benchmark}: "
            f"{len(b.per_question)} scored, {len(answered_b)} answered)"
        )
    categories = sorted({c for q in shared for c in a.per_question[q].categories})
    lines = [f"# {cell(a.benchmark)}: A = {_label(a)} · B = {_label(b)}", ""]
    if gone:
        lines += [f"**Warning: {cell(gone)}.** The figures below leave them out.", ""]
    lines += [
        f"Questions both runs answered: {len(shared)} (A scored {len(a.per_question)}, "
        f"B {len(b.per_question)}). B − A in points, with a 95 % interval: {PAIRED_METHOD}, over the "
        "questions both answered (it holds for small groups).",
        "",
        "| category | n | A % | B % | B − A | 95 % interval |",
        "|---|---|---|---|---|---|",
        "| **all** " + _paired(a, b, shared),
    ]
    for category in categories:
        ids = [q for q in shared if category in a.per_question[q].categories]
        lines.append(f"| {cell(category)} " + _paired(a, b, ids))
    if a.benchmark != b.benchmark:
        lines += ["", f"The runs are on different benchmarks ({cell(a.benchmark)}, {cell(b.benchmark)})."]

    def cost(s: RunSummary) -> str:
        return "—" if s.cost_usd is None else f"{s.cost_usd / max(1, s.answered):.4f}"

    lines += [
        "",
        "| per answered question | A | B |",
        "|---|---|---|",
        f"| answered | {a.answered} | {b.answered} |",
        f"| mean steps | {a.mean_steps:.2f} | {b.mean_steps:.2f} |",
        f"| tokens in | {a.input_tokens / max(1, a.answered):.0f} | "
        f"{b.input_tokens / max(1, b.answered):.0f} |",
        f"| tokens out | {a.output_tokens / max(1, a.answered):.0f} | "
        f"{b.output_tokens / max(1, b.answered):.0f} |",
        f"| cost USD | {cost(a)} | {cost(b)} |",
        f"| seconds p50 / p95 | {a.latency_p50:.2f} / {a.latency_p95:.2f} | "
        f"{b.latency_p50:.2f} / {b.latency_p95:.2f} |",
    ]
    return "\n".join(lines) + "\n"


def summary_dict(summary: RunSummary) -> dict[str, Any]:
    """The summary as plain JSON-ready data (for ``--json`` and the Prefect table artifact)."""
    return summary.model_dump()
