"""The report of an evaluation run: scores, a Markdown table, PNG plots, and two runs side by side.

Scores use :mod:`vidscope.evaluation.scoring` over the questions the run attempted: every question
with a prediction, plus those that failed after their retries (scored wrong, or IoU 0, or a miss,
as the papers count an unanswered question). Questions not attempted yet (a ``--limit``, videos
missing) are left out and counted. ``summary.json`` holds every number the Markdown shows, so
:func:`compare_runs` reads two runs without re-scoring them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from vidscope.evaluation.items import BenchmarkItem
from vidscope.evaluation.metrics import RANK_METRICS
from vidscope.evaluation.runs import Prediction, RunSpec
from vidscope.evaluation.scoring import Accuracy, score_choices, score_grounding, score_retrieval

REPORT_FILE = "report.md"
SUMMARY_FILE = "summary.json"
#: The plots a report draws, by file name.
PLOT_FILES = ("accuracy_by_category.png", "steps_tokens.png", "cost.png")


class GroupScore(BaseModel):
    """Correct out of total for one category, duration group or dimension."""

    correct: int
    total: int
    accuracy: float


class RunSummary(BaseModel):
    """Every number of a run's report (``summary.json``)."""

    run: str
    benchmark: str
    agent: str
    models: dict[str, str | None] = Field(default_factory=dict)
    questions: int = Field(description="Questions the annotation file holds (after the loader's split).")
    ready: int = Field(description="Questions whose videos were all found.")
    answered: int
    failed: list[str] = Field(default_factory=list)
    not_attempted: int = 0
    open_ended: int = Field(0, description="Answered open-ended questions (no automatic score).")
    unscored: list[str] = Field(default_factory=list, description="Questions without a gold answer.")
    missing_videos: list[str] = Field(default_factory=list)
    scores: dict[str, float] = Field(default_factory=dict)
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
    forced: int = Field(0, description="Answers forced at a step limit (or after prose replies).")
    unparsed: list[str] = Field(
        default_factory=list,
        description="Multiple-choice answers that named no option (scored wrong, counted apart).",
    )
    evidence: dict[str, int] = Field(
        default_factory=dict, description="Citations per evidence level; only perceived and retrieved verify."
    )


#: The agents' evidence levels, strongest first (``vidscope.agents.answers.EVIDENCE_LEVELS``; the
#: evaluation layer sits below the agents and only reads the names from the predictions).
EVIDENCE_ORDER = ("perceived", "retrieved", "echoed", "none")


def _groups(groups: Mapping[str, Accuracy]) -> dict[str, GroupScore]:
    return {k: GroupScore(correct=a.correct, total=a.total, accuracy=a.value) for k, a in groups.items()}


def summarise(
    spec: RunSpec,
    items: Sequence[BenchmarkItem],
    ready: Sequence[BenchmarkItem],
    predictions: Mapping[str, Prediction],
    failed: Iterable[str],
    missing_videos: Sequence[str],
) -> RunSummary:
    """Score the run's attempted questions (``ready`` items with a prediction or a failure)."""
    failed_ids = sorted(set(failed) - set(predictions))
    attempted = [i for i in ready if i.question_id in predictions or i.question_id in failed_ids]
    summary = RunSummary(
        run=spec.name,
        benchmark=spec.benchmark,
        agent=spec.agent,
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
        summary.scores["accuracy"] = report.overall.value
        if len(report.by_category) > 1:
            summary.scores["M-Avg"] = report.macro
        summary.by_category = _groups(report.by_category)
        summary.by_duration_group = _groups(report.by_duration_group)
        summary.by_dimension = _groups(report.by_dimension)
        summary.unscored = report.unscored
        summary.unparsed = report.unparsed
    grounding = [i for i in attempted if i.kind == "grounding" and i.intervals]
    if grounding:
        intervals = {q: p.interval for q, p in predictions.items() if p.interval is not None}
        summary.scores.update(score_grounding(grounding, intervals))
    retrieval = [i for i in attempted if i.kind == "retrieval"]
    if retrieval:
        gallery = len({v for i in ready if i.kind == "retrieval" for v in i.video_ids})
        scored = score_retrieval(retrieval, {q: p.ranking for q, p in predictions.items()}, gallery)
        summary.ranks = {k: scored.pop(k) for k in RANK_METRICS}
        summary.scores.update(scored)
    summary.open_ended = sum(i.kind == "open_ended" and i.question_id in predictions for i in attempted)
    done = [predictions[i.question_id] for i in attempted if i.question_id in predictions]
    if done:
        summary.mean_steps = sum(p.steps for p in done) / len(done)
        summary.input_tokens = sum(p.input_tokens for p in done)
        summary.output_tokens = sum(p.output_tokens for p in done)
        costs = [p.cost_usd for p in done if p.cost_usd is not None]
        summary.cost_usd = sum(costs) if costs else None
        summary.seconds = sum(p.seconds for p in done)
        summary.forced = sum(p.forced for p in done)
        for level in EVIDENCE_ORDER:
            count = sum(p.evidence.get(level, 0) for p in done)
            if count:
                summary.evidence[level] = count
    return summary


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def _group_table(title: str, groups: Mapping[str, GroupScore]) -> list[str]:
    if not groups:
        return []
    lines = ["", f"### {title}", "", "| group | correct | total | accuracy % |", "|---|---|---|---|"]
    lines += [f"| {k} | {g.correct} | {g.total} | {_pct(g.accuracy)} |" for k, g in groups.items()]
    return lines


def report_markdown(summary: RunSummary) -> str:
    """The run's report as Markdown: counts, scores, groups, cost, missing videos."""
    cost = "unknown (no prices configured)" if summary.cost_usd is None else f"${summary.cost_usd:.4f}"
    lines = [
        f"# {summary.benchmark} · {summary.agent} · run {summary.run}",
        "",
        f"Questions {summary.questions}, videos found for {summary.ready}, answered {summary.answered}, "
        f"failed {len(summary.failed)}, not attempted yet {summary.not_attempted}.",
        "",
        "| metric | value % |",
        "|---|---|",
        *[f"| {name} | {_pct(value)} |" for name, value in summary.scores.items()],
    ]
    if summary.ranks:
        lines += [
            "",
            "Rank of the gold video (1 is best): "
            + ", ".join(f"{k} {v:g}" for k, v in summary.ranks.items()),
        ]
    lines += _group_table("Accuracy per category", summary.by_category)
    lines += _group_table("Accuracy per duration group", summary.by_duration_group)
    lines += _group_table("Accuracy per dimension", summary.by_dimension)
    lines += [
        "",
        f"Mean steps {summary.mean_steps:.2f}; tokens {summary.input_tokens} in / "
        f"{summary.output_tokens} out; cost {cost}; {summary.seconds:.1f} s answering.",
    ]
    if summary.forced:
        lines.append(f"{summary.forced} answers were forced (step limit or prose replies).")
    if summary.unparsed:
        lines.append(
            f"{len(summary.unparsed)} answers named no option the extraction rules could read "
            "(scored wrong): " + ", ".join(summary.unparsed[:20])
        )
    if summary.evidence:
        levels = ", ".join(f"{level} {n}" for level, n in summary.evidence.items())
        lines.append(f"Citations by evidence level: {levels} (only perceived and retrieved verify).")
    if summary.open_ended:
        lines.append(f"{summary.open_ended} open-ended answers are in the predictions, not scored.")
    if summary.unscored:
        lines.append(f"{len(summary.unscored)} questions have no gold answer and are not scored.")
    if summary.failed:
        lines += ["", "**Failed** (scored wrong): " + ", ".join(summary.failed[:50])]
    if summary.missing_videos:
        shown = ", ".join(summary.missing_videos[:50])
        more = len(summary.missing_videos) - 50
        lines += ["", f"**Missing videos** ({len(summary.missing_videos)}): {shown}"]
        if more > 0:
            lines[-1] += f" and {more} more"
    return "\n".join(lines) + "\n"


def write_report(run_dir: Path, summary: RunSummary, predictions: Sequence[Prediction]) -> list[Path]:
    """Write ``summary.json``, ``report.md`` and the plots into ``run_dir``; returns the files."""
    run_dir = Path(run_dir)
    (run_dir / SUMMARY_FILE).write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (run_dir / REPORT_FILE).write_text(report_markdown(summary), encoding="utf-8")
    return [run_dir / SUMMARY_FILE, run_dir / REPORT_FILE, *write_plots(run_dir, summary, predictions)]


def write_plots(run_dir: Path, summary: RunSummary, predictions: Sequence[Prediction]) -> list[Path]:
    """The three PNG plots: scores per category, steps and tokens per question, cost per question."""
    import matplotlib

    matplotlib.use("Agg")  # files only; never a window
    import matplotlib.pyplot as plt

    paths = [Path(run_dir) / name for name in PLOT_FILES]
    bars = {k: g.accuracy for k, g in summary.by_category.items()} or dict(summary.scores)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.6 * len(bars) + 2), 3.5))
    ax.bar(list(bars), [100 * v for v in bars.values()], color="#4c72b0")
    ax.set_ylim(0, 100)
    ax.set_ylabel("accuracy %" if summary.by_category else "score %")
    ax.set_title(f"{summary.benchmark} · {summary.agent}")
    ax.tick_params(axis="x", labelrotation=45)
    fig.tight_layout()
    fig.savefig(paths[0], dpi=100)
    plt.close(fig)

    ids = [p.question_id for p in predictions]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(4.0, 0.3 * len(ids) + 2), 5), sharex=True)
    top.bar(ids, [p.steps for p in predictions], color="#55a868")
    top.set_ylabel("steps")
    bottom.bar(ids, [p.input_tokens for p in predictions], label="input", color="#4c72b0")
    bottom.bar(
        ids,
        [p.output_tokens for p in predictions],
        bottom=[p.input_tokens for p in predictions],
        label="output",
        color="#dd8452",
    )
    bottom.set_ylabel("tokens")
    bottom.legend(loc="upper right")
    bottom.tick_params(axis="x", labelrotation=90)
    fig.tight_layout()
    fig.savefig(paths[1], dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(max(4.0, 0.3 * len(ids) + 2), 3.5))
    if any(p.cost_usd is not None for p in predictions):
        ax.bar(ids, [p.cost_usd or 0.0 for p in predictions], color="#c44e52")
        ax.set_ylabel("cost USD")
    else:
        ax.text(0.5, 0.5, "no prices configured", ha="center", va="center", transform=ax.transAxes)
    ax.set_title("cost per question")
    ax.tick_params(axis="x", labelrotation=90)
    fig.tight_layout()
    fig.savefig(paths[2], dpi=100)
    plt.close(fig)
    return paths


def read_summary(run_dir: Path) -> RunSummary:
    """The ``summary.json`` of a finished run."""
    path = Path(run_dir) / SUMMARY_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir} has no {SUMMARY_FILE}; is it an evaluation run?")
    return RunSummary.model_validate(json.loads(path.read_text(encoding="utf-8")))


def compare_rows(a: RunSummary, b: RunSummary) -> list[tuple[str, str, str, str]]:
    """``(what, run A, run B, B - A)`` rows: scores, per-category accuracy, steps, tokens, cost."""

    def row(name: str, x: float | None, y: float | None, scale: float = 1.0, fmt: str = "{:.1f}") -> tuple:
        cells = [fmt.format(scale * v) if v is not None else "—" for v in (x, y)]
        delta = fmt.format(scale * (y - x)) if x is not None and y is not None else "—"
        return (name, cells[0], cells[1], delta)

    rows = [("agent", a.agent, b.agent, ""), ("answered", str(a.answered), str(b.answered), "")]
    for name in dict.fromkeys([*a.scores, *b.scores]):
        rows.append(row(f"{name} %", a.scores.get(name), b.scores.get(name), 100))
    for group in dict.fromkeys([*a.by_category, *b.by_category]):
        x, y = a.by_category.get(group), b.by_category.get(group)
        rows.append(row(f"  {group} %", x.accuracy if x else None, y.accuracy if y else None, 100))
    rows.append(row("mean steps", a.mean_steps, b.mean_steps, fmt="{:.2f}"))
    rows.append(row("input tokens", a.input_tokens, b.input_tokens, fmt="{:.0f}"))
    rows.append(row("output tokens", a.output_tokens, b.output_tokens, fmt="{:.0f}"))
    rows.append(row("cost USD", a.cost_usd, b.cost_usd, fmt="{:.4f}"))
    return rows


def summary_dict(summary: RunSummary) -> dict[str, Any]:
    """The summary as plain JSON-ready data (for ``--json`` and the Prefect table artifact)."""
    return summary.model_dump()
