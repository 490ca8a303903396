"""What an ingest has to do, decided before any flow runs: the files, and which are up to date.

:func:`plan_ingest` expands the inputs (:func:`expand_paths`), hashes each file (the video id, as the
flow does) and asks the ledger whether every stage is current for it with these settings
(:func:`~vidscope.tasks.stages.stages_to_run`, the test each stage makes before it runs). A folder
whose files are all up to date is therefore answered in a second or two without Prefect: no flow
run, no temporary API server. Only the rest goes to :func:`vidscope.flows.ingest.run_ingest`.

This module imports no Prefect, and the stages only when it plans (the CLI imports it for
``--help``); the reports it makes are the ones the flows return.
"""

from __future__ import annotations

import glob
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from vidscope.core.settings import Settings
    from vidscope.storage import Store

#: The status of a file every stage of which is current: nothing to do.
UP_TO_DATE = "up to date"

#: The status of a file ingested with a failed optional stage (:attr:`vidscope.tasks.stage.Stage.optional`):
#: searchable and answerable, without that stage's rows. Not a failure; ``vidscope ingest`` says so.
DEGRADED = "degraded"

#: File extensions picked up when a folder is given.
VIDEO_EXTENSIONS = {
    ".mp4",
    ".mkv",
    ".mov",
    ".avi",
    ".webm",
    ".m4v",
    ".mpg",
    ".mpeg",
    ".ts",
    ".wmv",
    ".flv",
}


class StageReport(BaseModel):
    stage: str
    status: str
    rows: int = 0
    seconds: float = 0.0
    error: str | None = None
    note: str | None = None  # what the stage could not read (corrupt packets, a truncated file)
    optional: bool = False  # an enrichment: failing (or blocked) leaves the video usable


class VideoReport(BaseModel):
    """What ingestion did with one file. Reasons never repeat the file's name: it is ``path``."""

    path: str
    video_id: str | None = None
    status: str = "ok"  # ok | failed | degraded | duplicate | warning | partial
    error: str | None = None
    duplicate_of: str | None = None
    stages: list[StageReport] = Field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def optional_failures(self) -> list[StageReport]:
        """The optional stages that failed or were blocked (the video is usable without them)."""
        return [s for s in self.stages if s.optional and s.status in ("failed", "blocked")]

    def reasons(self) -> str:
        """Why the file failed or is incomplete, as ``stage: reason; …`` (empty when all went well)."""
        if self.error:
            return self.error
        parts = [
            f"{s.stage}: {s.error}"
            for s in self.stages
            if s.status in ("failed", "blocked", "unavailable", "interrupted") and s.error
        ]
        parts += [f"{s.stage}: {s.note}" for s in self.stages if s.note]
        return "; ".join(parts)


# ---------------------------------------------------------------------------- paths


def expand_paths(inputs: Iterable[str | Path]) -> tuple[list[Path], list[VideoReport]]:
    """Files from files, folders (recursive, video extensions) and glob patterns, de-duplicated.

    Returns the files and a report for every input that matched nothing or repeats an earlier one.
    """
    files: list[Path] = []
    notes: list[VideoReport] = []
    seen: dict[Path, Path] = {}

    def add(path: Path) -> None:
        resolved = path.resolve()
        if resolved in seen:
            notes.append(
                VideoReport(
                    path=str(path),
                    status="duplicate",
                    duplicate_of=str(seen[resolved]),
                    error="listed more than once",
                )
            )
        else:
            seen[resolved] = path
            files.append(path)

    for item in inputs:
        path = Path(item).expanduser()
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                if child.is_file() and child.suffix.lower() in VIDEO_EXTENSIONS:
                    add(child)
        elif path.exists():
            add(path)
        elif any(ch in str(item) for ch in "*?["):
            matches = sorted(Path(p) for p in glob.glob(str(path), recursive=True))
            if not matches:
                notes.append(
                    VideoReport(path=str(item), status="failed", error="no file matches this pattern")
                )
            for match in matches:
                if match.is_file():
                    add(match)
        else:
            notes.append(VideoReport(path=str(item), status="failed", error="no such file or folder"))
    return files, notes


# ---------------------------------------------------------------------------- plan


@dataclass
class IngestPlan:
    """What :func:`plan_ingest` found: inputs settled without a run, and files a run must ingest."""

    settled: list[VideoReport] = field(default_factory=list)  # up to date, duplicates, missing inputs
    pending: list[Path] = field(default_factory=list)
    ids: dict[str, Path] = field(default_factory=dict)  # video id -> pending file (the bars' names)
    known: set[str] = field(default_factory=set)  # pending videos the ledger knows: updates, not new


def plan_ingest(inputs: Sequence[str | Path], settings: Settings, store: Store) -> IngestPlan:
    """Split ``inputs`` into what is settled already and what a flow run must ingest.

    A file is up to date when its video is registered at this path and every stage is current
    for it (same stage version, same settings, same upstream rows); a changed file has another
    content hash, hence another video id, and is new. A file that cannot be hashed is left to the
    run, which reports it as it reports any failure.
    """
    from vidscope.tasks.probe import content_hash

    plan = IngestPlan()
    files, plan.settled = expand_paths(inputs)
    first: dict[str, Path] = {}
    for path in files:
        try:
            video_id = content_hash(path)
        except (OSError, ValueError):
            plan.pending.append(path)
            continue
        if video_id in first:  # the same content twice: the run (or this plan) names the first
            if first[video_id] in plan.pending:
                plan.pending.append(path)
            else:
                plan.settled.append(
                    VideoReport(
                        path=str(path),
                        video_id=video_id,
                        status="duplicate",
                        duplicate_of=str(first[video_id]),
                    )
                )
            continue
        first[video_id] = path
        report = up_to_date(store, settings, video_id, path)
        if report is not None:
            plan.settled.append(report)
            continue
        plan.pending.append(path)
        plan.ids[video_id] = path
        if store.video_record(video_id) is not None:
            plan.known.add(video_id)
    return plan


def up_to_date(store: Store, settings: Settings, video_id: str, path: Path) -> VideoReport | None:
    """The report of an ingest of ``path`` that would run no stage, or ``None`` when one would run.

    A video registered under another path is not up to date: the run records where it is now. Nor
    is one whose rows were not made here from its file (a bundle's): the run replaces them.
    """
    from vidscope.storage.ledger import earned
    from vidscope.tasks.probe import PROBE
    from vidscope.tasks.stage import ledger_rows
    from vidscope.tasks.stages import stages, stages_to_run

    record = store.video_record(video_id)
    if record is None or record.path != str(path.resolve()) or stages_to_run(store, settings, video_id):
        return None
    ledger = ledger_rows(store, video_id)
    if not earned(ledger.values(), PROBE.name):
        return None
    return VideoReport(
        path=str(path),
        video_id=video_id,
        status=UP_TO_DATE,
        stages=[
            StageReport(stage=stage.name, status="cached", rows=ledger[stage.name].get("rows") or 0)
            for stage in stages()
        ],
    )
