"""``vidscope summarize VIDEO``: what a video is about — its summary, chapters and highlights — in
the terminal, as JSON, as a ``0:00 Title`` list (md) or as WebVTT chapters (vtt)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from vidscope.cli.common import app, console, errors, refuse, safe, settings, timestamp

if TYPE_CHECKING:
    from vidscope.flows.summarize import VideoOverview

FORMATS = ("md", "vtt", "json")


def _format(value: str | None) -> str | None:
    if value is not None and value.lower() not in FORMATS:
        raise typer.BadParameter(f"choose one of: {', '.join(FORMATS)}")
    return value.lower() if value is not None else None


@app.command()
def summarize(
    video: Annotated[str, typer.Argument(help="Video id (prefix), path or file name.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print {summary, chapters, highlights} as JSON (--format json).")
    ] = False,
    output_format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="md: a '0:00 Title' line per chapter; vtt: WebVTT chapters; json: as --json.",
            callback=_format,
        ),
    ] = None,
) -> None:
    """The summary, chapters and highlights of a video (made at ingestion, no model needed)."""
    from vidscope.flows.summarize import NotSummarized, as_markdown, as_webvtt
    from vidscope.library import Library
    from vidscope.storage.videos import VideoNotFound

    json_out = as_json or output_format == "json"
    try:
        overview = Library(settings=settings()).summarize(video)
    except VideoNotFound as exc:
        refuse(exc, 1, json_out)
    except NotSummarized as exc:
        refuse(exc, 1, json_out, style="yellow")
    if json_out:
        print(overview.model_dump_json(indent=2))
    elif output_format == "md":
        print(as_markdown(overview), end="")
    elif output_format == "vtt":
        print(as_webvtt(overview), end="")
    else:
        _render(overview)


def _render(overview: VideoOverview) -> None:
    console.print(f"[bold]{safe(overview.file)}[/bold]  {overview.video_id[:12]}")
    if overview.summary:
        console.print(safe(overview.summary))
    if overview.note:
        errors.print(f"[yellow]{safe(overview.note)}[/yellow]", soft_wrap=True)
    table = Table(title="chapters")
    for column in ("when", "title", "summary"):
        table.add_column(column, overflow="fold")
    for c in overview.chapters:
        table.add_row(f"{timestamp(c.start)}–{timestamp(c.end)}", safe(c.title), safe(c.summary))
    console.print(table)
    if overview.highlights:
        table = Table(title="highlights")
        for column in ("when", "what", "why"):
            table.add_column(column, overflow="fold")
        for h in overview.highlights:
            table.add_row(f"{timestamp(h.start)}–{timestamp(h.end)}", safe(h.text), safe(h.why))
        console.print(table)
