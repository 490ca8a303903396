"""``vidscope eval``: run an agent over a benchmark (resumable), or put two runs side by side.

``vidscope eval BENCHMARK --root DIR --agent dvd`` evaluates; repeating the command resumes the
same run (questions already in its ``predictions.jsonl`` are not asked again).
``vidscope eval compare RUN_A RUN_B`` compares two finished runs (run names or directories) as
Markdown over the questions both answered: accuracy per category, the difference and its paired
interval, and a warning line (also on stderr) naming how many questions it left out and why.
``--ablation avi:no-review`` (repeatable, or comma-separated) switches a part of the agent off.
A run where more than ``--max-failed`` (default 0.2) of the attempted questions failed exits 1
with one line saying how many failed and why. ``--repeats N`` runs the evaluation N times, each a
run of its own, and gives the accuracy's mean and spread; it warns when the response cache is on
(the repeats would replay the first run's replies). ``--parse lenient`` (CrossVid) reads replies with
our extraction rules instead of the release's string equality (``strict``, the default).
Free-form answers (CrossVid CCQA) are judged by ``[models] judge``; a run whose only judge would
be the answering model is refused in one line unless ``--allow-self-judge`` is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from vidscope.agents import strategies
from vidscope.cli.common import app, console, errors, quiet_prefect, safe, settings, strategy_choice

if TYPE_CHECKING:
    from vidscope.flows.evaluate import EvalOutcome, EvalProgress

COMPARE = "compare"


def _fail(message: str, code: int = 2) -> typer.Exit:
    errors.print(f"[red]{safe(message)}[/red]", soft_wrap=True)
    return typer.Exit(code)


def _option_value(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if text.isdigit():
        return int(text)
    return text


def _loader_options(split: str | None, pairs: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = {"split": split} if split else {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise _fail(f"--option takes KEY=VALUE, got {pair!r}")
        options[key.strip()] = _option_value(value.strip())
    return options


def _default_annotations(benchmark: str, root: Path) -> Path:
    """The annotation file named in the benchmark's spec, when it sits directly under the root."""
    from vidscope.evaluation.loaders import BENCHMARKS

    spec = BENCHMARKS[benchmark]
    candidate = root / spec.annotations.split()[0]
    if candidate.exists():
        return candidate
    raise _fail(f"give --annotations FILE ({benchmark} reads {spec.annotations})")


def _agent_choice(value: str | None) -> str | None:
    """``--agent``: a strategy, or ``mavis`` (retrieval benchmarks run the search pipeline)."""
    if value is not None and value.lower() == "mavis":
        return "mavis"
    return strategy_choice(None)(value)


@app.command("eval")
def evaluate_command(
    benchmark: Annotated[
        str,
        typer.Argument(help="Benchmark (lvbench, videomme, mlvu, charades_sta, msrvtt, ...) or 'compare'."),
    ],
    runs: Annotated[
        list[str] | None, typer.Argument(help="With 'compare': the two runs (names or directories).")
    ] = None,
    root: Annotated[
        Path | None, typer.Option("--root", help="Folder holding the benchmark's videos.")
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            callback=_agent_choice,
            help=f"{strategies.help_text()}; retrieval benchmarks: mavis (the search pipeline, the "
            f"default there). Default: {strategies.default('video')}.",
        ),
    ] = None,
    annotations: Annotated[
        Path | None,
        typer.Option("--annotations", help="The annotation file or folder (default: under --root)."),
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Only the first N questions.")] = None,
    split: Annotated[str | None, typer.Option("--split", help="Loader split (videomme: long, ...).")] = None,
    option: Annotated[
        list[str] | None,
        typer.Option(
            "--option",
            help="Other loader options, KEY=VALUE (repeatable); transcripts=true|false sets the protocol.",
        ),
    ] = None,
    run: Annotated[str | None, typer.Option("--run", help="Name of the run (default: derived).")] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Questions at once.")] = 2,
    retries: Annotated[int, typer.Option("--retries", min=0, help="Retries of a failing question.")] = 2,
    max_failed: Annotated[
        float,
        typer.Option(
            "--max-failed",
            min=0.0,
            max=1.0,
            help="Exit 1 when more than this share of the attempted questions failed (their video "
            "failed ingestion, the agent raised); 1 never does.",
        ),
    ] = 0.2,  # flows.evaluate.MAX_FAILED, written out: the CLI imports no flow until it runs one
    ablation: Annotated[
        list[str] | None,
        typer.Option(
            "--ablation",
            help="Switch a part of the agent off (repeatable or comma-separated): "
            + strategies.ablation_help(),
        ),
    ] = None,
    parse: Annotated[
        str | None,
        typer.Option(
            "--parse",
            help="crossvid: how replies are read: strict (default; the release's string equality, "
            "'B' is B, 'B.' chose nothing) or lenient (our extraction rules).",
        ),
    ] = None,
    allow_self_judge: Annotated[
        bool,
        typer.Option(
            "--allow-self-judge",
            help="Let the answering model judge its own free-form answers (CrossVid CCQA) when no judge "
            "model is configured; the report warns that it did.",
        ),
    ] = False,
    repeats: Annotated[
        int,
        typer.Option(
            "--repeats",
            min=1,
            help="Run the evaluation N times, each a run of its own (-r2, -r3 ...), and give the "
            "accuracy's mean and spread (DVD B.1: three runs). Warns when the response cache would "
            "make the repeats replays.",
        ),
    ] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")] = False,
) -> None:
    """Evaluate an agent on a benchmark (`eval BENCHMARK --root DIR`), or `eval compare RUN_A RUN_B`."""
    if benchmark == COMPARE:
        if not runs or len(runs) != 2:
            raise _fail("eval compare takes two runs: vidscope eval compare RUN_A RUN_B")
        _compare(*runs)
        return
    if runs:
        raise _fail(f"unexpected arguments: {' '.join(runs)}")
    if root is None:
        raise _fail("--root DIR is required: the folder holding the benchmark's videos")
    from vidscope.evaluation.loaders import BENCHMARKS

    if benchmark not in BENCHMARKS:
        raise _fail(f"unknown benchmark {benchmark!r}; known: {', '.join(sorted(BENCHMARKS))}")
    if not root.is_dir():
        raise _fail(f"--root {root} is not a folder")
    options = _loader_options(split, option or [])
    if parse is not None:
        if benchmark != "crossvid":
            raise _fail(f"--parse applies to crossvid (its release's scripts), not {benchmark}")
        options["parse"] = parse
    if allow_self_judge:
        options["allow_self_judge"] = True
    quiet_prefect()
    from vidscope.evaluation.runs import RunError
    from vidscope.flows.evaluate import prepare_run, repeats_warning

    cfg = settings()
    warning = repeats_warning(cfg, repeats)
    if warning:
        errors.print(f"[yellow]warning:[/yellow] {safe(warning)}", soft_wrap=True)
    outcomes: list[EvalOutcome] = []
    for repeat in range(1, repeats + 1):
        try:
            run_dir = prepare_run(
                cfg,
                benchmark,
                annotations or _default_annotations(benchmark, root),
                root,
                agent,
                options=options,
                name=run,
                ablations=ablation or [],
                repeat=repeat,
            )
        except (ValueError, RunError) as exc:
            raise _fail(str(exc).splitlines()[0]) from exc
        outcomes.append(_run_one(cfg, run_dir, limit, concurrency, retries, max_failed, as_json))
    if repeats > 1 and not as_json:
        _print_repeats(outcomes)
    for outcome in outcomes:
        if outcome.nothing_scored:
            raise _fail(f"nothing was scored: {outcome.nothing_scored}", 1)
        if outcome.too_many_failed:
            raise _fail(outcome.too_many_failed, 1)


def _run_one(
    cfg: Any,
    run_dir: Path,
    limit: int | None,
    concurrency: int,
    retries: int,
    max_failed: float,
    as_json: bool,
) -> EvalOutcome:
    """One run with its progress bars, its outcome printed (a table, or JSON)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from vidscope.flows.evaluate import run_evaluate

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=as_json,
    ) as progress:
        bars: dict[str, Any] = {}

        def on_progress(event: EvalProgress) -> None:
            label = "ingesting videos" if event.phase == "ingest" else "answering questions"
            if event.phase not in bars:
                bars[event.phase] = progress.add_task(label, total=event.total)
            mark = "" if event.ok else " [red](failed)[/red]"
            progress.update(
                bars[event.phase], completed=event.done, description=f"{label} · {safe(event.name)}{mark}"
            )

        try:
            outcome = run_evaluate(
                cfg,
                run_dir,
                limit=limit,
                concurrency=concurrency,
                retries=retries,
                max_failed=max_failed,
                on_progress=on_progress,
            )
        except ValueError as exc:
            raise _fail(str(exc).splitlines()[0]) from exc
    if as_json:
        console.print_json(outcome.model_dump_json())
    else:
        _print_outcome(outcome)
    return outcome


def _print_repeats(outcomes: list[EvalOutcome]) -> None:
    """The strict accuracy of each repeat, their mean and sample standard deviation."""
    values = [o.summary.scores["accuracy"] for o in outcomes if "accuracy" in o.summary.scores]
    if not values:
        return
    mean = sum(values) / len(values)
    spread = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5 if len(values) > 1 else 0.0
    runs = ", ".join(f"{100 * v:.1f}" for v in values)
    console.print(
        f"accuracy over {len(values)} repeats: {100 * mean:.1f} ± {100 * spread:.1f} % (sample s.d.; {runs})"
    )


def _print_outcome(outcome: EvalOutcome) -> None:
    s = outcome.summary
    ablations = f" · {', '.join(s.ablations)}" if s.ablations else ""
    table = Table(title=safe(f"{s.benchmark} · {s.agent}{ablations} · {s.run}"))
    table.add_column("metric")
    table.add_column("value", justify="right")
    if s.overall is not None:
        g = s.overall
        table.add_row(
            "accuracy, strict (failures wrong)",
            f"{100 * g.accuracy:.1f} % ({g.correct}/{g.total}) [{_span(g.low, g.high)}]",
        )
        if g.answered_accuracy is not None:
            table.add_row(
                "accuracy over answered",
                f"{100 * g.answered_accuracy:.1f} % ({g.correct}/{g.answered}) "
                f"[{_span(g.answered_low, g.answered_high)}]",
            )
    for name, value in s.scores.items():
        if name == "accuracy" and s.overall is not None:
            continue
        over = s.answered_scores.get(name)
        answered = "" if over is None or over == value else f" (answered: {100 * over:.1f} %)"
        table.add_row(safe(name), f"{100 * value:.1f} %{answered}")
    for name, rank in s.ranks.items():
        table.add_row(safe(name), f"{rank:g}")
    for name, group in s.by_category.items():
        table.add_row(f"  {safe(name)}", f"{100 * group.accuracy:.1f} % ({group.correct}/{group.total})")
    for name, value in s.rule_scores.items():
        table.add_row(f"  {safe(name)}", f"{100 * value:.1f} (rule)")
    for name, dimension in s.dimension_scores.items():
        table.add_row(safe(name), f"{100 * dimension.score:.1f} (mean of its tasks)")
    table.add_row("answered", f"{s.answered} ({len(outcome.answered_now)} now, {outcome.reused} earlier)")
    table.add_row("failed", str(len(s.failed)))
    table.add_row("not attempted yet", str(s.not_attempted))
    if s.outcomes:
        table.add_row("outcomes", " · ".join(f"{status} {n}" for status, n in s.outcomes.items()))
    if s.unparsed:
        table.add_row("answers naming no option", str(len(s.unparsed)))
    if s.forced:
        table.add_row("forced answers", str(s.forced))
    table.add_row("mean steps", f"{s.mean_steps:.2f}")
    table.add_row("tokens in / out", f"{s.input_tokens} / {s.output_tokens}")
    table.add_row("cost", "—" if s.cost_usd is None else f"${s.cost_usd:.4f}")
    console.print(table)
    if outcome.ingested:
        console.print(f"ingested {len(outcome.ingested)} videos")
    if outcome.missing_videos:
        shown = ", ".join(outcome.missing_videos[:20])
        more = f" and {len(outcome.missing_videos) - 20} more" if len(outcome.missing_videos) > 20 else ""
        console.print(
            f"[yellow]{len(outcome.missing_videos)} videos not found under the root[/yellow] "
            f"(their questions are skipped): {safe(shown)}{more}"
        )
    for name, error in outcome.ingest_failures.items():
        console.print(f"[red]could not ingest[/red] {safe(name)}: {safe(error)}")
    for reason, n in s.failure_groups.items():
        console.print(f"[red]failed[/red] {n} × {safe(reason)}")
    if s.optional_failed:  # answered without an optional ingestion stage that failed on their videos
        stages = sorted({reason for reasons in s.optional_failed.values() for reason in reasons})
        console.print(
            f"[yellow]answered without an optional stage[/yellow] {len(s.optional_failed)} questions: "
            + safe("; ".join(stages[:3]) + (f"; and {len(stages) - 3} more" if len(stages) > 3 else ""))
        )
    for warning in s.retrieval.get("warnings", []):  # e.g. an uncalibrated text embedder's thresholds
        console.print(f"[yellow]warning:[/yellow] {safe(warning)}")
    if s.retrieval.get("rerank_wanted"):
        wanted = ", ".join(f"{k} ({n})" for k, n in s.retrieval["rerank_wanted"].items())
        console.print(f"[yellow]fine stage configured but not used:[/yellow] {safe(wanted)}")
    for question, reason in list(s.unusable.items())[:20]:
        console.print(f"[yellow]not asked[/yellow] {safe(question)}: {safe(reason)}")
    if s.missing_tasks:
        missing = ", ".join(s.missing_tasks)
        console.print(f"[yellow]missing tasks (not in the overall score)[/yellow]: {safe(missing)}")
    if s.judge_model:
        console.print(f"free-form answers judged by {safe(s.judge_model)}")
    if s.judge_note:
        console.print(f"[yellow]{safe(s.judge_note)}[/yellow]")
    console.print(f"report: {safe(outcome.run_dir)}/report.md · every question: samples.jsonl")


def _span(low: float | None, high: float | None) -> str:
    return "—" if low is None or high is None else f"{100 * low:.1f}–{100 * high:.1f}"


def _run_dir(ref: str) -> Path:
    from vidscope.flows.evaluate import RUNS_FOLDER

    path = Path(ref).expanduser()
    if path.is_dir():
        return path
    named = Path(settings().data_dir).expanduser() / RUNS_FOLDER / ref
    if named.is_dir():
        return named
    raise _fail(f"no evaluation run {ref!r} (neither a folder nor a run under {named.parent})", 1)


def _compare(ref_a: str, ref_b: str) -> None:
    from vidscope.evaluation.report import compare_markdown, left_out_line, read_summary

    try:
        a, b = read_summary(_run_dir(ref_a)), read_summary(_run_dir(ref_b))
        text = compare_markdown(a, b)
    except (FileNotFoundError, ValueError) as exc:
        raise _fail(str(exc).splitlines()[0], 1) from exc
    gone = left_out_line(a, b)
    if gone:  # said in the Markdown too; here where a terminal user cannot miss it
        errors.print(f"[yellow]warning: {safe(gone)}[/yellow]", soft_wrap=True)
    # Markdown as written (its cells are escaped by compare_markdown), not Rich markup.
    console.print(text, markup=False, highlight=False, soft_wrap=True, end="")
