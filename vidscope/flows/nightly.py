"""The nightly ingestion flow: scan the watch folders and ingest what is new or changed.

A video is *new* when its content hash was not in the store before the run, *changed* when it was
but some stage had work to do (a failed or missing stage, or a stage whose settings or model
changed: the ledger knows), and *unchanged* when every stage was already current. The counts and
one row per video are published as a table artifact of the flow run (``nightly-ingest``), and what
the library gained in the last ``digest_since`` (default a day: the videos ingested, each with its
summary and chapter titles; :func:`vidscope.flows.summarize.read_digest`) as a Markdown artifact
(``nightly-digest``) for whoever reads the UI in the morning.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from pathlib import Path

from prefect import flow
from pydantic import BaseModel, Field

from vidscope.core.settings import Settings, get_settings
from vidscope.flows.ingest import VideoReport, run_ingest
from vidscope.flows.runs import publish_markdown, publish_table
from vidscope.flows.summarize import digest_markdown, parse_since, read_digest
from vidscope.models.open_store import open_store

log = logging.getLogger(__name__)

#: Stage statuses that mean the stage did work in this run.
_WORK_STATUSES = {"done", "failed", "blocked"}
#: How a video-level failure reads when the Prefect API could not be reached (httpx's errors).
_API_ERRORS = ("ConnectError", "ConnectTimeout", "RemoteProtocolError", "ReadError")
#: Attempts again for videos that failed because the API was away, and how long to wait for it.
API_RETRIES = 2
API_WAIT_SECONDS = 300.0


class NightlySummary(BaseModel):
    """What one nightly run found and did."""

    folders: list[str]
    missing_folders: list[str] = Field(default_factory=list)
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    failed: int = 0
    duplicates: int = 0
    videos: list[dict[str, str]] = Field(default_factory=list)
    digest_videos: int = Field(0, description="Videos in the published digest's window.")
    reports: list[VideoReport] = Field(default_factory=list)


def classify(report: VideoReport, known: set[str]) -> str:
    """``new``, ``changed``, ``unchanged``, ``failed`` or ``duplicate`` for one video report."""
    if report.status == "duplicate":
        return "duplicate"
    if report.failed:
        return "failed"
    if report.video_id not in known:
        return "new"
    if any(s.status in _WORK_STATUSES for s in report.stages):
        return "changed"
    return "unchanged"


def _run_name() -> str:
    return f"nightly {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"


@flow(name="nightly-ingest", flow_run_name=_run_name, validate_parameters=False, log_prints=False)
def nightly(
    folders: list[str] | None = None, settings: Settings | None = None, digest_since: str = "1d"
) -> NightlySummary:
    """Ingest new or changed videos under ``folders`` (default: ``[server] watch_folders``), then
    publish the digest of what the library gained in the last ``digest_since`` (1d, 12h, …)."""
    settings = settings or get_settings()
    window = parse_since(digest_since)  # a bad window fails the run before any work
    wanted = [str(Path(f).expanduser()) for f in (folders or settings.server.watch_folders)]
    present = [f for f in wanted if Path(f).is_dir()]
    summary = NightlySummary(folders=wanted, missing_folders=[f for f in wanted if f not in present])
    for folder in summary.missing_folders:
        log.warning("watch folder %s does not exist; skipped", folder)
    if present:
        store = open_store(settings)
        known = set(store.rows(store.videos, columns=["video_id"]).column("video_id").to_pylist())
        for report in _ingest_through_api_outages(present, settings):
            kind = classify(report, known)
            if kind == "duplicate":
                summary.duplicates += 1
            else:
                setattr(summary, kind, getattr(summary, kind) + 1)
            summary.videos.append(
                {"path": report.path, "result": kind, "error": report.error or _stage_errors(report)}
            )
            summary.reports.append(report)
    _publish(summary)
    digest = read_digest(open_store(settings), window)
    summary.digest_videos = digest.count
    publish_markdown(
        "nightly-digest",
        digest_markdown(digest),
        f"What the library gained in the last {digest_since}: {digest.count} video(s)",
    )
    return summary


def _lost_the_api(report: VideoReport) -> bool:
    """The video's ingestion never ran because the Prefect API did not answer (the server or its
    database restarting): a video-level connection error. (A stage's own failures, such as a model
    endpoint that is down, are stage errors, not this.)"""
    return report.failed and (report.error or "").startswith(_API_ERRORS)


def _ingest_through_api_outages(folders: list[str], settings: Settings) -> list[VideoReport]:
    """``run_ingest``; then the videos that failed because the Prefect API was away are ingested
    again once it answers (up to :data:`API_RETRIES` times). Found by the cluster test (issue 42):
    a server restart in the middle of a nightly run failed every video started meanwhile -- a new
    Prefect client does not retry a refused connection -- though the next run would have done them.
    The ledger makes the second attempt do only what is missing."""
    from vidscope.flows.prefect_api import configured_api_url, is_healthy

    reports = run_ingest(folders, settings)
    for _ in range(API_RETRIES):
        lost = [r.path for r in reports if _lost_the_api(r)]
        api = configured_api_url()
        if not lost or not api:
            break
        log.warning("%d video(s) failed while the Prefect API was away; trying them again", len(lost))
        deadline = time.monotonic() + API_WAIT_SECONDS
        while not is_healthy(api) and time.monotonic() < deadline:
            time.sleep(2)
        again = {r.path: r for r in run_ingest(lost, settings)}
        reports = [again.get(r.path, r) for r in reports]
    return reports


def _stage_errors(report: VideoReport) -> str:
    return "; ".join(f"{s.stage}: {s.error}" for s in report.stages if s.error)


def _publish(summary: NightlySummary) -> None:
    """The per-video results as a table artifact; the counts in its description."""
    counts = (
        f"new {summary.new}, changed {summary.changed}, unchanged {summary.unchanged}, "
        f"failed {summary.failed}, duplicates {summary.duplicates}"
    )
    if summary.missing_folders:
        counts += f"; missing folders: {', '.join(summary.missing_folders)}"
    publish_table(
        "nightly-ingest",
        summary.videos or [{"path": "", "result": "no videos found", "error": ""}],
        f"Nightly ingestion of {', '.join(summary.folders) or '(no folders)'}: {counts}",
    )
