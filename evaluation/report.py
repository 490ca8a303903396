"""The report of an evaluation run: scores, a Markdown table, PNG plots, and two runs side by side.

Scores use :mod:`vidscope.evaluation.scoring` over the questions the run attempted: every question
with a prediction, plus those that failed after their retries (scored wrong, or IoU 0, or a miss,
as the papers count an unanswered question). Questions not attempted yet (a ``--limit``, videos
missing) are left out and counted. Every accuracy comes with a seeded 95 % bootstrap interval
(:mod:`vidscope.evaluation.stats`) and, per category, the chance level. ``report.md`` embeds the
plots of :mod:`vidscope.evaluation.plots` (files next to it) and lists the wrong answers with a
link to each one's trace. ``summary.json`` holds every number the Markdown shows and each scored
question's outcome, so :func:`compare_markdown` pairs two runs without re-scoring them.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from vidscope.evaluation.items import LETTERS, BenchmarkItem
from vidscope.evaluation.loaders import BENCHMARKS
from vidscope.evaluation.metrics import RANK_METRICS
from vidscope.evaluation.plots import PLOT_FILES, write_plots
from vidscope.evaluation.runs import Prediction, RunSpec
from vidscope.evaluation.scoring import (
    RULE,
    Accuracy,
    Judge,
    dimension_means,
    is_correct,
    mean,
    score_choices,
    score_grounding,
    score_retrieval,
    score_rules,
)
from vidscope.evaluation.stats import RESAMPLES, SEED, bootstrap_mean, paired_difference, percentile

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
    """Correct out of total for one category, duration group or dimension, with the 95 % bootstrap
    interval of its accuracy and the accuracy of guessing (the mean of 1/options)."""

    correct: int
    total: int
    accuracy: float
    low: float | None = None
    high: float | None = None
    chance: float | None = None


class QuestionScore(BaseModel):
    """One scored multiple-choice question: right or wrong, and the categories it counts in."""

    correct: bool
    categories: list[str] = Field(default_factory=list)


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
    failed: list[str] = Field(default_factory=list)
    not_attempted: int = 0
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
    judge_unscored: list[str] = Field(
        default_factory=list,
        description="Free-form answers left unscored: no judge model (planner), or it failed.",
    )
    unscored: list[str] = Field(default_factory=list, description="Questions without a gold answer.")
    missing_videos: list[str] = Field(default_factory=list)
    scores: dict[str, float] = Field(default_factory=dict)
    accuracy_interval: tuple[float, float] | None = Field(
        None, description="The 95 % bootstrap interval of the overall accuracy."
    )
    ranks: dict[str, float] = Field(
        default_factory=dict, description="Retrieval: median and mean rank of the gold video (MdR, MnR)."
    )
    by_category: dict[str, GroupScore] = Field(default_factory=dict)
    by_duration_group: dict[str, GroupScore] = Field(default_factory=dict)
    by_dimension: dict[str, GroupScore] = Field(default_factory=dict)
    mean_steps: float = 0.0
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
    wrong: list[WrongAnswer] = Field(default_factory=list)


#: The agents' evidence levels, strongest first (``vidscope.agents.answers.EVIDENCE_LEVELS``; the
#: evaluation layer sits below the agents and only reads the names from the predictions).
EVIDENCE_ORDER = ("perceived", "retrieved", "echoed", "none")


def _groups(
    groups: Mapping[str, Accuracy],
    scored: Sequence[tuple[BenchmarkItem, bool]],
    keys: Any,
) -> dict[str, GroupScore]:
    """Each group's score with its bootstrap interval and chance level (``keys(item)``: its groups)."""
    out: dict[str, GroupScore] = {}
    for name, acc in groups.items():
        members = [(item, right) for item, right in scored if name in keys(item)]
        interval = bootstrap_mean([float(right) for _, right in members]) if members else None
        chance = [1 / len(item.options) for item, _ in members if item.options]
        out[name] = GroupScore(
            correct=acc.correct,
            total=acc.total,
            accuracy=acc.value,
            low=interval.low if interval else None,
            high=interval.high if interval else None,
            chance=sum(chance) / len(chance) if chance else None,
        )
    return out


def _clip(text: str, limit: int = CELL_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _option(item: BenchmarkItem, letter: str | None) -> str:
    if letter is None or not letter or not set(letter) <= set(LETTERS[: len(item.options)]):
        return "none"
    if len(letter) > 1:
        return letter
    return f"{letter}. {_clip(item.options[LETTERS.index(letter)], 80)}"


def _wrong(item: BenchmarkItem, letter: str | None, prediction: Prediction | None) -> WrongAnswer:
    names = dict(zip(prediction.video_ids, item.video_ids, strict=False)) if prediction else {}
    citations = (
        [f"{names.get(video, video[:12])} {start:g}-{end:g} s" for video, start, end in prediction.citations]
        if prediction
        else []
    )
    return WrongAnswer(
        question_id=item.question_id,
        question=_clip(item.question, 300),
        gold=_option(item, item.answer),
        predicted=_option(item, letter),
        answer=_clip(prediction.answer, 300) if prediction else "(failed after its retries)",
        citations=citations,
        trace=prediction.trace if prediction else None,
    )


def summarise(
    spec: RunSpec,
    items: Sequence[BenchmarkItem],
    ready: Sequence[BenchmarkItem],
    predictions: Mapping[str, Prediction],
    failed: Iterable[str],
    missing_videos: Sequence[str],
    judge: Judge | None = None,
) -> RunSummary:
    """Score the run's attempted questions (``ready`` items with a prediction or a failure);
    ``judge`` scores free-form answers that have scoring points (without it they stay unscored)."""
    failed_ids = sorted(set(failed) - set(predictions))
    attempted = [i for i in ready if i.question_id in predictions or i.question_id in failed_ids]
    summary = RunSummary(
        run=spec.name,
        benchmark=spec.benchmark,
        agent=spec.agent,
        ablations=list(spec.ablations),
        models=spec.models,
        questions=len(items),
        ready=len(ready),
        answered=sum(i.question_id in predictions for i in attempted),
        failed=failed_ids,
        not_attempted=len(ready) - len(attempted),
        missing_videos=list(missing_videos),
    )
    choices = [i for i in attempted if i.kind == "multiple_choice"]
    if choices:
        report = score_choices(
            choices, {q: p.response for q, p in predictions.items() if p.kind == "multiple_choice"}
        )
        scored = [
            (i, is_correct(i, report.chosen[i.question_id]))
            for i in choices
            if i.question_id in report.chosen
        ]
        summary.scores["accuracy"] = report.overall.value
        if scored:
            overall = bootstrap_mean([float(right) for _, right in scored])
            summary.accuracy_interval = (overall.low, overall.high)
        if len(report.by_category) > 1:
            summary.scores["M-Avg"] = report.macro
        summary.by_category = _groups(report.by_category, scored, lambda i: i.categories)
        summary.by_duration_group = _groups(
            report.by_duration_group, scored, lambda i: (i.duration_group,) if i.duration_group else ()
        )
        summary.by_dimension = _groups(
            report.by_dimension, scored, lambda i: (i.dimension,) if i.dimension else ()
        )
        summary.unscored = report.unscored
        summary.per_question = {
            i.question_id: QuestionScore(correct=right, categories=list(i.categories)) for i, right in scored
        }
        summary.wrong = [
            _wrong(i, report.chosen[i.question_id], predictions.get(i.question_id))
            for i, right in scored
            if not right
        ]
        summary.unparsed = report.unparsed
    grounding = [i for i in attempted if i.kind == "grounding" and i.intervals]
    if grounding:
        intervals = {q: p.interval for q, p in predictions.items() if p.interval is not None}
        summary.scores.update(score_grounding(grounding, intervals))
    retrieval = [i for i in attempted if i.kind == "retrieval"]
    if retrieval:
        gallery = len({v for i in ready if i.kind == "retrieval" for v in i.video_ids})
        ranked = score_retrieval(retrieval, {q: p.ranking for q, p in predictions.items()}, gallery)
        summary.ranks = {k: ranked.pop(k) for k in RANK_METRICS}
        summary.scores.update(ranked)
    ruled = [i for i in attempted if i.kind == "open_ended" and i.extra.get(RULE)]
    if ruled:
        rules = score_rules(ruled, {q: p.response for q, p in predictions.items()}, judge)
        summary.rule_scores = rules.by_category
        summary.rule_per_question = rules.per_question
        summary.judge_unscored = rules.unscored
    spec_of = BENCHMARKS.get(spec.benchmark)
    if spec_of is not None and spec_of.dimension_average == "tasks":
        _task_averages(summary, attempted)
    summary.open_ended = sum(
        i.kind == "open_ended" and not i.extra.get(RULE) and i.question_id in predictions for i in attempted
    )
    done = [predictions[i.question_id] for i in attempted if i.question_id in predictions]
    if done:
        summary.mean_steps = sum(p.steps for p in done) / len(done)
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
        for level in EVIDENCE_ORDER:
            count = sum(p.evidence.get(level, 0) for p in done)
            if count:
                summary.evidence[level] = count
    return summary


def _task_averages(summary: RunSummary, attempted: Sequence[BenchmarkItem]) -> None:
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
    summary.scores["O.Avg"] = mean(tasks.values())


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


#: Characters Markdown (and the HTML it may contain) would read as markup.
_MARKUP = re.compile(r"([\\`*_\[\]|~])")


def cell(text: str) -> str:
    """``text`` (from a benchmark file, a video or a model) as literal text in a Markdown table
    cell: one line, markup characters escaped, ``<`` and ``&`` as entities."""
    text = " ".join(str(text).split()).replace("&", "&amp;").replace("<", "&lt;")
    return _MARKUP.sub(r"\\\1", text)


def _interval(group: GroupScore) -> str:
    if group.low is None or group.high is None:
        return "—"
    return f"{_pct(group.low)}–{_pct(group.high)}"


def _group_table(title: str, groups: Mapping[str, GroupScore]) -> list[str]:
    if not groups:
        return []
    lines = [
        "",
        f"### {title}",
        "",
        "| group | correct | total | accuracy % | 95 % interval | chance % |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {cell(k)} | {g.correct} | {g.total} | {_pct(g.accuracy)} | {_interval(g)} | "
        f"{'—' if g.chance is None else _pct(g.chance)} |"
        for k, g in groups.items()
    ]
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
        "| metric | value % | 95 % interval |",
        "|---|---|---|",
    ]
    for name, value in summary.scores.items():
        interval = "—"
        if name == "accuracy" and summary.accuracy_interval is not None:
            low, high = summary.accuracy_interval
            interval = f"{_pct(low)}–{_pct(high)}"
        lines.append(f"| {cell(name)} | {_pct(value)} | {interval} |")
    lines += [
        "",
        f"Intervals: percentile bootstrap over the scored questions ({RESAMPLES} resamples, seed {SEED}).",
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
        f"Mean steps {summary.mean_steps:.2f}; tokens {summary.input_tokens} in / "
        f"{summary.output_tokens} out; cost {cost}; {summary.seconds:.1f} s answering "
        f"(per question p50 {summary.latency_p50:.2f} s, p95 {summary.latency_p95:.2f} s).",
    ]
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
    if summary.judge_unscored:
        lines.append(
            f"{len(summary.judge_unscored)} free-form answers are not scored: they need an LLM judge "
            "(the planner role) and none was configured or it gave no usable verdict."
        )
    if summary.open_ended:
        lines.append(f"{summary.open_ended} open-ended answers are in the predictions, not scored.")
    if summary.unscored:
        lines.append(f"{len(summary.unscored)} questions have no gold answer and are not scored.")
    lines += _wrong_table(summary)
    if summary.failed:
        lines += ["", "**Failed** (scored wrong): " + ", ".join(cell(q) for q in summary.failed[:50])]
    if summary.missing_videos:
        shown = ", ".join(cell(v) for v in summary.missing_videos[:50])
        more = len(summary.missing_videos) - 50
        lines += ["", f"**Missing videos** ({len(summary.missing_videos)}): {shown}"]
        if more > 0:
            lines[-1] += f" and {more} more"
    return "\n".join(lines) + "\n"


def write_report(run_dir: Path, summary: RunSummary, predictions: Sequence[Prediction]) -> list[Path]:
    """Write ``summary.json``, ``report.md`` and the plots into ``run_dir``; returns the files."""
    run_dir = Path(run_dir)
    plots = write_plots(run_dir, summary, predictions)
    (run_dir / SUMMARY_FILE).write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (run_dir / REPORT_FILE).write_text(report_markdown(summary), encoding="utf-8")
    return [run_dir / SUMMARY_FILE, run_dir / REPORT_FILE, *plots]


def read_summary(run_dir: Path) -> RunSummary:
    """The ``summary.json`` of a finished run."""
    path = Path(run_dir) / SUMMARY_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir} has no {SUMMARY_FILE}; is it an evaluation run?")
    return RunSummary.model_validate(json.loads(path.read_text(encoding="utf-8")))


def _paired(a: RunSummary, b: RunSummary, ids: Sequence[str]) -> str:
    """``| n | A % | B % | B − A | interval |`` cells over the questions ``ids`` both runs scored."""
    if not ids:
        return "| 0 | — | — | — | — |"
    xs = [float(a.per_question[q].correct) for q in ids]
    ys = [float(b.per_question[q].correct) for q in ids]
    diff = paired_difference(xs, ys)
    return (
        f"| {len(ids)} | {_pct(sum(xs) / len(xs))} | {_pct(sum(ys) / len(ys))} | "
        f"{100 * diff.value:+.1f} | {100 * diff.low:+.1f} to {100 * diff.high:+.1f} |"
    )


def _label(summary: RunSummary) -> str:
    ablations = f" ({', '.join(summary.ablations)})" if summary.ablations else ""
    return cell(f"{summary.run}: {summary.agent}{ablations}")


def compare_markdown(a: RunSummary, b: RunSummary) -> str:
    """Two runs side by side as Markdown: accuracy over the questions both scored, overall and per
    category, each with B − A in points and its paired bootstrap 95 % interval; then each run's
    usage. Raises ``ValueError`` (one line) when the runs share no scored question."""
    for run in (a, b):
        if not run.per_question:
            raise ValueError(
                f"run {run.run} has no per-question scores (no multiple-choice questions scored, or "
                "a report from before they were recorded: run its eval command again)"
            )
    shared = [q for q in a.per_question if q in b.per_question]
    if not shared:
        raise ValueError(
            f"runs {a.run} and {b.run} share no scored question ({a.benchmark}: {len(a.per_question)}, "
            f"{b.benchmark}: {len(b.per_question)})"
        )
    categories = sorted({c for q in shared for c in a.per_question[q].categories})
    lines = [
        f"# {cell(a.benchmark)}: A = {_label(a)} · B = {_label(b)}",
        "",
        f"Questions both runs scored: {len(shared)} (A scored {len(a.per_question)}, "
        f"B {len(b.per_question)}). B − A in points, with a paired bootstrap 95 % interval "
        f"({RESAMPLES} resamples of the shared questions, seed {SEED}).",
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
