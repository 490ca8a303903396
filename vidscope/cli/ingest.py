"""``vidscope ingest``: look at the ledger, run the ingestion flow for what is not up to date with a
live progress bar per file, then sum the batch up.

Files whose every stage is current are counted as up to date without a flow run (a re-run of an
unchanged folder takes a second or two and starts no Prefect server). Each other file's result is
printed as soon as it is done; the batch ends with ``N new, M up to date, K failed`` and a table
of the failed stages only. Failures are one line each (file, stage, reason); their tracebacks are
in the log file the line names. A file whose only failures are optional enrichments (subjects,
graph, chapters…; :data:`vidscope.tasks.stages.OPTIONAL_STAGES`) is ingested ``degraded``: one
line per failed optional stage, and the run exits :data:`EXIT_OPTIONAL_FAILED` unless a file failed.
SIGINT and SIGTERM stop the run at once: the flow runs in a worker thread, so the main thread is
free to take the signal, mark the running stages interrupted in the ledger, end every child
process (the temporary Prefect server among them) and exit.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.table import Table

from vidscope.cli.common import STATUS_STYLE, app, console, errors, quiet_prefect, safe, settings
from vidscope.flows.ingest_plan import DEGRADED, UP_TO_DATE, VideoReport

if TYPE_CHECKING:
    from rich.progress import Progress

    from vidscope.core.settings import Settings

#: Progress events that end a stage (``started`` and ``progress`` do not).
_STAGE_ENDS = {"done", "skipped", "cached", "failed", "blocked", "unavailable", "interrupted"}
#: Stage statuses the failure table lists.
_FAILED_STAGE = {"failed", "blocked", "interrupted"}
#: The exit status of an ingest where every file was ingested but some with a failed optional stage
#: (its videos are searchable and answerable without it; ``vidscope ingest`` retries the stage).
#: 0 is all well, 1 a file failed (a required stage, or the file itself), 2 bad usage, 130 SIGINT.
EXIT_OPTIONAL_FAILED = 3


@app.command()
def ingest(
    paths: Annotated[list[str], typer.Argument(help="Video files, folders or glob patterns.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object per file instead of lines and a summary.")
    ] = False,
) -> None:
    """Ingest videos: probe, cut into clips, sample frames, read speech and text, caption, embed.

    Files whose every stage is current (same content, same settings) are up to date and skipped
    after a look at the ledger, without starting Prefect.
    """
    from vidscope.flows.ingest_plan import plan_ingest
    from vidscope.models.open_store import open_store

    cfg = settings()
    log = quiet_prefect(with_prefect=False)
    try:
        plan = plan_ingest(paths, cfg, open_store(cfg))
    except KeyboardInterrupt:  # while hashing: nothing was written yet
        errors.print("[yellow]interrupted before ingestion started[/yellow]")
        raise typer.Exit(130) from None
    except Exception as exc:  # e.g. an unreadable store: one line, the traceback in the log
        _fail(exc, log, as_json)
    summary = _Summary(plan.known)
    out = errors if as_json else console
    for settled in plan.settled:
        summary.add(settled)
        if settled.status != UP_TO_DATE:  # an up-to-date file is counted, not listed
            _print_one(settled, summary.kind(settled), log, as_json, out)
        elif as_json:
            _print_one(settled, UP_TO_DATE, log, as_json, out)
    if plan.pending:
        for r in _run(plan.pending, plan.ids, cfg, log, as_json, summary):
            summary.add(r)
        if not as_json:
            _say_if_visual_search_is_off(cfg)
    if not as_json:
        summary.print(console)
    if summary.counts["failed"]:
        raise typer.Exit(1)
    if summary.counts[DEGRADED]:
        raise typer.Exit(EXIT_OPTIONAL_FAILED)


def _run(
    pending: list[Path], names: dict[str, Path], cfg: Settings, log: Path, as_json: bool, summary: _Summary
) -> list[VideoReport]:
    """Ingest ``pending`` with the flows and a live bar per file; the reports, each printed as it ends.

    The flows report to the Prefect server ``vidscope server up`` runs (or ``PREFECT_API_URL``)
    when one answers, as questions do; otherwise the stages run in this process, without a
    Prefect server (Dask and Ray still start a temporary one: flows/ingest.py).
    """
    quiet_prefect()
    from vidscope.deployments.lifeline import start_watchdog
    from vidscope.flows.prefect_api import reachable_api
    from vidscope.library import Library
    from vidscope.tasks.stages import stage_names

    start_watchdog()  # even a SIGKILL of this process must not leave the temporary server behind
    api = reachable_api(cfg)
    # Imported here: rich.progress (and its fractions) costs every other command, a cold ask too.
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    bars = _Bars(len(stage_names()), names)
    shown: set[str] = set()
    outcome: dict[str, Any] = {}
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:.0f}/{task.total:.0f} stages"),
        TimeElapsedColumn(),
        console=errors if as_json else console,
        transient=True,
        disable=as_json,
    ) as progress:
        bars.progress = progress

        def on_event(event: dict[str, Any]) -> None:
            if event["event"] == "finished":
                result = VideoReport.model_validate(event["report"])
                shown.add(result.path)
                bars.finish(result.video_id or "")
                _print_one(result, summary.kind(result), log, as_json, progress.console)
            else:
                bars.update(event)

        def run() -> None:
            try:
                with _reporting_to(api):
                    outcome["reports"] = Library(settings=cfg).ingest(pending, progress=on_event)
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
            _print_one(r, summary.kind(r), log, as_json, errors if as_json else console)
    if api and not as_json:
        console.print(f"[dim]runs recorded in the Prefect UI at {safe(api.removesuffix('/api'))}[/dim]")
    return reports


def _reporting_to(api: str | None) -> contextlib.AbstractContextManager[Any]:
    """Prefect's settings for the run: the running server's API when there is one."""
    if api is None:
        return contextlib.nullcontext()
    from prefect.settings import PREFECT_API_URL, temporary_settings

    return temporary_settings({PREFECT_API_URL: api})


class _Bars:
    """One progress bar per file, named after it: the stages running now (with their own progress,
    when they report it) and how many of the file's stages have ended."""

    def __init__(self, total: int, names: dict[str, Path]) -> None:
        self.total, self.names = total, names
        self.progress: Progress | None = None
        self.bars: dict[str, Any] = {}
        self.ended: dict[str, set[str]] = {}
        self.running: dict[str, dict[str, str]] = {}  # video -> stage -> "" or " 42%"

    def update(self, event: dict[str, Any]) -> None:
        """Apply one stage event (started, progress, or an end) to its file's bar."""
        video, stage, kind = event["video_id"], event["stage"], event["event"]
        if not video or self.progress is None:
            return
        if video not in self.bars:
            self.bars[video] = self.progress.add_task(self._name(video), total=self.total)
            self.ended[video], self.running[video] = set(), {}
        running = self.running[video]
        if kind == "started":
            running[stage] = ""
        elif kind == "progress" and event.get("total"):
            running[stage] = f" {100 * event['done'] / max(event['total'], 1e-9):.0f}%"
        elif kind in _STAGE_ENDS:
            # A retried stage ends twice (failed, then done or failed): count stages, not events.
            running.pop(stage, None)
            self.ended[video].add(stage)
        self.progress.update(
            self.bars[video], completed=len(self.ended[video]), description=self._describe(video)
        )

    def finish(self, video: str) -> None:
        """The file is done: its bar goes (its result line is printed instead)."""
        if video in self.bars and self.progress is not None:
            self.progress.remove_task(self.bars.pop(video))

    def _name(self, video: str) -> str:
        path = self.names.get(video)
        return safe(path.name if path else video[:12])

    def _describe(self, video: str) -> str:
        now = ", ".join(f"{stage}{pct}" for stage, pct in self.running[video].items())
        if not now:  # between stages, or every stage ended and its report is being made
            now = "finishing" if len(self.ended[video]) >= self.total else "waiting"
        return f"{self._name(video)} [dim]· {safe(now)}[/dim]"


class _Summary:
    """The batch in one line: ``N new, M up to date, K failed`` (updates and duplicates when any),
    then the failed stages, one row each."""

    def __init__(self, known: set[str]) -> None:
        self.known = known
        self.counts = {"new": 0, "updated": 0, UP_TO_DATE: 0, "failed": 0, DEGRADED: 0, "duplicate": 0}
        self.failures: list[VideoReport] = []

    def kind(self, r: VideoReport) -> str:
        """What happened to the file: new, updated, up to date, failed or duplicate."""
        if r.failed or r.status in ("duplicate", UP_TO_DATE):
            return r.status
        if r.stages and all(s.status == "cached" for s in r.stages):
            return UP_TO_DATE  # e.g. renamed or moved: its path was updated, no stage ran
        return "updated" if r.video_id in self.known else "new"

    def add(self, r: VideoReport) -> None:
        """Count ``r`` (and keep it for the failure table when it failed)."""
        kind = self.kind(r)
        self.counts[kind] += 1
        if r.status == DEGRADED:  # new or updated, and one of its optional stages failed
            self.counts[DEGRADED] += 1
        if kind == "failed":
            self.failures.append(r)

    def line(self) -> str:
        """``N new, M up to date, K failed`` (plus updated and duplicates when there are any)."""
        c = self.counts
        parts = [f"{c['new']} new"]
        if c["updated"]:
            parts.append(f"{c['updated']} updated")
        parts += [f"{c[UP_TO_DATE]} up to date", f"{c['failed']} failed"]
        if c[DEGRADED]:
            parts.append(f"{c[DEGRADED]} of them ingested with a failed optional stage")
        if c["duplicate"]:
            parts.append(f"{c['duplicate']} duplicate{'s' if c['duplicate'] > 1 else ''}")
        return ", ".join(parts)

    def print(self, out: Any) -> None:
        """The line, then a table of what failed (file, stage, reason) when anything did."""
        style = "red" if self.counts["failed"] else "yellow" if self.counts[DEGRADED] else "green"
        out.print(f"[bold {style}]{self.line()}[/]")
        if not self.failures:
            return
        table = Table(title="failed", show_lines=False)
        for column in ("file", "stage", "reason"):
            table.add_column(column, overflow="fold")
        for r in self.failures:
            name = safe(Path(r.path).name)
            bad = [s for s in r.stages if s.status in _FAILED_STAGE]
            if r.error or not bad:
                stage, _, reason = (r.error or "failed").partition(": ")
                if not reason:
                    stage, reason = "", stage
                table.add_row(name, safe(stage), safe(reason))
            for s in bad:
                table.add_row(
                    name,
                    f"[{STATUS_STYLE.get(s.status, 'red')}]{safe(s.stage)}[/]",
                    safe(s.error or s.status),
                )
        out.print(table)


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


def _fail(exc: BaseException, log: Path, as_json: bool) -> NoReturn:
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


def _print_one(r: VideoReport, kind: str, log: Path, as_json: bool, out: Any) -> None:
    """One file's result, as it finishes: a line on the terminal or a JSON object on stdout.

    ``kind`` is what happened to it (new, updated, up to date, failed, duplicate); a file ingested
    with warnings shows its status (warning, partial) and why.
    """
    if as_json:
        data = r.model_dump(mode="json")
        data["outcome"] = kind
        data["reason"] = r.reasons() or None
        if r.failed:
            data["log"] = str(log)
        print(json.dumps(data, ensure_ascii=False), flush=True)
        return
    name = safe(Path(r.path).name)
    if r.status == DEGRADED:
        # One line per failed optional stage: the video is usable, the stage is not there.
        for s in r.optional_failures():
            out.print(
                f"[yellow]{'degraded':>10}[/] {name} · optional stage {safe(s.stage)} {s.status}: "
                f"{safe(s.error or s.status)} (ingested without it; the next ingest retries it)"
            )
        return
    shown = r.status if r.status in ("warning", "partial") else kind
    style = STATUS_STYLE.get(shown, "white")
    reason = r.reasons()
    if r.status == "duplicate":
        reason = f"same content as {r.duplicate_of}" if r.duplicate_of else reason
    line = f"[{style}]{shown:>10}[/] {name}"
    if reason:
        line += f" · {safe(reason)}"
    if r.failed:
        line += f" [dim](details: {log})[/dim]"
    out.print(line)


def _say_if_visual_search_is_off(cfg: Any) -> None:
    """One line when the image–text model could not be had (the stage skipped every video)."""
    from vidscope.core.errors import BackendUnavailable
    from vidscope.models import registry

    try:
        registry.image_text(cfg)  # already loaded (or refused) by this process's stages: instant
    except BackendUnavailable as exc:
        errors.print(f"[yellow]visual search is off:[/yellow] {safe(exc.brief)}")
