"""``/api/ingest``: queue files or folders under the video roots for ingestion, and follow the jobs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from fastapi import HTTPException
from fastapi import Path as PathParam

from vidscope.api.jobs import IngestJob
from vidscope.api.models import IngestRequest
from vidscope.api.routes import guarded_router
from vidscope.api.security import InvalidPath, PathNotAllowed, VideoRoots
from vidscope.api.state import State

JobId = Annotated[str, PathParam(pattern=r"^[0-9a-f]{16}$")]

router = guarded_router()


@dataclass
class _Selection:
    """The files accepted for ingestion and the requested paths refused (with the reason)."""

    accepted: list[Path] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    #: Whether a refusal was about access (a 403), not a missing file (a 404).
    forbidden: bool = False

    def refuse(self, path: str, reason: str, *, forbidden: bool = False) -> None:
        """Record that ``path`` is not ingested, and why."""
        self.refused[path] = reason
        self.forbidden = self.forbidden or forbidden


def _select(paths: list[str], roots: VideoRoots) -> _Selection:
    """Resolve each requested path under ``roots`` and expand folders into their video files."""
    from vidscope.flows.ingest import expand_paths

    selection = _Selection()
    for item in paths:
        if any(ch in item for ch in "*?["):
            selection.refuse(
                item, "glob patterns are not accepted over HTTP; name files or folders", forbidden=True
            )
            continue
        try:
            resolved = roots.resolve(item)
        except PathNotAllowed as exc:
            selection.refuse(item, str(exc), forbidden=True)
            continue
        except InvalidPath as exc:
            selection.refuse(item, str(exc))
            continue
        if not resolved.exists():
            selection.refuse(item, "no such file or folder")
            continue
        files, notes = expand_paths([resolved])
        for note in notes:
            selection.refuse(note.path, note.error or note.status)
        if not files and not notes:
            selection.refuse(item, "no video files in this folder")
        for file in files:
            # A folder may hold symlinks that lead out of the roots: check every file again.
            if roots.allows(file):
                selection.accepted.append(file.resolve())
            else:
                selection.refuse(str(file), "outside the configured video roots (symlink?)", forbidden=True)
    return selection


@router.post(
    "/ingest",
    response_model=IngestJob,
    status_code=202,
    responses={
        403: {"description": "Nothing to ingest: a path is outside the roots or a glob."},
        404: {"description": "Nothing to ingest: no such file, or no video in the folder."},
    },
    tags=["ingestion"],
)
def ingest(body: IngestRequest, state: State) -> IngestJob:
    """Queue files or folders (under the video roots) for ingestion; poll the returned job.

    Paths may be absolute or relative to a video root. Paths that cannot be ingested are listed
    in the job's ``refused``; when nothing is left to ingest the request fails (403 or 404).
    """
    selection = _select(body.paths, state.roots.snapshot())
    if not selection.accepted:
        reasons = "; ".join(f"{path}: {why}" for path, why in selection.refused.items())
        raise HTTPException(403 if selection.forbidden else 404, f"nothing to ingest: {reasons}")
    return state.jobs.submit(sorted(set(selection.accepted)), selection.refused)


@router.get("/ingest", response_model=list[IngestJob], tags=["ingestion"])
def list_jobs(state: State) -> list[IngestJob]:
    """The ingestion jobs this server remembers, newest first."""
    return state.jobs.all()


@router.get(
    "/ingest/{job_id}",
    response_model=IngestJob,
    responses={404: {"description": "Unknown job."}},
    tags=["ingestion"],
)
def get_job(job_id: JobId, state: State) -> IngestJob:
    """One ingestion job: state, per-stage progress while running, reports when finished."""
    job = state.jobs.get(job_id)
    if job is None:
        raise HTTPException(404, f"no ingestion job {job_id}")
    return job
