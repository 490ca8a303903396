"""``vidscope export`` / ``vidscope import``: move ingested videos between data dirs as a bundle.

A bundle is a folder of Parquet files and a manifest (:mod:`vidscope.storage.bundle`). Importing
checks all of it first and refuses, in one line and without writing anything, a bundle that is
damaged, breaks the ``[bundle]`` limits, holds rows of videos its manifest does not name, or was
embedded by another model than this data dir's; videos already here are left alone unless
``--replace`` names them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vidscope.cli.common import app, console, errors, find, plural, safe, settings


@app.command("export")
def export(
    videos: Annotated[list[str], typer.Argument(help="Videos to export: id (prefix), path or file name.")],
    to: Annotated[Path, typer.Option("--to", help="A new (or empty) folder to write the bundle into.")],
) -> None:
    """Export ingested videos (every table's rows, vocabulary, ledger, model ids) as a bundle."""
    from vidscope.library import Library
    from vidscope.storage.bundle import BundleError

    for ref in videos:
        find(ref)  # an unknown video: one line naming it, exit 1
    try:
        manifest = Library(settings=settings()).export(videos, to)
    except BundleError as exc:
        errors.print(f"[red]{safe(str(exc))}[/red]", soft_wrap=True)
        raise typer.Exit(1) from exc
    rows = sum(manifest.tables.values())
    console.print(f"exported {plural(len(manifest.videos), 'video')} ({rows} rows) to {safe(str(to))}")


@app.command("import")
def import_(
    folder: Annotated[Path, typer.Argument(help="A bundle folder written by `vidscope export`.")],
    replace: Annotated[
        list[str] | None,
        typer.Option(
            "--replace",
            help="A video of the bundle (id or id prefix) to overwrite if this data dir has it already; "
            "repeat for several. Videos already here are otherwise left alone.",
        ),
    ] = None,
) -> None:
    """Import a bundle into this data dir; nothing is written unless all of it checks out."""
    from vidscope.library import Library
    from vidscope.storage.bundle import BundleError

    try:
        report = Library(settings=settings()).import_(folder, replace=replace or [])
    except BundleError as exc:
        errors.print(f"[red]{safe(str(exc))}[/red]", soft_wrap=True)
        raise typer.Exit(1) from exc
    replaced = f" ({len(report.replaced)} replaced)" if report.replaced else ""
    console.print(f"imported {plural(len(report.imported), 'video')}{replaced} from {safe(str(folder))}")
    if report.kept:
        console.print(
            f"left {plural(len(report.kept), 'video')} already here alone (e.g. {report.kept[0][:12]}); "
            f"--replace ID overwrites one"
        )
