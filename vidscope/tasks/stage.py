"""The ingestion stage contract and its ledger bookkeeping.

A stage is declared once (:class:`Stage`): a name, a version, the stages it needs, the settings it
depends on, and a ``run`` function. Its *cache key* is a fingerprint of (stage, version, its
settings, and the ledger rows of the stages it reads), recorded in the ledger with the outcome. A
stage runs again only when its ledger row is missing, not ``done``/``skipped``, or carries another
fingerprint, so a re-run does only what is missing, failed or changed — and an upstream stage that
re-ran (new output) makes its readers re-run too.
"""

from __future__ import annotations

import errno
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vidscope.core.errors import BackendUnavailable, VidscopeError
from vidscope.core.hashing import stable_hash
from vidscope.core.settings import Settings
from vidscope.models import registry
from vidscope.models.open_store import open_store
from vidscope.storage import Store
from vidscope.storage.ledger import (
    STATUS_DONE,
    STATUS_FAILED,
    STATUS_INTERRUPTED,
    STATUS_RUNNING,
    STATUS_SKIPPED,
    owner,
    shown_status,
)
from vidscope.storage.videos import VideoRecord
from vidscope.tasks.memory import release_free_memory
from vidscope.tasks.progress import report

log = logging.getLogger(__name__)

#: A stage that could not run because an optional model is not installed. Not a failure of the
#: video (the CLI warns instead of failing), but not current either: the next run retries it.
STATUS_UNAVAILABLE = "unavailable"
CURRENT_STATUSES = (STATUS_DONE, STATUS_SKIPPED)


@dataclass
class StageContext:
    """What a stage's ``run`` gets: the settings, the store, the video and where its file is now."""

    settings: Settings
    store: Store
    video: VideoRecord
    path: Path

    def progress(self, stage: str, done: float, total: float | None = None) -> None:
        """Report progress of ``stage`` on this video to whoever listens (the CLI's bars)."""
        report(self.video.video_id, stage, "progress", done=done, total=total)


@dataclass
class StageOutcome:
    """What a stage did: rows written, and details for the ledger and the CLI."""

    rows: int
    status: str = STATUS_DONE
    details: dict[str, Any] = field(default_factory=dict)


class StageNotApplicable(Exception):
    """Raised by a stage that does not apply to this video (e.g. speech on a silent video)."""


@dataclass(frozen=True)
class Stage:
    """One ingestion stage.

    ``needs`` must be current before the stage can run; ``reads`` are used when available (their
    failure does not block this stage, but their output is part of this stage's cache key).

    ``optional`` marks an enrichment whose failure leaves the video usable (issue 37): the stage
    is recorded failed in the ledger with its reason, as any stage, but the video counts as
    ingested (``degraded``, :data:`~vidscope.flows.ingest_plan.DEGRADED`) and questions run
    without its rows; the tools that read them say they are missing. A required stage failing
    still fails the video. :mod:`vidscope.tasks.stages` says which stages are optional and why.
    """

    name: str
    version: int
    run: Callable[[StageContext], StageOutcome]
    config: Callable[[Settings], Any]
    needs: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    description: str = ""
    optional: bool = False

    def fingerprint(self, settings: Settings, upstream: dict[str, dict[str, Any]]) -> str:
        """The cache key: this stage's version and settings plus the upstream ledger rows it uses."""
        used = {
            name: {k: upstream[name].get(k) for k in ("config_hash", "status", "rows", "finished_at")}
            for name in (*self.needs, *self.reads)
            if name in upstream
        }
        return stable_hash(self.name, self.version, self.config(settings), used)


def role_config(settings: Settings, role: str, key: str) -> dict[str, Any]:
    """``{key: <model spec of role>, "options": <its backend options>}``: the part of a stage's
    cache key that says which model it ran, so changing the model or its options re-runs it.

    The spec is the one that really serves the role (its fallback's when unset), so an unset
    ``planner`` keys exactly as ``chat`` did before the role existed: nothing re-runs."""
    spec = registry.effective_spec(settings, role)
    return {key: spec, "options": registry.backend_options(settings, spec)}


def ledger_rows(store: Store, video_id: str) -> dict[str, dict[str, Any]]:
    """The ledger of one video, by stage name (a stage whose process died reads ``interrupted``)."""
    rows = store.rows(store.ledger, video_id=video_id).to_pylist()
    return {row["stage"]: {**row, "status": shown_status(row)} for row in rows}


def stage_failure(store: Store, video_id: str, stage: str) -> str | None:
    """The reason ``stage`` failed on ``video_id`` (its ledger row's error), or None when it did not
    fail: what a tool reading an optional stage's rows says when they are missing (issue 37)."""
    rows = store.rows(store.ledger, video_id=video_id, where=f"stage = '{stage}'").to_pylist()
    failed = [r for r in rows if r["status"] == STATUS_FAILED]
    return (failed[0]["error"] or "no reason recorded") if failed else None


def failure_reason(exc: BaseException, path: Path | str | None = None) -> str:
    """One line for the user: an expected error's own message, else the exception type and text.

    The file is named once by whoever prints the line, so a leading ``<path>: `` is dropped.
    """
    reason = getattr(exc, "reason", None)
    if _disk_full(exc):
        text = "no space left on device (free some room on the data dir's disk, then run it again)"
    elif isinstance(reason, str) and reason:
        text = reason
    elif isinstance(exc, (VidscopeError, OSError, ValueError)) and str(exc):
        text = str(exc)
    else:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if path is not None:
        for prefix in (f"{path}: ", f"{Path(path).name}: "):
            text = text.removeprefix(prefix)
    lines = text.strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that found no room: an ``OSError`` (ENOSPC, EDQUOT) or LanceDB's
    own error, whose text ends in a Rust source path ("… (os error 28), /root/.cargo/…")."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return isinstance(exc, RuntimeError) and f"(os error {errno.ENOSPC})" in str(exc)


# Stages running in this process, so a signal handler can mark them interrupted before exiting.
_running: dict[tuple[str, str], Callable[[str], None]] = {}
_running_lock = threading.Lock()


def interrupt_running(reason: str) -> int:
    """Mark every stage this process is running as ``interrupted`` (``reason`` as its error).

    Called when a signal stops ingestion: the stages are abandoned, not finished, and the next
    run redoes them. Returns how many were marked.
    """
    with _running_lock:
        marks = list(_running.values())
        _running.clear()
    for mark in marks:
        try:
            mark(reason)
        except Exception as exc:  # the process is stopping; a dead-owner check still covers it
            log.warning("could not mark a stage interrupted: %s", exc)
    return len(marks)


def is_current(row: dict[str, Any] | None, stage: Stage, fingerprint: str) -> bool:
    """Whether a ledger row says ``stage`` is done for this fingerprint."""
    return (
        row is not None
        and row["status"] in CURRENT_STATUSES
        and row["stage_version"] == stage.version
        and row["config_hash"] == fingerprint
    )


def _ledger_write(
    store: Store,
    video_id: str,
    stage: Stage,
    fingerprint: str,
    status: str,
    started: datetime,
    *,
    error: str | None = None,
    rows: int | None = None,
    seconds: float | None = None,
    details: dict[str, Any] | None = None,
) -> None:
    finished = None if status == STATUS_RUNNING else datetime.now(UTC)
    store.upsert(
        store.ledger,
        [
            {
                "video_id": video_id,
                "stage": stage.name,
                "stage_version": stage.version,
                "config_hash": fingerprint,
                "status": status,
                "error": error,
                "started_at": started,
                "finished_at": finished,
                "seconds": seconds,
                "rows": rows,
                "details_json": json.dumps(details, default=str) if details else None,
            }
        ],
    )


@dataclass
class StageResult:
    """The outcome of :func:`execute` as the flow sees it."""

    stage: str
    status: str  # done | skipped | cached | failed | unavailable | blocked
    rows: int = 0
    seconds: float = 0.0
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def execute(stage: Stage, ctx: StageContext) -> StageResult:
    """Run ``stage`` for ``ctx.video`` unless the ledger says it is current; record the outcome.

    Raises after recording a failure, so the caller (a Prefect task) can retry. The ledger keeps
    the error text; nothing other stages stored is touched.
    """
    store, video_id = ctx.store, ctx.video.video_id
    ledger = ledger_rows(store, video_id)
    blocked = [n for n in stage.needs if ledger.get(n, {}).get("status") not in CURRENT_STATUSES]
    if blocked:
        report(video_id, stage.name, "blocked")
        return StageResult(stage.name, "blocked", error=f"needs {', '.join(blocked)}")
    fingerprint = stage.fingerprint(ctx.settings, ledger)
    if is_current(ledger.get(stage.name), stage, fingerprint):
        row = ledger[stage.name]
        report(video_id, stage.name, "cached")
        return StageResult(stage.name, "cached", rows=row["rows"] or 0)

    started = datetime.now(UTC)
    clock = time.perf_counter()
    _ledger_write(store, video_id, stage, fingerprint, STATUS_RUNNING, started, details=owner())
    report(video_id, stage.name, "started")

    def mark_interrupted(reason: str) -> None:
        seconds = time.perf_counter() - clock
        _ledger_write(
            store, video_id, stage, fingerprint, STATUS_INTERRUPTED, started, error=reason, seconds=seconds
        )
        report(video_id, stage.name, STATUS_INTERRUPTED, error=reason)

    key = (video_id, stage.name)
    with _running_lock:
        _running[key] = mark_interrupted
    try:
        return _run_and_record(stage, ctx, fingerprint, started, clock)
    finally:
        with _running_lock:
            _running.pop(key, None)


def _run_and_record(
    stage: Stage, ctx: StageContext, fingerprint: str, started: datetime, clock: float
) -> StageResult:
    store, video_id = ctx.store, ctx.video.video_id
    try:
        outcome = stage.run(ctx)
    except StageNotApplicable as exc:
        outcome = StageOutcome(rows=0, status=STATUS_SKIPPED, details={"reason": str(exc)})
    except BackendUnavailable as exc:
        seconds = time.perf_counter() - clock
        _ledger_write(
            store,
            video_id,
            stage,
            fingerprint,
            STATUS_UNAVAILABLE,
            started,
            error=str(exc),
            seconds=seconds,
        )
        report(video_id, stage.name, "unavailable", error=str(exc))
        return StageResult(stage.name, STATUS_UNAVAILABLE, seconds=seconds, error=str(exc))
    except Exception as exc:
        seconds = time.perf_counter() - clock
        message = failure_reason(exc, ctx.path)
        # The whole traceback goes to the log (the CLI sends it to a file, Prefect to its UI).
        log.error("stage %s failed on %s (%s)", stage.name, video_id[:12], ctx.path.name, exc_info=True)
        _ledger_write(
            store,
            video_id,
            stage,
            fingerprint,
            STATUS_FAILED,
            started,
            error=message,
            seconds=seconds,
        )
        report(video_id, stage.name, "failed", error=message)
        raise
    seconds = time.perf_counter() - clock
    release_free_memory()  # the stage's buffers are garbage now; keeps long ingestions lean
    _ledger_write(
        store,
        video_id,
        stage,
        fingerprint,
        outcome.status,
        started,
        rows=outcome.rows,
        seconds=seconds,
        details=outcome.details,
    )
    report(video_id, stage.name, outcome.status, rows=outcome.rows)
    return StageResult(
        stage.name, outcome.status, rows=outcome.rows, seconds=seconds, details=outcome.details
    )


def run_stage(stage: Stage, video_id: str, path: Path, settings: Settings) -> StageResult:
    """The body of every stage's Prefect task: run ``stage`` for a registered video.

    Opens the process-wide store itself (a task may run in a Dask or Ray worker that has none yet).
    """
    store = open_store(settings)
    record = store.video_record(video_id)
    if record is None:
        raise LookupError(f"video {video_id[:12]} is not registered (probe first)")
    ctx = StageContext(settings=settings, store=store, video=record, path=path)
    return execute(stage, ctx)
