"""The library commands: ``videos``, ``status``, ``show``, ``remove`` and ``sql`` over the store."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from vidscope.cli.common import (
    STATUS_STYLE,
    app,
    console,
    errors,
    find,
    plural,
    safe,
    settings,
    store,
    timestamp,
    visible,
)

if TYPE_CHECKING:
    pass


@app.command()
def videos() -> None:
    """List ingested videos."""
    from vidscope.library import Library

    library = Library(settings=settings())
    records = library.videos()
    opened = library.store
    table = Table(title=plural(len(records), "video"))
    for column in ("id", "file", "duration", "size", "fps", "audio", "clips"):
        table.add_column(column)
    for r in records:
        table.add_row(
            r.video_id[:12],
            safe(r.file_name),
            f"{r.duration:.1f}s",
            f"{r.width}x{r.height}",
            f"{r.fps:.1f}",
            "yes" if r.has_audio else "no",
            str(opened.count(opened.clips, r.video_id)),
        )
    console.print(table)


@app.command()
def status(
    video: Annotated[str | None, typer.Argument(help="Video id (prefix), path or file name.")] = None,
    stages: Annotated[
        bool, typer.Option("--stages", help="The overview with every stage's state per video.")
    ] = False,
) -> None:
    """Per-stage ingestion status of one video (with errors), or an overview of all: one line per
    video saying whether it is ready and what was skipped or failed (``--stages`` for every stage)."""
    # The registered names, not the declarations: loading those imports every stage module.
    from vidscope.tasks.stage import ledger_rows
    from vidscope.tasks.stages import stage_names as registered_names

    opened = store()
    stage_names = list(registered_names())
    if video:
        record = find(video)[1]
        ledger = ledger_rows(opened, record.video_id)
        table = Table(title=f"{safe(record.file_name)} ({record.video_id[:12]})")
        for column in ("stage", "status", "rows", "seconds", "error / note"):
            table.add_column(column, overflow="fold")
        for name in stage_names:
            row = ledger.get(name)
            if row is None:
                table.add_row(name, "[dim]pending[/dim]", "", "", "")
                continue
            style = STATUS_STYLE.get(row["status"], "white")
            note = row["error"] or _ledger_note(row["details_json"])
            seconds = f"{row['seconds']:.2f}" if row["seconds"] is not None else ""
            rows = "" if row["rows"] is None else str(row["rows"])
            table.add_row(name, f"[{style}]{safe(row['status'])}[/]", rows, seconds, safe(note))
        console.print(table)
        return
    table = Table(title="ingestion status (vidscope status VIDEO for one video's stages)")
    table.add_column("video", overflow="fold")
    table.add_column("stages" if stages else "state", overflow="fold")
    for row in opened.rows(opened.videos).to_pylist():
        ledger = ledger_rows(opened, row["video_id"])
        states = {name: ledger.get(name, {}).get("status", "pending") for name in stage_names}
        if stages:
            cell = " ".join(f"[{STATUS_STYLE.get(s, 'dim')}]{n}:{s}[/]" for n, s in states.items())
        else:
            cell = _compact_state(states)
        table.add_row(f"{row['video_id'][:12]} {safe(row['file_name'])}", cell)
    console.print(table)


def _compact_state(states: dict[str, str]) -> str:
    """One video's stages in a few words: "ready" (or "not finished"), then the stages that did not
    run as done, grouped by state ("skipped: detect, subjects")."""
    by_state: dict[str, list[str]] = {}
    for name, state in states.items():
        if state != "done":
            by_state.setdefault(state, []).append(name)
    finished = not any(s in by_state for s in ("pending", "running", "interrupted"))
    failed = "failed" in by_state
    head = (
        "[red]failed[/red]"
        if failed
        else "[green]ready[/green]"
        if finished
        else "[yellow]not finished[/yellow]"
    )
    rest = [f"[{STATUS_STYLE.get(s, 'dim')}]{s}[/]: {', '.join(names)}" for s, names in by_state.items()]
    return " · ".join([head, *rest])


def _ledger_note(details_json: str | None) -> str:
    if not details_json:
        return ""
    details = json.loads(details_json)
    return str(details.get("reason", ""))


@app.command()
def show(
    video: Annotated[str, typer.Argument(help="Video id (prefix), path or file name.")],
    limit: Annotated[int, typer.Option(help="Show at most this many clips.")] = 200,
) -> None:
    """The clips of a video with their times, captions, speech and on-screen text."""
    from vidscope.storage.clips import CLIP_TEXT_COLUMNS

    opened, record = find(video)
    console.print(
        f"[bold]{safe(record.file_name)}[/bold]  {record.video_id[:12]}  {record.duration:.1f}s  "
        f"{record.width}x{record.height}  audio: {'yes' if record.has_audio else 'no'}"
    )
    clips = opened.rows(
        opened.clips,
        video_id=record.video_id,
        columns=CLIP_TEXT_COLUMNS,
    ).to_pylist()
    table = Table(show_lines=True)
    for column in ("#", "time", "caption", "speech", "on-screen text"):
        table.add_column(column, overflow="fold")
    for c in clips[:limit]:
        caption = safe(c["caption"] or "")
        if c["caption_source"] == "signals-summary":
            caption = "[dim](no caption model)[/dim]"
        table.add_row(
            str(c["clip_index"]),
            f"{timestamp(c['start'])}–{timestamp(c['end'])}",
            caption,
            safe(c["transcript_text"] or ""),
            safe(c["ocr_text"] or ""),
        )
    console.print(table)
    if len(clips) > limit:
        console.print(f"[dim]… {len(clips) - limit} more clips (--limit)[/dim]")


@app.command()
def remove(
    video: Annotated[str, typer.Argument(help="Video id (prefix), path or file name.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Remove a video and every row derived from it (the file itself is not touched)."""
    from vidscope.library import Library

    _, record = find(video)
    if not yes and sys.stdin.isatty():
        typer.confirm(
            f"Remove {visible(record.file_name)} ({record.video_id[:12]}) from the store?", abort=True
        )
    Library(settings=settings()).remove(record.video_id)
    console.print(f"removed {safe(record.file_name)} ({record.video_id[:12]})")


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="A DuckDB SELECT over the store's tables.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print rows as JSON lines.")] = False,
) -> None:
    """Run read-only SQL (DuckDB) over the store: videos, clips, frames, transcript_segments, …"""
    from vidscope.storage.sql import SqlError
    from vidscope.storage.sql import query as run_query

    try:
        columns, rows = run_query(store(), query)
    except SqlError as exc:
        errors.print(f"[red]SQL error:[/red] {safe(exc)}")
        raise typer.Exit(1) from exc
    if as_json:
        for row in rows:
            print(json.dumps(dict(zip(columns, row, strict=True)), default=_json_default))
        return
    table = Table()
    for column in columns:
        table.add_column(safe(column), overflow="fold")
    for row in rows:
        table.add_row(*[safe(_cell(v)) for v in row])
    console.print(table)
    console.print(f"[dim]{len(rows)} rows[/dim]")


def _cell(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    if isinstance(value, list) and len(value) > 8:
        return f"[{len(value)} values]"
    return "" if value is None else str(value)


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    return str(value)
