"""The ``vidscope`` command line (typer + rich)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from vidscope.core.settings import Settings, disable_telemetry

app = typer.Typer(
    name="vidscope",
    help="Ask questions about, search and compare your own videos.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console()
errors = Console(stderr=True)

_overrides: dict[str, Any] = {}


@app.callback()
def main(
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="Where the store lives (default ./vidscope-data)."),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="A vidscope.toml to read (default ./vidscope.toml)."),
    ] = None,
) -> None:
    """Global options."""
    import os

    disable_telemetry()
    if config is not None:
        if not config.exists():
            errors.print(f"[red]config file not found:[/red] {config}")
            raise typer.Exit(2)
        os.environ["VIDSCOPE_CONFIG"] = str(config)
    if data_dir is not None:
        _overrides["data_dir"] = data_dir


def settings() -> Settings:
    """The settings for this invocation (file + environment + command-line overrides)."""
    from pydantic import ValidationError

    try:
        return Settings(**_overrides)
    except ValidationError as exc:
        errors.print(f"[red]invalid configuration:[/red] {exc}")
        raise typer.Exit(2) from exc


def _store():  # type: ignore[no-untyped-def]
    from vidscope.models.open_store import open_store

    return open_store(settings())


def quiet_prefect() -> None:
    """Keep Prefect's per-task log lines out of the terminal; the progress bars say it better."""
    import logging
    import os

    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    for name in ("prefect", "prefect.flow_runs", "prefect.task_runs"):
        logging.getLogger(name).setLevel(logging.WARNING)


# ---------------------------------------------------------------------------- ingest


STATUS_STYLE = {
    "done": "green",
    "cached": "green",
    "skipped": "dim",
    "failed": "red",
    "blocked": "red",
    "unavailable": "yellow",
    "running": "cyan",
    "ok": "green",
    "duplicate": "dim",
    "warning": "yellow",
}


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


def _print_reports(reports: list[Any]) -> None:
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


# ---------------------------------------------------------------------------- inspect


@app.command()
def videos() -> None:
    """List ingested videos."""
    store = _store()
    rows = store.rows(store.videos).to_pylist()
    table = Table(title=f"{len(rows)} videos")
    for column in ("id", "file", "duration", "size", "fps", "audio", "clips"):
        table.add_column(column)
    for r in sorted(rows, key=lambda r: r["added_at"]):
        table.add_row(
            r["video_id"][:12],
            r["file_name"],
            f"{r['duration']:.1f}s",
            f"{r['width']}x{r['height']}",
            f"{r['fps']:.1f}",
            "yes" if r["has_audio"] else "no",
            str(store.count(store.clips, r["video_id"])),
        )
    console.print(table)


def _find(ref: str):  # type: ignore[no-untyped-def]
    from vidscope.storage.videos import VideoNotFound, find_video

    store = _store()
    try:
        return store, find_video(store, ref)
    except VideoNotFound as exc:
        errors.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc


@app.command()
def status(
    video: Annotated[str | None, typer.Argument(help="Video id (prefix), path or file name.")] = None,
) -> None:
    """Per-stage ingestion status of one video (with errors), or an overview of all."""
    from vidscope.flows.ingest import STAGES
    from vidscope.tasks.stage import ledger_rows

    store = _store()
    stage_names = [s.name for s in STAGES]
    if video:
        record = _find(video)[1]
        ledger = ledger_rows(store, record.video_id)
        table = Table(title=f"{record.file_name} ({record.video_id[:12]})")
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
            table.add_row(name, f"[{style}]{row['status']}[/]", rows, seconds, note)
        console.print(table)
        return
    table = Table(title="stage status (vidscope status VIDEO for details)")
    table.add_column("video", overflow="fold")
    table.add_column("stages", overflow="fold")
    for row in store.rows(store.videos).to_pylist():
        ledger = ledger_rows(store, row["video_id"])
        cells = []
        for name in stage_names:
            state = ledger.get(name, {}).get("status", "pending")
            cells.append(f"[{STATUS_STYLE.get(state, 'dim')}]{name}:{state}[/]")
        table.add_row(f"{row['video_id'][:12]} {row['file_name']}", " ".join(cells))
    console.print(table)


def _ledger_note(details_json: str | None) -> str:
    if not details_json:
        return ""
    details = json.loads(details_json)
    return str(details.get("reason", ""))


def _video_record(row: dict[str, Any]):  # type: ignore[no-untyped-def]
    from vidscope.storage.videos import VideoRecord

    return VideoRecord(**row)


@app.command()
def show(
    video: Annotated[str, typer.Argument(help="Video id (prefix), path or file name.")],
    limit: Annotated[int, typer.Option(help="Show at most this many clips.")] = 200,
) -> None:
    """The clips of a video with their times, captions, speech and on-screen text."""
    from vidscope.storage.clips import CLIP_TEXT_COLUMNS

    store, record = _find(video)
    console.print(
        f"[bold]{record.file_name}[/bold]  {record.video_id[:12]}  {record.duration:.1f}s  "
        f"{record.width}x{record.height}  audio: {'yes' if record.has_audio else 'no'}"
    )
    clips = store.rows(
        store.clips,
        video_id=record.video_id,
        columns=CLIP_TEXT_COLUMNS,
    ).to_pylist()
    table = Table(show_lines=True)
    for column in ("#", "time", "caption", "speech", "on-screen text"):
        table.add_column(column, overflow="fold")
    for c in clips[:limit]:
        caption = c["caption"] or ""
        if c["caption_source"] == "signals-summary":
            caption = "[dim](no caption model)[/dim]"
        table.add_row(
            str(c["clip_index"]),
            f"{_ts(c['start'])}–{_ts(c['end'])}",
            caption,
            c["transcript_text"] or "",
            c["ocr_text"] or "",
        )
    console.print(table)
    if len(clips) > limit:
        console.print(f"[dim]… {len(clips) - limit} more clips (--limit)[/dim]")


def _ts(seconds: float) -> str:
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(int(minutes), 60)
    return f"{hours}:{minutes:02d}:{secs:04.1f}" if hours else f"{minutes}:{secs:04.1f}"


@app.command()
def remove(
    video: Annotated[str, typer.Argument(help="Video id (prefix), path or file name.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Remove a video and every row derived from it (the file itself is not touched)."""
    store, record = _find(video)
    if not yes and sys.stdin.isatty():
        typer.confirm(f"Remove {record.file_name} ({record.video_id[:12]}) from the store?", abort=True)
    store.delete_video(record.video_id)
    console.print(f"removed {record.file_name} ({record.video_id[:12]})")


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="A DuckDB SELECT over the store's tables.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print rows as JSON lines.")] = False,
) -> None:
    """Run read-only SQL (DuckDB) over the store: videos, clips, frames, transcript_segments, …"""
    from vidscope.storage.sql import SqlError
    from vidscope.storage.sql import query as run_query

    try:
        columns, rows = run_query(_store(), query)
    except SqlError as exc:
        errors.print(f"[red]SQL error:[/red] {exc}")
        raise typer.Exit(1) from exc
    if as_json:
        for row in rows:
            print(json.dumps(dict(zip(columns, row, strict=True)), default=_json_default))
        return
    table = Table()
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*[_cell(v) for v in row])
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


# ---------------------------------------------------------------------------- ask


@app.command()
def ask(
    video: Annotated[str, typer.Argument(help="Video id (prefix), path or file name.")],
    question: Annotated[str, typer.Argument(help="The question to answer.")],
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
        Literal["dvd", "avi"],
        typer.Option(
            "--agent",
            case_sensitive=False,
            help="dvd: Deep-Video-Discovery agent (one tool loop); avi: three phases (retrieve, "
            "perceive, review), gives 'when' questions a (start, end) interval. Both need "
            "a chat model (models.chat), else the answer is extractive.",
        ),
    ] = "dvd",
) -> None:
    """Answer a question about an ingested video, citing the moments that support it."""
    if more_options and not options:
        errors.print(f"[red]unexpected arguments:[/red] {' '.join(more_options)} (quote the question?)")
        raise typer.Exit(2)
    options = [*(options or []), *(more_options or [])] or None
    quiet_prefect()
    from vidscope.flows.ask import render_answer, render_step, run_ask
    from vidscope.storage.videos import VideoNotFound

    show_steps = None if as_json else (lambda step: render_step(step, console))
    try:
        result = run_ask(settings(), video, question, options or None, show_steps, agent=agent)
    except VideoNotFound as exc:
        errors.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc
    render_answer(result, console, as_json, trace)


# ---------------------------------------------------------------------------- models


@app.command()
def models(
    check: Annotated[
        bool, typer.Option("--check/--no-check", help="Try to load each configured model.")
    ] = True,
) -> None:
    """List each model role, the backend serving it, and whether it loads."""
    from vidscope.core.errors import BackendUnavailable
    from vidscope.models import registry

    cfg = settings()
    table = Table(title=f"models (profile: {cfg.profile})")
    for column in ("role", "backend", "loads", "detail"):
        table.add_column(column, overflow="fold")
    failures = 0
    for role in registry.ROLES:
        spec = getattr(cfg.models, role)
        if not spec:
            table.add_row(role, "[dim]not configured[/dim]", "", _unconfigured_note(role))
            continue
        if not check:
            table.add_row(role, spec, "?", "")
            continue
        try:
            backend = registry.LOADERS[role](cfg)
            load = getattr(backend, "load", None)
            if callable(load):  # some backends load lazily; make the check real
                load()
            dim = getattr(backend, "dim", None)
            detail = f"{dim}-d vectors" if isinstance(dim, int) else getattr(backend, "name", "")
            table.add_row(role, spec, "[green]yes[/green]", detail)
        except (BackendUnavailable, ImportError, ValueError, OSError, RuntimeError) as exc:
            failures += 1
            table.add_row(role, spec, "[red]no[/red]", str(exc))
    console.print(table)
    if failures:
        raise typer.Exit(1)


def _unconfigured_note(role: str) -> str:
    return {
        "captioner": "clips get a labelled summary of their speech and on-screen text",
        "chat": "`ask` answers extractively (no reasoning model)",
        "object_detector": "no object detection during ingestion",
        "image_text": "no image embeddings",
    }.get(role, "")


@app.command()
def usage(
    query: Annotated[str | None, typer.Option("--query", help="Only the calls of this query id.")] = None,
) -> None:
    """Model calls, tokens, images, cache hits and cost, in total or for one query."""
    from vidscope.models.usage import totals

    result = totals(_store(), query_id=query)
    table = Table(title="model usage" + (f" for query {query}" if query else ""))
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key, value in result.items():
        if isinstance(value, dict):
            continue
        table.add_row(
            key,
            "—" if value is None else (f"{value:.4f}" if isinstance(value, float) else str(value)),
        )
    console.print(table)
    if query is None:
        _print_ingestion_cost()
    per_model = result.get("by_model") or {}
    if per_model:
        detail = Table(title="per model")
        detail.add_column("model")
        columns = sorted({k for v in per_model.values() for k in v})
        for column in columns:
            detail.add_column(column, justify="right")
        for model, values in per_model.items():
            detail.add_row(model, *[str(values.get(c, "")) for c in columns])
        console.print(detail)


def _print_ingestion_cost() -> None:
    """Model cost of ingestion (calls outside any query) per hour of video ingested."""
    from vidscope.storage.sql import query as run_query

    _, rows = run_query(
        _store(),
        """
        SELECT (SELECT coalesce(sum(duration), 0) / 3600 FROM videos) AS hours,
               (SELECT count(*) FROM model_calls WHERE query_id IS NULL) AS calls,
               (SELECT sum(cost_usd) FROM model_calls WHERE query_id IS NULL) AS cost""",
    )
    hours, calls, cost = rows[0]
    line = f"ingested: {hours:.2f} h of video, {calls} model calls during ingestion"
    if cost is not None and hours > 0:
        line += f", ${cost:.4f} in total = ${cost / hours:.4f} per ingested hour"
    elif calls:
        line += " (no price table in [models.options.<kind>] prices: cost unknown)"
    console.print(line)


# ---------------------------------------------------------------------------- demo


@app.command()
def demo(
    question: Annotated[str | None, typer.Option(help="Ask this instead of the demo question.")] = None,
) -> None:
    """Ingest a narrated video and the sample videos, show what was found, ask a question, search."""
    from vidscope.flows.demo import DEMO_QUESTION, DEMO_SEARCH, demo_video, sample_videos

    cfg = settings()
    console.rule("[bold]1. making a narrated demo video with on-screen text")
    video = demo_video(cfg.data_dir)
    console.print(f"{video}")
    inputs = [str(video), *[str(p) for p in sample_videos()]]
    console.rule(f"[bold]2. ingesting {len(inputs)} videos")
    try:
        ingest(inputs)
    except typer.Exit as exc:
        if exc.exit_code:
            errors.print("[yellow]some videos failed; continuing with the rest[/yellow]")
    console.rule("[bold]3. what was found in the demo video")
    show(str(video), limit=20)
    console.rule("[bold]4. asking a question")
    ask(str(video), question or DEMO_QUESTION, None, None, False, False)
    console.rule("[bold]5. searching the whole library")
    from vidscope.cli_search import search as search_command

    search_command(DEMO_SEARCH, None, None, None, None, False, True)
    console.print(
        '\nNext: [bold]vidscope ask VIDEO "your question"[/bold], [bold]vidscope search "…"[/bold], '
        '[bold]vidscope sql "SELECT * FROM clips LIMIT 5"[/bold], [bold]vidscope api[/bold] (web page), '
        "[bold]vidscope --help[/bold]"
    )


# Command groups declared in their own modules register on ``app`` when imported (one line each).
# --- command modules ---
from vidscope import cli_api, cli_graph, cli_search, cli_server  # noqa: E402,F401,I001


if __name__ == "__main__":  # pragma: no cover
    app()
