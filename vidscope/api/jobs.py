"""Ingestion jobs started over HTTP: queued, run one at a time in a background thread, observable."""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from vidscope.core.settings import Settings

JobState = Literal["queued", "running", "done", "failed"]


class StageEvent(BaseModel):
    """The latest progress event of one stage of one video."""

    video_id: str
    stage: str
    event: str
    done: float | None = None
    total: float | None = None


class IngestJob(BaseModel):
    """One ``POST /api/ingest`` request and what became of it."""

    job_id: str
    state: JobState = "queued"
    files: list[str] = Field(default_factory=list, description="Files handed to ingestion.")
    refused: dict[str, str] = Field(
        default_factory=dict, description="Requested paths that were refused, with the reason."
    )
    submitted_at: datetime
    finished_at: datetime | None = None
    error: str | None = None
    reports: list[dict[str, Any]] = Field(
        default_factory=list, description="One ingestion report per file (VideoReport)."
    )
    progress: list[StageEvent] = Field(
        default_factory=list, description="Latest event per video and stage while running."
    )


class IngestJobs:
    """Runs ingestion jobs sequentially (ingestion already fans out per video; the CPU is shared)."""

    def __init__(self, settings: Settings, keep: int = 100) -> None:
        self.settings = settings
        self.keep = keep
        self._jobs: OrderedDict[str, IngestJob] = OrderedDict()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vidscope-ingest")

    def submit(self, files: list[Path], refused: dict[str, str]) -> IngestJob:
        """Queue ``files`` for ingestion (``refused`` records what was not accepted, and why)."""
        job = IngestJob(
            job_id=uuid.uuid4().hex[:16],
            files=[str(f) for f in files],
            refused=refused,
            submitted_at=datetime.now(UTC),
        )
        with self._lock:
            self._jobs[job.job_id] = job
            while len(self._jobs) > self.keep:
                self._jobs.popitem(last=False)
        self._pool.submit(self._run, job.job_id)
        return self.get(job.job_id) or job

    def get(self, job_id: str) -> IngestJob | None:
        """A snapshot of the job ``job_id`` (None if unknown or forgotten)."""
        with self._lock:
            job = self._jobs.get(job_id)
            return job.model_copy(deep=True) if job else None

    def all(self) -> list[IngestJob]:
        """Snapshots of the remembered jobs, newest first."""
        with self._lock:
            return [j.model_copy(deep=True) for j in reversed(self._jobs.values())]

    def busy(self) -> bool:
        """Whether a job is queued or running."""
        with self._lock:
            return any(j.state in ("queued", "running") for j in self._jobs.values())

    def shutdown(self) -> None:
        """Stop taking jobs; a running one finishes in the background."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _update(self, job_id: str, *, finished: bool = False, **fields: Any) -> None:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                return
            for key, value in fields.items():
                setattr(job, key, value)
            if finished:
                job.finished_at = datetime.now(UTC)

    def _on_event(self, job_id: str, event: dict[str, Any]) -> None:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or not event.get("video_id"):
                return
            latest = StageEvent(
                video_id=event["video_id"],
                stage=event["stage"],
                event=event["event"],
                done=event.get("done"),
                total=event.get("total"),
            )
            job.progress = [
                e for e in job.progress if (e.video_id, e.stage) != (latest.video_id, latest.stage)
            ] + [latest]

    def _run(self, job_id: str) -> None:
        from vidscope.library import Library

        job = self.get(job_id)
        if job is None:
            return
        self._update(job_id, state="running")
        try:
            library = Library(settings=self.settings)
            reports = library.ingest(job.files, progress=lambda event: self._on_event(job_id, event))
        except Exception as exc:  # a job reports its failure; the server keeps running
            self._update(job_id, state="failed", error=f"{type(exc).__name__}: {exc}", finished=True)
            return
        failed = any(r.failed for r in reports)
        self._update(
            job_id,
            state="failed" if failed else "done",
            reports=[r.model_dump(mode="json") for r in reports],
            error="some files failed (see reports)" if failed else None,
            finished=True,
        )
