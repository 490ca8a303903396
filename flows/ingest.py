"""Ingestion flows: ``ingest_video`` (one video, one Prefect task per stage) and ``ingest_library``.

``ingest_video`` runs the stages registered in :mod:`vidscope.tasks.stages` as a small DAG
derived from their declarations (one generic Prefect task per stage, :func:`stage_task`): speech
recognition runs beside frame sampling and OCR; captioning waits for all of them; embedding comes
last (frame embedding, which needs only the frames, runs beside it). Each stage consults the ledger first,
so a re-run does only what is missing, failed or changed. A stage that fails is retried by Prefect,
then recorded as failed; stages that need it are reported as blocked, the others still run.

``ingest_library`` expands paths, hashes files to find duplicates (the same content under two
names is one video), ingests the distinct videos with bounded concurrency and finally rebuilds the
store's indexes.

The reports (:class:`VideoReport`) and :func:`expand_paths` live in :mod:`vidscope.flows.ingest_plan`,
which decides before any flow runs what is up to date (no Prefect there); they are re-exported here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from prefect import Task, flow, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import PrefectFuture
from prefect.task_runners import ThreadPoolTaskRunner

from vidscope.core.settings import Settings, get_settings
from vidscope.flows.ingest_plan import StageReport as StageReport
from vidscope.flows.ingest_plan import VideoReport as VideoReport
from vidscope.flows.ingest_plan import expand_paths as expand_paths
from vidscope.flows.runs import publish_table
from vidscope.models.open_store import open_store
from vidscope.storage import Store
from vidscope.tasks.decode import UndecodableVideo
from vidscope.tasks.memory import limit_malloc_arenas
from vidscope.tasks.probe import PROBE, content_hash, register_video
from vidscope.tasks.progress import report
from vidscope.tasks.stage import Stage, StageResult, failure_reason, ledger_rows, run_stage
from vidscope.tasks.stages import stages

#: A stage's Prefect task: (video id, where its file is now, settings) -> what the stage did.
StageTask = Task[[str, Path, Settings], StageResult]


@cache
def stage_task(stage: Stage) -> StageTask:
    """The Prefect task of ``stage``, built from its declaration (once per stage and process):
    named after the stage, one task run per video, no Prefect caching (the ledger decides what
    is current)."""

    def run(video_id: str, path: Path, settings: Settings) -> StageResult:
        return run_stage(stage, video_id, path, settings)

    # Prefect keys a task by its function's qualified name: one key per stage, as the UI shows.
    run.__qualname__ = run.__name__ = f"{stage.name}_stage"
    build = task(name=stage.name, cache_policy=NO_CACHE, task_run_name=f"{stage.name} · {{path.name}}")
    return build(run)


class IngestFailed(RuntimeError):
    """Raised at the end of ``ingest_video`` when a stage failed; carries the report."""

    def __init__(self, report: VideoReport) -> None:
        self.report = report
        super().__init__(f"{Path(report.path).name}: {report.reasons() or 'failed'}")


# ---------------------------------------------------------------------------- tasks


@task(name="hash", cache_policy=NO_CACHE, task_run_name="hash · {path.name}")
def hash_task(path: Path) -> str:
    """The content hash (video id) of ``path``."""
    return content_hash(path)


# ---------------------------------------------------------------------------- flows


@flow(name="ingest_video", flow_run_name="ingest {path.name}", log_prints=False)
def ingest_video(path: Path, settings: Settings | None = None, video_id: str | None = None) -> VideoReport:
    """Ingest one video file: every stage that is not current for it, in dependency order."""
    settings = settings or get_settings()
    path = Path(path)
    video_report = VideoReport(path=str(path))
    store = open_store(settings)
    retries = settings.ingest.stage_retries
    try:
        video_id = video_id or hash_task(path)
        video_report.video_id = video_id
        _probe_first(store, settings, path, video_id)
    except (UndecodableVideo, OSError, ValueError) as exc:
        video_report.status, video_report.error = "failed", f"{PROBE.name}: {failure_reason(exc, path)}"
        report(video_id or "", PROBE.name, "failed", error=video_report.error, path=str(path))
        raise IngestFailed(video_report) from exc

    # The DAG is the stages' own declarations: a stage is submitted once what it needs or reads
    # has finished; stages that do not depend on each other run side by side.
    futures: dict[str, PrefectFuture[StageResult]] = {}
    results: dict[str, StageResult] = {}
    registered = stages()
    for stage in registered:
        for dependency in (*stage.needs, *stage.reads):
            if dependency in futures and dependency not in results:
                results[dependency] = _resolve(dependency, futures[dependency], path)
        submitted = stage_task(stage).with_options(retries=retries, retry_delay_seconds=1)
        futures[stage.name] = submitted.submit(video_id, path, settings)
    for name, future in futures.items():
        if name not in results:
            results[name] = _resolve(name, future, path)

    video_report.stages = [
        StageReport(
            stage=r.stage,
            status=r.status,
            rows=r.rows,
            seconds=round(r.seconds, 3),
            error=r.error,
            note=_note(store, video_id, r),
        )
        for r in (results[s.name] for s in registered)
    ]
    if any(s.status in ("failed", "blocked") for s in video_report.stages):
        video_report.status = "failed"
    elif any(s.stage == PROBE.name and s.note for s in video_report.stages):
        video_report.status = "partial"
    elif any(s.status == "unavailable" or s.note for s in video_report.stages):
        video_report.status = "warning"
    _publish(video_report)
    if video_report.failed:
        raise IngestFailed(video_report)
    return video_report


def _probe_first(store: Store, settings: Settings, path: Path, video_id: str) -> None:
    """Register the video (probe) so every stage has its record; keep its path current."""
    existing = store.video_record(video_id)
    probe_row = ledger_rows(store, video_id).get(PROBE.name)
    if existing is None or probe_row is None:
        register_video(store, settings, path, video_id)
    elif existing.path != str(path.resolve()):
        # Same content at a new place (renamed, moved, copied): remember where it is now.
        store.update_columns(
            store.videos,
            [{"video_id": video_id, "path": str(path.resolve()), "file_name": path.name}],
        )


def _note(store: Store, video_id: str, result: StageResult) -> str | None:
    """The stage's note on damage it worked around (this run's, or the ledger's when cached)."""
    note = result.details.get("note")
    if note is None and result.status == "cached":
        row = ledger_rows(store, video_id).get(result.stage, {})
        try:
            note = json.loads(row.get("details_json") or "{}").get("note")
        except ValueError:
            note = None
    return str(note) if note else None


def _resolve(name: str, future: PrefectFuture[StageResult], path: Path) -> StageResult:
    future.wait()
    state = future.state
    if state.is_completed():
        return future.result()
    error = future.result(raise_on_failure=False)
    reason = failure_reason(error, path) if isinstance(error, BaseException) else state.message
    return StageResult(name, "failed", error=reason)


def _publish(video_report: VideoReport) -> None:
    """A per-video table of stages as a Prefect artifact (shown in the UI)."""
    publish_table(
        f"ingest-{(video_report.video_id or 'unknown')[:12]}",
        [s.model_dump() for s in video_report.stages],
        f"Ingestion of {video_report.path}: {video_report.status}",
    )


@task(name="ingest", cache_policy=NO_CACHE, task_run_name="ingest · {path.name}")
def ingest_one(path: Path, video_id: str, settings: Settings) -> VideoReport:
    """Run ``ingest_video`` as a subflow and turn its failure into a report."""
    # Found by import, not by closure: on Dask or Ray this task is pickled by value, and a flow
    # pickled along with it loses the module globals its parameter annotations resolve against.
    from vidscope.flows import ingest as this_module

    state = this_module.ingest_video(path, settings, video_id, return_state=True)
    if state.is_completed():
        result: VideoReport = state.result()
    else:
        error = state.result(raise_on_failure=False)
        if isinstance(error, IngestFailed):
            result = error.report
        else:
            reason = failure_reason(error, path) if isinstance(error, BaseException) else state.message
            result = VideoReport(path=str(path), video_id=video_id, status="failed", error=reason)
    _finished(result)
    return result


def _finished(video_report: VideoReport) -> None:
    """Tell listeners (the CLI) that one file is done, so its result shows before the batch ends."""
    report(video_report.video_id or "", "", "finished", report=video_report.model_dump())


@flow(name="ingest_library", flow_run_name="ingest library ({paths_count} inputs)")
def ingest_library(
    paths: Sequence[str],
    settings: Settings | None = None,
    paths_count: int = 0,
    optimize: bool = True,
) -> list[VideoReport]:
    """Ingest every video under ``paths`` (files, folders, globs); returns one report per file.

    With ``optimize`` (the default) the store's indexes are rebuilt afterwards, as a task of its own.
    """
    settings = settings or get_settings()
    files, reports = expand_paths(paths)
    for note in reports:
        _finished(note)
    hashes: dict[Path, Any] = {p: hash_task.submit(p) for p in files}
    first_by_hash: dict[str, Path] = {}
    to_ingest: list[tuple[Path, str]] = []
    for path, future in hashes.items():
        future.wait()
        state = future.state
        if not state.is_completed():
            error = future.result(raise_on_failure=False)
            reason = failure_reason(error, path) if isinstance(error, BaseException) else state.message
            reports.append(VideoReport(path=str(path), status="failed", error=f"hash: {reason}"))
            _finished(reports[-1])
            continue
        digest = future.result()
        if digest in first_by_hash:
            reports.append(
                VideoReport(
                    path=str(path),
                    video_id=digest,
                    status="duplicate",
                    duplicate_of=str(first_by_hash[digest]),
                )
            )
            _finished(reports[-1])
            continue
        first_by_hash[digest] = path
        to_ingest.append((path, digest))
    futures = [ingest_one.submit(path, digest, settings) for path, digest in to_ingest]
    for future in futures:
        reports.append(future.result())
    if to_ingest and optimize:
        optimize_task(settings)
    return reports


@task(name="optimize", cache_policy=NO_CACHE)
def optimize_task(settings: Settings) -> dict[str, str]:
    """Compact the tables and rebuild indexes after ingestion."""
    return open_store(settings).optimize()


def run_ingest(paths: Sequence[str], settings: Settings, *, optimize: bool = True) -> list[VideoReport]:
    """Entry point for the CLI: ``ingest_library`` on the configured task runner.

    ``[ingest] task_runner`` picks where the videos fan out: ``threads`` (this process, at most
    ``concurrency`` at once), ``dask`` (a local cluster of ``dask_workers`` processes, or the
    scheduler at ``dask_address``) or ``ray`` (local, or the cluster at ``ray_address``). Each
    worker process opens its own store; concurrent Lance commits are retried by the store.
    """
    limit_malloc_arenas()
    config = settings.ingest
    runner: Any
    if config.task_runner == "threads":
        runner = ThreadPoolTaskRunner(max_workers=config.concurrency)
    elif config.task_runner == "dask":
        try:
            from prefect_dask import DaskTaskRunner
        except ImportError as exc:
            raise RuntimeError(
                "[ingest] task_runner = 'dask' needs prefect-dask: pip install 'vidscope[dask]'"
            ) from exc
        if config.dask_address:
            runner = DaskTaskRunner(address=config.dask_address)
        else:
            cluster = {"n_workers": config.dask_workers, "threads_per_worker": 1}
            runner = DaskTaskRunner(cluster_kwargs={**cluster, "dashboard_address": None})
    else:
        try:
            from prefect_ray import RayTaskRunner
        except ImportError as exc:
            raise RuntimeError(
                "[ingest] task_runner = 'ray' needs prefect-ray: pip install 'vidscope[ray]'"
            ) from exc
        runner = RayTaskRunner(address=config.ray_address)
    library = ingest_library.with_options(task_runner=runner)
    return library(list(paths), settings, paths_count=len(paths), optimize=optimize)
