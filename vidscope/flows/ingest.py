"""Ingestion flows: ``ingest_video`` (one video, one Prefect task per stage) and ``ingest_library``.

``ingest_video`` runs the stages registered in :mod:`vidscope.tasks.stages` as a small DAG
derived from their declarations (one generic Prefect task per stage, :func:`stage_task`): speech
recognition runs beside frame sampling and OCR; captioning waits for all of them; embedding comes
last (frame embedding, which needs only the frames, runs beside it). Each stage consults the ledger first,
so a re-run does only what is missing, failed or changed. A stage that fails is retried by Prefect,
then recorded as failed; stages that need it are reported as blocked, the others still run. When
only optional enrichments failed or were blocked (:attr:`~vidscope.tasks.stage.Stage.optional`),
the video is ingested ``degraded``, not failed: its store is whole but for their rows.

``ingest_library`` expands paths, hashes files to find duplicates (the same content under two
names is one video), ingests the distinct videos with bounded concurrency and finally rebuilds the
store's indexes. Those steps are written once (:func:`_ingest_library`), handed how to run them
(:class:`LibraryRunner`): as Prefect tasks inside the flow, or on this process's threads.

The reports (:class:`VideoReport`) and :func:`expand_paths` live in :mod:`vidscope.flows.ingest_plan`,
which decides before any flow runs what is up to date (no Prefect there); they are re-exported here.
:func:`run_ingest` (the CLI's, the API's and the nightly flow's entry point) runs these flows when
a Prefect server records them, or when it is itself inside a flow run. Without a server the same
code runs in-process on thread pools (:func:`ingest_direct`: the library's steps of
:func:`_ingest_library`, each video's stage DAG of :func:`_ingest_video`), with the same retries,
reports, progress events and ledger rows: no temporary Prefect API server is started, so
ingestion cannot fail because one was slow to come up on a busy machine (and whatever it recorded
would be thrown away with it). The ledger is the record either way.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import Any

from prefect import Task, flow, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import PrefectFuture
from prefect.task_runners import ThreadPoolTaskRunner

from vidscope.core.settings import Settings, get_settings
from vidscope.flows.ingest_plan import DEGRADED
from vidscope.flows.ingest_plan import StageReport as StageReport
from vidscope.flows.ingest_plan import VideoReport as VideoReport
from vidscope.flows.ingest_plan import expand_paths as expand_paths
from vidscope.flows.runs import publish_table, retried
from vidscope.flows.stage_schedule import StageRun, run_stages
from vidscope.models.open_store import open_store
from vidscope.storage import Store
from vidscope.storage.ingest_lock import ingesting
from vidscope.storage.ledger import earned
from vidscope.tasks.decode import UndecodableVideo
from vidscope.tasks.memory import limit_malloc
from vidscope.tasks.probe import PROBE, content_hash, register_video
from vidscope.tasks.progress import report
from vidscope.tasks.stage import Stage, StageResult, failure_reason, ledger_rows, run_stage
from vidscope.tasks.stages import stages

log = logging.getLogger(__name__)

#: A stage's Prefect task: (video id, where its file is now, settings) -> what the stage did.
StageTask = Task[[str, Path, Settings], StageResult]


@cache
def stage_task(stage: Stage) -> StageTask:
    """The Prefect task of ``stage``, built from its declaration (once per stage and process):
    named after the stage, one task run per video, no Prefect caching (the ledger decides what
    is current)."""

    def run(video_id: str, path: Path, settings: Settings) -> StageResult:
        return _in_its_state(run_stage(stage, video_id, path, settings))

    # Prefect keys a task by its function's qualified name: one key per stage, as the UI shows.
    run.__qualname__ = run.__name__ = f"{stage.name}_stage"
    build = task(name=stage.name, cache_policy=NO_CACHE, task_run_name=f"{stage.name} · {{path.name}}")
    return build(run)


#: Prefect state names of the stage outcomes that are not work done: a completed task run under its
#: own name (the UI shows "Skipped", not a green "Completed"), the ledger's reason as its message.
STATE_NAMES = {"skipped": "Skipped", "cached": "Cached", "unavailable": "Unavailable", "blocked": "Blocked"}


def _in_its_state(result: StageResult) -> StageResult:
    """``result``, as a completed Prefect state named after it when the stage did no work (the
    task's value is still ``result``: a task returning a state ends in it, with its data)."""
    name = STATE_NAMES.get(result.status)
    if name is None:
        return result
    from prefect.states import Completed

    reason = result.error or str(result.details.get("reason") or "") or f"{result.stage}: {result.status}"
    if result.status == "cached":
        reason = f"up to date: {result.rows} rows from an earlier run (the ledger)"
    state: StageResult = Completed(name=name, message=reason[:1000], data=result)  # type: ignore[assignment]
    return state


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


#: Starts one stage for one video: (stage, video id, path, settings) -> the started stage.
SubmitStage = Callable[[Stage, str, Path, Settings], StageRun]


@flow(name="ingest_video", flow_run_name="ingest {path.name}", log_prints=False)
def ingest_video(path: Path, settings: Settings | None = None, video_id: str | None = None) -> VideoReport:
    """Ingest one video file: every stage that is not current for it, in dependency order."""
    settings = settings or get_settings()
    retries = settings.ingest.stage_retries

    def submit(stage: Stage, video_id: str, path: Path, settings: Settings) -> StageRun:
        task_of_stage = stage_task(stage).with_options(retries=retries, retry_delay_seconds=1)
        future = task_of_stage.submit(video_id, path, settings)
        return StageRun.of_future(future, lambda: _resolve(stage.name, future, path))

    from prefect.logging import get_run_logger

    run_log = get_run_logger()  # the flow run's own log in the Prefect UI
    return _ingest_video(Path(path), settings, video_id, submit, hash_task, say=run_log.log)


def _ingest_video(
    path: Path,
    settings: Settings,
    video_id: str | None,
    submit: SubmitStage,
    hasher: Callable[[Path], str],
    say: Callable[[int, str], None] = log.log,
) -> VideoReport:
    """The body of ``ingest_video``, whichever way its stages run (``submit``): probe, then every
    stage once what it needs or reads has finished; the report; :class:`IngestFailed` on failure.
    ``say`` gets one line per stage (what it did, or why not) with its logging level (a warning
    when the stage failed or could not run): the flow run's log under Prefect."""
    video_report = VideoReport(path=str(path))
    store = open_store(settings)
    with ExitStack() as held:
        try:
            video_id = video_id or hasher(path)
            video_report.video_id = video_id
            # From the probe to the last stage, no other ingestion of this video (another host,
            # the nightly run beside a command) writes its rows at the same time.
            waiting = f"{path.name}: being ingested by another process; waiting for it to finish"
            held.enter_context(ingesting(settings.data_dir, video_id, lambda: say(logging.INFO, waiting)))
            _probe_first(store, settings, path, video_id)
        except (UndecodableVideo, OSError, ValueError) as exc:
            video_report.status, video_report.error = "failed", f"{PROBE.name}: {failure_reason(exc, path)}"
            report(video_id or "", PROBE.name, "failed", error=video_report.error, path=str(path))
            raise IngestFailed(video_report) from exc

        # The DAG is the stages' own declarations: a stage starts as soon as what it needs or reads
        # has finished, whatever the registered order; stages that do not depend on each other run
        # side by side.
        registered = stages()
        results = run_stages(registered, lambda stage: submit(stage, video_id, path, settings))

    for name, result in results.items():
        why = result.error or str(result.details.get("reason") or "")
        done = f"{result.rows} rows in {result.seconds:.1f} s" if result.status == "done" else ""
        level = logging.WARNING if result.status in ("failed", "blocked", "unavailable") else logging.INFO
        line = f"{path.name} · {name}: {result.status}" + "".join(
            f" · {part}" for part in (done, why) if part
        )
        say(level, line)
    video_report.stages = [
        StageReport(
            stage=r.stage,
            status=r.status,
            rows=r.rows,
            seconds=round(r.seconds, 3),
            error=r.error,
            note=_note(store, video_id, r),
            optional=s.optional,
        )
        for s in registered
        for r in (results[s.name],)
    ]
    broken = [s for s in video_report.stages if s.status in ("failed", "blocked")]
    if any(not s.optional for s in broken):
        video_report.status = "failed"
    elif broken:  # only optional enrichments: the video is searchable and answerable without them
        video_report.status = DEGRADED
    elif any(s.stage == PROBE.name and s.note for s in video_report.stages):
        video_report.status = "partial"
    elif any(s.status == "unavailable" or s.note for s in video_report.stages):
        video_report.status = "warning"
    _publish(video_report)
    if video_report.failed:
        raise IngestFailed(video_report)
    return video_report


def _probe_first(store: Store, settings: Settings, path: Path, video_id: str) -> None:
    """Register the video (probe) so every stage has its record; keep its path current.

    A video whose rows this machine did not make from its file (a bundle's, or a registration
    whose probe never finished) is replaced: its rows are deleted and every stage runs on the
    file, whose content hash is now known here.
    """
    existing = store.video_record(video_id)
    ledger = ledger_rows(store, video_id)
    if existing is not None and not earned(ledger.values(), PROBE.name):
        log.info("%s: replacing the rows of %s that were not made from this file", path, video_id[:12])
        store.delete_video(video_id)
        existing, ledger = None, {}
    probe_row = ledger.get(PROBE.name)
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
    why = _failure(future, path)
    return future.result() if why is None else StageResult(name, "failed", error=why)


def _failure(future: PrefectFuture[Any], path: Path) -> str | None:
    """Why a task run gave no value, in one line, once it is over (None: it gave one)."""
    future.wait()
    state = future.state
    if state.is_completed():
        return None
    error = future.result(raise_on_failure=False)
    return failure_reason(error, path) if isinstance(error, BaseException) else state.message or state.name


def _publish(video_report: VideoReport) -> None:
    """A per-video table of stages as a Prefect artifact (shown in the UI)."""
    publish_table(
        f"ingest-{(video_report.video_id or 'unknown')[:12]}",
        [s.model_dump() for s in video_report.stages],
        f"Ingestion of {video_report.path}: {video_report.status}",
    )


# ---------------------------------------------------------------------------- the library, once


class StepFailed(Exception):
    """A step of the library's ingestion that failed (hashing a file); ``reason`` is its one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class LibraryRunner:
    """How :func:`_ingest_library` runs its steps: Prefect tasks inside the ``ingest_library`` flow,
    or this process's threads without a server (:func:`ingest_direct`). Each step is started by one
    call and its outcome read by calling what that returns, so the runner decides what runs side by
    side while the outcomes are read, and reported, in the files' order."""

    #: Starts hashing a file; calling the result gives its content hash or raises :class:`StepFailed`.
    hash: Callable[[Path], Callable[[], str]]
    #: Starts ingesting a distinct video (its file, its content hash); calling the result gives its
    #: report, a failure included (:func:`_video_report`).
    video: Callable[[Path, str], Callable[[], VideoReport]]
    #: Compacts the tables and rebuilds the store's indexes.
    optimize: Callable[[], object]


def _ingest_library(paths: Sequence[str], run: LibraryRunner, optimize: bool) -> list[VideoReport]:
    """Every video under ``paths`` ingested the way ``run`` runs things; one report per file.

    A file that cannot be hashed, or whose content an earlier file has (a duplicate), is reported at
    once; the distinct videos are ingested, and with ``optimize`` the store is compacted when any
    was. Listeners hear of each file as it ends (:func:`_finished`).
    """
    files, reports = expand_paths(paths)
    for note in reports:
        _finished(note)
    hashing = [(path, run.hash(path)) for path in files]
    first_by_hash: dict[str, Path] = {}
    to_ingest: list[tuple[Path, str]] = []
    for path, hashed in hashing:
        try:
            digest = hashed()
        except StepFailed as failed:  # one unreadable file is its report, not the batch's end
            reports.append(VideoReport(path=str(path), status="failed", error=f"hash: {failed.reason}"))
            _finished(reports[-1])
            continue
        if digest in first_by_hash:
            duplicate = VideoReport(
                path=str(path), video_id=digest, status="duplicate", duplicate_of=str(first_by_hash[digest])
            )
            reports.append(duplicate)
            _finished(duplicate)
            continue
        first_by_hash[digest] = path
        to_ingest.append((path, digest))
    ingesting = [run.video(path, digest) for path, digest in to_ingest]
    reports.extend(outcome() for outcome in ingesting)
    if to_ingest and optimize:
        run.optimize()
    return reports


def _video_report(
    ingest: Callable[[], VideoReport], path: Path, video_id: str, *, log_failure: bool
) -> VideoReport:
    """One video's ingestion (``ingest``), its failure turned into its report, and listeners told
    it is done so its result shows before the batch ends. ``log_failure``: log a failure with its
    details (without Prefect; a failed flow run is logged by Prefect itself)."""
    try:
        result = ingest()
    except IngestFailed as failed:
        if log_failure:  # the user gets one line naming the log; the log gets the details
            log.error("ingestion of %s failed: %s", path, failed.report.error or failed, exc_info=True)
        result = failed.report
    except Exception as error:  # noqa: BLE001 — one failed file is a report, not a failed batch
        if log_failure:
            log.error("ingestion of %s failed", path, exc_info=True)
        result = VideoReport(
            path=str(path), video_id=video_id, status="failed", error=failure_reason(error, path)
        )
    _finished(result)
    return result


def _finished(video_report: VideoReport) -> None:
    """Tell listeners (the CLI) that one file is done, so its result shows before the batch ends."""
    report(video_report.video_id or "", "", "finished", report=video_report.model_dump())


# ---------------------------------------------------------------------------- with Prefect


@task(name="ingest", cache_policy=NO_CACHE, task_run_name="ingest · {path.name}")
def ingest_one(path: Path, video_id: str, settings: Settings) -> VideoReport:
    """Run ``ingest_video`` as a subflow and turn its failure into a report."""
    # Found by import, not by closure: on Dask or Ray this task is pickled by value, and a flow
    # pickled along with it loses the module globals its parameter annotations resolve against.
    from vidscope.flows import ingest as this_module

    # Called for its value, not with ``return_state``: Prefect then hands back the value the flow
    # returned (or re-raises what it raised) from memory, whereas reading a returned state's result
    # could raise ``MissingResult`` now and then under a server (seen in 1 of 4 nightly runs).
    subflow = partial(this_module.ingest_video, path, settings, video_id)
    return _video_report(subflow, path, video_id, log_failure=False)


@flow(name="ingest_library", flow_run_name="ingest library ({paths_count} inputs)")
def ingest_library(
    paths: Sequence[str],
    settings: Settings | None = None,
    paths_count: int = 0,
    optimize: bool = True,
) -> list[VideoReport]:
    """Ingest every video under ``paths`` (files, folders, globs); returns one report per file.

    Each file is hashed by a task of its own, each distinct video ingested by one (``ingest_one``,
    on the flow's task runner), and with ``optimize`` (the default) the store's indexes are rebuilt
    afterwards, as a task of its own.
    """
    settings = settings or get_settings()
    run = LibraryRunner(
        hash=_hash_as_task,
        video=lambda path, digest: ingest_one.submit(path, digest, settings).result,
        optimize=lambda: optimize_task(settings),
    )
    return _ingest_library(paths, run, optimize)


def _hash_as_task(path: Path) -> Callable[[], str]:
    future = hash_task.submit(path)

    def digest() -> str:
        why = _failure(future, path)
        if why is not None:
            raise StepFailed(why)
        return future.result()

    return digest


@task(name="optimize", cache_policy=NO_CACHE, task_run_name="optimize the store")
def optimize_task(settings: Settings) -> dict[str, str]:
    """Compact the tables and rebuild indexes after ingestion."""
    return optimize_store(settings)


def optimize_store(settings: Settings) -> dict[str, str]:
    """The store's ``optimize()``, yielding to another process optimizing it at the same moment.

    Two ingestions that end together (two hosts of a cluster) compact the same tables at once;
    Lance lets one compaction commit and refuses the other as a commit conflict, even after the
    store's retries (found by issue 42's cluster test: one of two overlapping ``vidscope ingest``
    commands failed). The winner does the work and the videos are stored either way, so the other
    logs it and returns instead of failing its ingestion.
    """
    try:
        return open_store(settings).optimize()
    except (OSError, RuntimeError, ValueError) as exc:
        if "commit conflict" not in str(exc).lower():
            raise
        log.warning("the store was being optimized by another process at the same time; left to it")
        return {"*": "left to another process optimizing at the same time"}


# ---------------------------------------------------------------------------- without Prefect


def ingest_direct(paths: Sequence[str], settings: Settings, *, optimize: bool = True) -> list[VideoReport]:
    """``ingest_library`` without Prefect: the same steps (:func:`_ingest_library`) on thread pools
    of this process (at most ``[ingest] concurrency`` videos at once, each video's independent
    stages side by side); files are hashed one after the other. Nothing here starts or needs a
    Prefect API server; the ledger records every stage."""
    with ThreadPoolExecutor(settings.ingest.concurrency, thread_name_prefix="vidscope-video") as videos:

        def video(path: Path, digest: str) -> Callable[[], VideoReport]:
            return videos.submit(ingest_one_direct, path, digest, settings).result

        run = LibraryRunner(
            hash=lambda path: partial(_hashed, path),
            video=video,
            optimize=lambda: optimize_store(settings),
        )
        return _ingest_library(paths, run, optimize)


def ingest_one_direct(path: Path, video_id: str, settings: Settings) -> VideoReport:
    """``ingest_one`` without Prefect: one video's ingestion in this process, its failure logged and
    turned into its report."""
    ingest = partial(ingest_video_direct, path, settings, video_id)
    return _video_report(ingest, path, video_id, log_failure=True)


def _hashed(path: Path) -> str:
    try:
        return content_hash(path)
    except Exception as exc:
        raise StepFailed(failure_reason(exc, path)) from exc


def ingest_video_direct(path: Path, settings: Settings, video_id: str | None = None) -> VideoReport:
    """``ingest_video`` without Prefect: its stages on a thread pool of this process, each retried
    ``[ingest] stage_retries`` times one second apart, as the flow's tasks are."""
    retries = settings.ingest.stage_retries
    # As many threads as stages: a stage waits only for what it needs, never for a free thread.
    with ThreadPoolExecutor(len(stages()), thread_name_prefix="vidscope-stage") as pool:

        def submit(stage: Stage, video_id: str, path: Path, settings: Settings) -> StageRun:
            future = pool.submit(retried, partial(run_stage, stage, video_id, path, settings), retries)
            return StageRun.of_future(future, lambda: _result_of(stage.name, future, path))

        return _ingest_video(Path(path), settings, video_id, submit, content_hash)


def _result_of(name: str, future: Future[StageResult], path: Path) -> StageResult:
    error = future.exception()
    if error is None:
        return future.result()
    return StageResult(name, "failed", error=failure_reason(error, path))


# ---------------------------------------------------------------------------- entry point

#: Seconds a temporary Prefect API server may take to start, when one is needed (a Dask or Ray
#: fan-out with no server running). Prefect's default, 20 s, is too short on a loaded machine.
EPHEMERAL_STARTUP_SECONDS = 600


def run_ingest(paths: Sequence[str], settings: Settings, *, optimize: bool = True) -> list[VideoReport]:
    """Entry point for the CLI: ``ingest_library`` on the configured task runner.

    ``[ingest] task_runner`` picks where the videos fan out: ``threads`` (this process, at most
    ``concurrency`` at once), ``dask`` (a local cluster of ``dask_workers`` processes, or the
    scheduler at ``dask_address``) or ``ray`` (local, or the cluster at ``ray_address``). Each
    worker process opens its own store; concurrent Lance commits are retried by the store.

    With ``threads``, the flows run only when a Prefect server records them
    (:func:`~vidscope.flows.prefect_api.reachable_api`) or when this is a subflow (the nightly
    flow); otherwise :func:`ingest_direct` does the same work without Prefect. Dask and Ray need
    Prefect's task runners: without a server, Prefect's temporary one is given
    :data:`EPHEMERAL_STARTUP_SECONDS` to start.
    """
    from vidscope.agents.tools import in_flow_run
    from vidscope.flows.prefect_api import reachable_api

    limit_malloc()
    config = settings.ingest
    api = None if in_flow_run() else reachable_api(settings)
    if config.task_runner == "threads" and api is None and not in_flow_run():
        return ingest_direct(paths, settings, optimize=optimize)
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
    with patient_prefect(api):
        return library(list(paths), settings, paths_count=len(paths), optimize=optimize)


@contextmanager
def patient_prefect(api: str | None) -> Iterator[None]:
    """Report to ``api`` (the server found), or give a temporary server the time it needs."""
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
        temporary_settings,
    )

    if api:
        updates: dict[Any, Any] = {PREFECT_API_URL: api}
    else:
        wait = max(EPHEMERAL_STARTUP_SECONDS, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value())
        updates = {PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS: wait}
    with temporary_settings(updates):
        yield
