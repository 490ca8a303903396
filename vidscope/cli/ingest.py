"""``vidscope ingest``: run the ingestion flow with a live progress bar per video, then a report.

Each file's result is printed as soon as that file is done; the table at the end sums the batch
up. Failures are one line each (file, stage, reason); their tracebacks are in the log file the
line names. SIGINT and SIGTERM stop the run at once: the flow runs in a worker thread, so the
main thread is free to take the signal, mark the running stages interrupted in the ledger, end
every child process (the temporary Prefect server among them) and exit.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from vidscope.cli.common import STATUS_STYLE, app, console, errors, quiet_prefect, safe, settings

if TYPE_CHECKING:
    from vidscope.flows.ingest import VideoReport

#: Progress events that end a stage (``started`` and ``progress`` do not).
_STAGE_ENDS = {"done", "skipped", "cached", "failed", "blocked", "unavailable", "interrupted"}


@app.command()
def ingest(
    paths: Annotated[list[str], typer.Argument(help="Video files, folders or glob patterns.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object per file instead of tables.")
    ] = False,
) -> None:
    """Ingest videos: probe, cut into clips, sample frames, read speech and text, caption, embed."""
    log = quiet_prefect()
    from vidscope.deployments.lifeline import start_watchdog
    from vidscope.flows.ingest import VideoReport, run_ingest
    from vidscope.tasks.progress import listen
    from vidscope.tasks.stages import stage_names

    cfg = settings()
    start_watchdog()  # even a SIGKILL of this process must not leave the temporary server behind
    total = len(stage_names())
    bars: dict[str, Any] = {}
    ended: dict[str, set[str]] = {}
    shown: set[str] = set()
    outcome: dict[str, Any] = {}

    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:.0f}/{task.total:.0f} stages"),
        TimeElapsedColumn(),
        console=errors if as_json else console,
        transient=as_json,
        disable=as_json,
    ) as progress:

        def on_event(event: dict[str, Any]) -> None:
            kind = event["event"]
            if kind == "finished":
                result = VideoReport.model_validate(event["report"])
                shown.add(result.path)
                _print_one(result, log, as_json, progress.console)
                return
            video = event["video_id"][:12]
            if not video:
                return
            if video not in bars:
                bars[video] = progress.add_task(video, total=total)
                ended[video] = set()
            bar, stage = bars[video], event["stage"]
            if kind == "progress" and event.get("total"):
                pct = 100 * event["done"] / max(event["total"], 1e-9)
                progress.update(bar, description=f"{video} {stage} {pct:3.0f}%")
            elif kind == "started":
                progress.update(bar, description=f"{video} {stage}")
            elif kind in _STAGE_ENDS:
                # A retried stage ends twice (failed, then done or failed): count stages, not events.
                ended[video].add(stage)
                progress.update(bar, completed=len(ended[video]), description=f"{video} {stage}: {kind}")

        def run() -> None:
            try:
                with listen(on_event):
                    outcome["reports"] = run_ingest(paths, cfg)
            except BaseException as exc:  # reported by the main thread
                outcome["error"] = exc

        worker = threading.Thread(target=run, name="vidscope-ingest", daemon=True)
        with _stop_on_signals(log, progress):
            worker.start()
            while worker.is_alive():
                worker.join(0.2)  # a short wait, so a signal is handled at once
    if "error" in outcome:
        _fail(outcome["error"], log, as_json)
    reports: list[VideoReport] = outcome["reports"]
    for r in reports:
        if r.path not in shown:  # files whose workers could not reach this process (Dask, Ray)
            _print_one(r, log, as_json, console)
    if not as_json:
        _print_reports(reports)
        _say_if_visual_search_is_off(cfg)
    if any(r.failed for r in reports):
        raise typer.Exit(1)


class _stop_on_signals:
    """While active, SIGINT and SIGTERM end the ingest at once, leaving nothing running."""

    def __init__(self, log: Path, progress: Progress) -> None:
        self.log, self.progress = log, progress
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self.previous[sig] = signal.signal(sig, self._stop)

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        from vidscope.deployments.lifeline import end_children, stop_watchdog
        from vidscope.models.usage import flush_all
        from vidscope.tasks.stage import interrupt_running

        name = signal.Signals(signum).name
        self.progress.stop()
        errors.print(f"[yellow]stopping ingestion ({name})[/yellow]")
        # The stage at work is abandoned: its ledger row says so, and the next run redoes it.
        marked = interrupt_running(f"interrupted by {name}")
        with contextlib.suppress(Exception):  # a usage record lost on the way out is no reason to stay
            flush_all()
        end_children()
        stop_watchdog()
        errors.print(f"interrupted: {marked} stage(s) marked interrupted; log: {self.log}")
        # Worker threads still inside a stage cannot be stopped from outside; exiting the process
        # is what abandons them (Lance commits are atomic, so no half-written table version).
        os._exit(128 + signum)


def _fail(exc: BaseException, log: Path, as_json: bool) -> None:
    """The run itself failed (not one file): one line, or a JSON error object; exit 1."""
    import logging

    from vidscope.tasks.stage import failure_reason

    logging.getLogger("vidscope.cli").error("ingestion failed", exc_info=exc)
    reason = failure_reason(exc)
    if as_json:
        print(json.dumps({"error": reason, "log": str(log)}))
    else:
        errors.print(f"[red]ingestion failed:[/red] {safe(reason)} (details: {log})")
    raise typer.Exit(1)


def _print_one(r: VideoReport, log: Path, as_json: bool, out: Any) -> None:
    """One file's result, as it finishes: a line on the terminal or a JSON object on stdout."""
    if as_json:
        data = r.model_dump(mode="json")
        data["reason"] = r.reasons() or None
        if r.failed:
            data["log"] = str(log)
        print(json.dumps(data, ensure_ascii=False), flush=True)
        return
    name = safe(Path(r.path).name)
    style = STATUS_STYLE.get(r.status, "white")
    reason = r.reasons()
    if r.status == "duplicate":
        reason = f"same content as {r.duplicate_of}" if r.duplicate_of else reason
    line = f"[{style}]{r.status:>9}[/] {name}"
    if reason:
        line += f" · {safe(reason)}"
    if r.failed:
        line += f" [dim](details: {log})[/dim]"
    out.print(line)


def _print_reports(reports: list[VideoReport]) -> None:
    table = Table(title="ingestion", show_lines=False)
    for column in ("file", "video", "status", "stages", "note"):
        table.add_column(column)
    for r in reports:
        stages = " ".join(f"[{STATUS_STYLE.get(s.status, 'white')}]{s.stage}[/]" for s in r.stages)
        note = r.reasons()
        if r.status == "duplicate" and r.duplicate_of:
            note = f"same content as {r.duplicate_of}"
        style = STATUS_STYLE.get(r.status, "white")
        table.add_row(
            safe(Path(r.path).name),
            (r.video_id or "")[:12],
            f"[{style}]{r.status}[/]",
            stages,
            safe(note),
        )
    console.print(table)


def _say_if_visual_search_is_off(cfg: Any) -> None:
    """One line when the image–text model could not be had (the stage skipped every video)."""
    from vidscope.core.errors import BackendUnavailable
    from vidscope.models import registry

    try:
        registry.image_text(cfg)  # already loaded (or refused) by this process's stages: instant
    except BackendUnavailable as exc:
        errors.print(f"[yellow]visual search is off:[/yellow] {safe(str(exc))}")
