"""``vidscope ask``: answer a question about one video (or, with ``--library``, about all of them),
showing each agent step as it happens."""

from __future__ import annotations

from typing import Annotated

import typer

from vidscope.agents import strategies
from vidscope.cli import common
from vidscope.cli.common import (
    app,
    query_runs_in_prefect,
    quiet_prefect,
    report_failure,
    safe,
    settings,
    strategy_choice,
)
from vidscope.cli.render import render_answer, render_step


@app.command()
def ask(
    video: Annotated[
        str, typer.Argument(help="Video id (prefix), path or file name (with --library: the question).")
    ],
    question: Annotated[str | None, typer.Argument(help="The question to answer.")] = None,
    more_options: Annotated[
        list[str] | None,
        typer.Argument(help="The rest of the options after --options A.", show_default=False),
    ] = None,
    options: Annotated[
        list[str] | None,
        typer.Option("--options", help="Multiple-choice options: --options A B C D (or repeat it)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    trace: Annotated[bool, typer.Option("--trace", help="Show every agent step.")] = False,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            callback=strategy_choice(None),
            help=f"{strategies.help_text('video')}. Default {strategies.default('video')}; with "
            f"--library: {strategies.help_text('library')}. They need a chat model (models.chat), "
            "else the answer is extractive.",
            show_default=False,
        ),
    ] = None,
    library: Annotated[
        bool,
        typer.Option(
            "--library",
            help="Ask about every ingested video: vidscope ask --library QUESTION. The DVD agent "
            "searches across videos (extractive without a chat model) and cites (video, start, end).",
        ),
    ] = False,
) -> None:
    """Answer a question about an ingested video, citing the moments that support it."""
    if agent is not None:  # any strategy passed the option's check; this question needs its scope's
        try:
            strategies.get(agent, "library" if library else "video")
        except ValueError as exc:
            common.errors.print(f"[red]{exc}[/red]")
            raise typer.Exit(2) from None
    if library:
        _ask_library(video if question is None else f"{video} {question}", as_json, trace, options, agent)
        return
    if question is None:
        common.errors.print(
            "[red]missing the question:[/red] vidscope ask VIDEO QUESTION (or ask --library QUESTION)"
        )
        raise typer.Exit(2)
    if more_options and not options:
        common.errors.print(
            f"[red]unexpected arguments:[/red] {safe(' '.join(more_options))} (quote the question?)"
        )
        raise typer.Exit(2)
    options = [*(options or []), *(more_options or [])] or None
    if _ask_running_api(video, question, options, agent, as_json, trace):
        return
    log = quiet_prefect(with_prefect=query_runs_in_prefect())
    from vidscope.library import Library

    show_steps = None if as_json else (lambda step: render_step(step, common.console))
    try:
        result = Library(settings=settings()).ask(
            video, question, options=options or None, agent=agent, on_step=show_steps
        )
    except Exception as exc:
        # A model server that is down, an unknown video, a bad option: one line (or one JSON
        # object) for the user, the traceback in the log file.
        report_failure("ask", exc, log, as_json)
        raise typer.Exit(1) from exc
    render_answer(result, None if as_json else common.console, as_json, trace)


def _ask_running_api(
    video: str, question: str, options: list[str] | None, agent: str | None, as_json: bool, trace: bool
) -> bool:
    """Answer through the ``vidscope api`` running for these settings, if there is one (see
    :mod:`vidscope.cli.running_api`); False when there is none or it cannot take the question."""
    import logging

    from vidscope.cli.running_api import ApiUnavailable, RemoteAskFailed, find_running_api

    running = find_running_api(settings())
    if running is None:
        return False
    from vidscope.agents.answers import AskResult, TraceStep

    log = quiet_prefect(with_prefect=False)
    request: dict[str, object] = {"video": video, "question": question, "options": options}
    if agent is not None:
        request["agent"] = agent
    on_step = None if as_json else (lambda step: render_step(TraceStep.model_validate(step), common.console))
    try:
        reply = running.ask(request, on_step)
    except ApiUnavailable as exc:
        logging.getLogger("vidscope.cli.ask").info("answering in-process: %s", exc)
        return False
    except RemoteAskFailed as exc:
        report_failure("ask", exc, log, as_json, kind=exc.kind)
        raise typer.Exit(1) from exc
    reply.pop("query_id", None)
    render_answer(AskResult.model_validate(reply), None if as_json else common.console, as_json, trace)
    if not as_json:
        common.errors.print(f"[dim]answered by the vidscope API at {safe(running.url)}[/dim]")
    return True


def _ask_library(
    question: str, as_json: bool, trace: bool, options: list[str] | None, agent: str | None
) -> None:
    if options:
        common.errors.print("[red]--library answers open questions (no --options)[/red]")
        raise typer.Exit(2)
    log = quiet_prefect(with_prefect=query_runs_in_prefect())
    from vidscope.library import Library

    show_steps = None if as_json else (lambda step: render_step(step, common.console))
    try:
        result = Library(settings=settings()).ask_library(question, agent=agent, on_step=show_steps)
    except Exception as exc:
        # As for one video: a model server that is down is one line (or one JSON object).
        report_failure("ask", exc, log, as_json)
        raise typer.Exit(1) from exc
    render_answer(result, None if as_json else common.console, as_json, trace)
