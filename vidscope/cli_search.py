"""``vidscope search``: find the library's videos that match a description (MAVIS pipeline)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from vidscope.cli import app, console, errors, quiet_prefect, settings


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
    if as_json:
        console.print_json(json.dumps(result.model_dump(mode="json"), ensure_ascii=False))
        return
    plan = "; ".join(f"{d}: {escape(i)}" for d, i in result.plan.items())
    console.print(f"[bold]plan[/bold] ({escape(result.planner)}) {plan}")
    dims = list(result.plan)
    table = Table(title=f"{len(result.hits)} videos for {escape(result.query)!r}")
    for column in ("#", "video", "score", *dims, "caption", "moments"):
        table.add_column(column, overflow="fold")
    for rank, hit in enumerate(result.hits, 1):
        table.add_row(
            str(rank),
            escape(hit.file_name),
            f"{hit.score:.3f}",
            *[f"{hit.scores.get(d, 0.0):.2f}" for d in dims],
            escape(hit.caption[:80]),
            ", ".join(f"{a:.1f}–{b:.1f}s" for a, b in hit.moments),
        )
    if result.hits:
        console.print(table)
    else:
        console.print("[yellow]no video matches[/yellow]")
    if show_dropped:
        for dropped in result.dropped:
            console.print(f"  [dim]dropped[/dim] {escape(dropped.file_name)}: {escape(dropped.reason)}")
    for note in result.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
    console.print(
        f"[dim]{result.seconds:.2f}s · fusion {result.fusion} · pool {result.pool_size} · "
        f"{len(result.dropped)} dropped · fine stage {result.fine_comparisons} videos ({result.rerank})[/dim]"
    )
