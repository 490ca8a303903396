"""``vidscope search``: find the library's videos that match a description (MAVIS pipeline)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from vidscope.cli.common import app, console, errors, quiet_prefect, settings
from vidscope.cli.render import render_search


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to find, e.g. 'a dog running on the beach'.")],
    k: Annotated[int | None, typer.Option("--k", min=1, max=1000, help="Videos to return.")] = None,
    fusion: Annotated[
        str | None,
        typer.Option(
            "--fusion", help="How the dimension agents' proposals combine: veto|union|intersection|average."
        ),
    ] = None,
    tau_soft: Annotated[
        float | None, typer.Option("--tau-soft", help="An agent proposes videos scoring at least this.")
    ] = None,
    tau_hard: Annotated[
        float | None, typer.Option("--tau-hard", help="Veto: drop videos some agent scores below this.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    show_dropped: Annotated[bool, typer.Option("--dropped", help="Also list the dropped videos.")] = False,
) -> None:
    """Search all ingested videos: plan the query, ask one agent per dimension, veto, rerank."""
    from vidscope.agents.mavis import LibraryEmpty
    from vidscope.flows.search import run_search

    quiet_prefect()
    try:
        result = run_search(settings(), query, k=k, fusion=fusion, tau_soft=tau_soft, tau_hard=tau_hard)
    except LibraryEmpty as exc:
        errors.print(f"[yellow]{escape(str(exc))}[/yellow]")
        raise typer.Exit(1) from exc
    except ValueError as exc:
        errors.print(f"[red]{escape(str(exc))}[/red]")
        raise typer.Exit(2) from exc
    render_search(result, console, as_json, show_dropped)
