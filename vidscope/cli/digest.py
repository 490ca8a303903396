"""``vidscope digest [--since 1d]``: what the library gained — the videos ingested in a window,
each with its summary and chapter titles, and the counts — in the terminal or as JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from vidscope.cli.common import app, console, refuse, safe, settings, timestamp

if TYPE_CHECKING:
    from vidscope.flows.summarize import Digest


@app.command()
def digest(
    since: Annotated[
        str, typer.Option("--since", help="The window to look back: a number and s, m, h, d or w.")
    ] = "1d",
    as_json: Annotated[bool, typer.Option("--json", help="Print the digest as JSON.")] = False,
) -> None:
    """What the library gained: videos ingested in the window with their summaries and chapters."""
    from vidscope.library import Library

    try:
        result = Library(settings=settings()).digest(since)
    except ValueError as exc:
        refuse(exc, 2, as_json)
    if as_json:
        print(result.model_dump_json(indent=2))
    else:
        _render(result)


def _render(result: Digest) -> None:
    console.print(
        f"[bold]{result.count} video(s)[/bold] since {result.since[:16].replace('T', ' ')} UTC: "
        f"{timestamp(result.seconds)}, {result.chapters} chapter(s), {result.not_summarized} not "
        f"summarised; {result.library} in the library"
    )
    if not result.videos:
        return
    table = Table()
    for column in ("video", "added", "length", "summary", "chapters"):
        table.add_column(column, overflow="fold")
    for v in result.videos:
        table.add_row(
            f"{safe(v.file)}\n{v.video_id[:12]}",
            v.added_at[:16].replace("T", " "),
            timestamp(v.duration),
            safe(v.summary or v.note or ""),
            "\n".join(f"{i}. {safe(t)}" for i, t in enumerate(v.chapters, 1)),
        )
    console.print(table)
