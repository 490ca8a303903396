"""``vidscope compare``: one question across several videos; ``vidscope skills``: SAMA's skills."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from vidscope.agents import strategies
from vidscope.cli.common import (
    app,
    console,
    errors,
    query_runs_in_prefect,
    quiet_prefect,
    report_failure,
    safe,
    settings,
    strategy_choice,
)
from vidscope.cli.render import render_step
from vidscope.core.timecodes import fmt_time


@app.command()
def compare(
    args: Annotated[
        list[str], typer.Argument(help="The videos (id prefix, path or file name), then the question.")
    ],
    options: Annotated[
        list[str] | None,
        typer.Option("--options", help="Multiple-choice options (repeat it: --options A --options B)."),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            callback=strategy_choice("videos"),
            help=f"{strategies.help_text('videos')}. Default {strategies.default('videos')}. They need "
            "a planner (models.chat), else the answer is extractive.",
            show_default=False,
        ),
    ] = None,
    no_skills: Annotated[bool, typer.Option("--no-skills", help="SAMA ablation: no skills.")] = False,
    no_conflict_check: Annotated[
        bool, typer.Option("--no-conflict-check", help="SAMA ablation: no conflict checks.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    trace: Annotated[bool, typer.Option("--trace", help="Show every agent step.")] = False,
) -> None:
    """Answer a question across several ingested videos, citing (video, start, end)."""
    if len(args) < 2:
        errors.print("[red]give one or more videos and then the question[/red]")
        raise typer.Exit(2)
    *videos, question = args
    log = quiet_prefect(with_prefect=query_runs_in_prefect())
    from vidscope.library import Library

    show_steps = None if as_json or not trace else (lambda step: render_step(step, console))
    try:
        result = Library(settings=settings()).compare(
            videos,
            question,
            options=options or None,
            agent=agent,
            use_skills=not no_skills,
            conflict_check=not no_conflict_check,
            on_step=show_steps,
        )
    except Exception as exc:
        # An unknown video, a bad option or a model server that is down: one line (or one JSON
        # object), the traceback in the log file.
        report_failure("compare", exc, log, as_json)
        raise typer.Exit(1) from exc
    if as_json:
        console.print_json(result.model_dump_json())
        return
    console.print(safe(result.answer))
    names = {v.video_id: v.file_name for v in result.videos}
    for c in result.citations:
        mark = "[green]verified[/green]" if c.verified else f"[red]unverified[/red] ({safe(c.note)})"
        console.print(
            f"  {safe(names.get(c.video_id, c.video_id[:12]))} {fmt_time(c.start)}–{fmt_time(c.end)} {mark}"
        )
    if result.note:
        console.print(f"[dim]{safe(result.note)}[/dim]")


@app.command()
def skills() -> None:
    """List SAMA's skills: the bundled ones and those in \\[agent] skills_dir."""
    from vidscope.agents.sama.skills import load_skills

    folder = settings().agent.skills_dir
    table = Table("name", "question type", "tools", "from")
    for skill in load_skills(folder):
        table.add_row(
            safe(skill.name),
            safe(skill.question_type),
            safe(" → ".join(skill.tools)),
            "bundled" if skill.bundled else safe(skill.path),
        )
    console.print(table)
    if folder is None:
        console.print("[dim]Add your own: set \\[agent] skills_dir and drop a markdown skill there.[/dim]")
