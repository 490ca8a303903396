"""``vidscope ingest``: run the ingestion flow with a live progress bar per video, then a report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from vidscope.cli.common import STATUS_STYLE, app, console, errors, quiet_prefect, settings

if TYPE_CHECKING:
    from vidscope.flows.ingest import VideoReport


@app.command()
def ingest(
    paths: Annotated[list[str], typer.Argument(help="Video files, folders or glob patterns.")],
) -> None:
    """Ingest videos: probe, cut into clips, sample frames, read speech and text, caption, embed."""
    quiet_prefect()
    from vidscope.flows.ingest import STAGES, run_ingest
    from vidscope.tasks.progress import listen

    cfg = settings()
    stage_names = [s.name for s in STAGES]
    bars: dict[str, Any] = {}
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:.0f}/{task.total:.0f} stages"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:

        def on_event(event: dict[str, Any]) -> None:
            video = event["video_id"][:12]
            if not video:
                return
            if video not in bars:
                bars[video] = progress.add_task(video, total=len(stage_names))
            bar = bars[video]
            stage, kind = event["stage"], event["event"]
            if kind == "progress" and event.get("total"):
                pct = 100 * event["done"] / max(event["total"], 1e-9)
                progress.update(bar, description=f"{video} {stage} {pct:3.0f}%")
            elif kind == "started":
                progress.update(bar, description=f"{video} {stage}")
            elif kind != "progress":
                progress.advance(bar)
                progress.update(bar, description=f"{video} {stage}: {kind}")

        with listen(on_event):
            reports = run_ingest(paths, cfg)
    _print_reports(reports)
    if any(r.failed for r in reports):
        raise typer.Exit(1)


def _print_reports(reports: list[VideoReport]) -> None:
    table = Table(title="ingestion", show_lines=False)
    for column in ("file", "video", "status", "stages", "note"):
        table.add_column(column)
    for r in reports:
        stages = " ".join(f"[{STATUS_STYLE.get(s.status, 'white')}]{s.stage}[/]" for s in r.stages)
        note = r.error or (f"same content as {r.duplicate_of}" if r.duplicate_of else "")
        unavailable = [s for s in r.stages if s.status == "unavailable"]
        if unavailable and not note:
            note = "; ".join(f"{s.stage}: {s.error}" for s in unavailable)
        style = STATUS_STYLE.get(r.status, "white")
        table.add_row(Path(r.path).name, (r.video_id or "")[:12], f"[{style}]{r.status}[/]", stages, note)
    console.print(table)
    for r in reports:
        if r.failed:
            failed = [f"{s.stage}: {s.error}" for s in r.stages if s.status in ("failed",)]
            errors.print(f"[red]FAILED[/red] {r.path}: {r.error or '; '.join(failed)}")
