"""``/api/videos``: the library, each video's stage ledger, its thumbnails and its file for playback.

Playback: ``GET /api/videos/{id}/stream`` serves the file with HTTP byte ranges (``Range`` → 206
with ``Content-Range``), which is what browsers need to seek. A *time* range is the player's side:
load ``…/stream#t=START,END`` (a media fragment) or set ``currentTime``, as the page does. Files
are only ever read from under ``[api] video_roots``.
"""

from __future__ import annotations

import json
import mimetypes
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import HTTPException, Query, Response
from fastapi import Path as PathParam
from fastapi.responses import FileResponse

from vidscope.api.models import StageState, VideoDetail, VideoSummary
from vidscope.api.routes import guarded_router
from vidscope.api.security import VideoRoots
from vidscope.api.state import ApiState, State
from vidscope.flows.summarize import Digest, TranscriptLine, VideoOverview

if TYPE_CHECKING:
    from vidscope.storage import Store

VideoId = Annotated[
    str,
    PathParam(pattern=r"^[0-9a-f]{6,64}$", description="Video id or a 6+ character prefix of it."),
]

router = guarded_router()


#: A video's ledger entries by stage name (:func:`vidscope.tasks.stage.ledger_rows`).
Ledger = dict[str, dict[str, Any]]


def _ledger(store: Store, video_id: str) -> Ledger:
    from vidscope.tasks.stage import ledger_rows

    return ledger_rows(store, video_id)


def _summary_fields(row: dict[str, Any], ledger: Ledger, store: Store, roots: VideoRoots) -> dict[str, Any]:
    """The :class:`VideoSummary` fields of the video ``row``, with each stage's ledger status."""
    from vidscope.tasks.stages import stage_names

    why_not = roots.unplayable(row["path"])
    return {
        "video_id": row["video_id"],
        "file_name": row["file_name"],
        "duration": row["duration"],
        "width": row["width"],
        "height": row["height"],
        "fps": row["fps"],
        "has_audio": row["has_audio"],
        "added_at": row["added_at"].isoformat() if row.get("added_at") else None,
        "clips": store.count(store.clips, row["video_id"]),
        "playable": why_not is None,
        "unplayable": why_not,
        "stages": {name: ledger.get(name, {}).get("status", "pending") for name in stage_names()},
    }


def _stage_states(ledger: Ledger) -> list[StageState]:
    """Every ingestion stage in pipeline order, from its ``ledger`` entry if it has one."""
    from vidscope.tasks.stages import stage_names

    states = []
    for name in stage_names():
        entry = ledger.get(name)
        if entry is None:
            states.append(StageState(stage=name, status="pending"))
            continue
        note = entry.get("error") or ""
        if not note and entry.get("details_json"):
            note = str(json.loads(entry["details_json"]).get("reason", ""))
        states.append(
            StageState(
                stage=name,
                status=entry["status"],
                rows=entry.get("rows"),
                seconds=entry.get("seconds"),
                note=note,
            )
        )
    return states


def _video_row(state: ApiState, ref: str) -> dict[str, Any]:
    """The stored row of the video ``ref`` names; 404 when none (or several) match."""
    from vidscope.storage.videos import VideoNotFound

    try:
        return state.library().video(ref).model_dump()
    except VideoNotFound as exc:
        raise HTTPException(404, str(exc)) from exc


@router.get("/videos", response_model=list[VideoSummary], tags=["library"])
def list_videos(state: State) -> list[VideoSummary]:
    """Every ingested video with the status of each ingestion stage, oldest first."""
    store = state.store()
    rows = [v.model_dump() for v in state.library().videos()]
    roots = state.roots.snapshot()
    return [VideoSummary(**_summary_fields(r, _ledger(store, r["video_id"]), store, roots)) for r in rows]


@router.get(
    "/videos/{video_id}",
    response_model=VideoDetail,
    responses={404: {"description": "No such video."}},
    tags=["library"],
)
def get_video(video_id: VideoId, state: State) -> VideoDetail:
    """One video with its per-stage ledger (rows, seconds, errors)."""
    store = state.store()
    row = _video_row(state, video_id)
    ledger = _ledger(store, row["video_id"])
    return VideoDetail(**_summary_fields(row, ledger, store, state.roots), ledger=_stage_states(ledger))


@router.get(
    "/videos/{video_id}/thumbnail",
    response_class=Response,
    responses={
        200: {"content": {"image/jpeg": {}}, "description": "The stored frame nearest `t`."},
        404: {"description": "No such video, or it has no frames."},
    },
    tags=["library"],
)
def thumbnail(
    video_id: VideoId,
    state: State,
    t: Annotated[float, Query(ge=0, le=1e7, description="Seconds into the video.")] = 0.0,
) -> Response:
    """The stored frame nearest to ``t`` seconds, as JPEG (frames are sampled at ingestion)."""
    store = state.store()
    row = _video_row(state, video_id)
    times = store.rows(store.frames, video_id=row["video_id"], columns=["frame_index", "t"]).to_pylist()
    if not times:
        raise HTTPException(404, "this video has no stored frames (is ingestion finished?)")
    nearest = min(times, key=lambda r: abs(r["t"] - t))
    frame = store.rows(
        store.frames,
        video_id=row["video_id"],
        where=f"frame_index = {int(nearest['frame_index'])}",
        columns=["jpeg"],
    ).to_pylist()
    return Response(
        frame[0]["jpeg"],
        media_type="image/jpeg",
        headers={"Cache-Control": "private, max-age=3600", "X-Frame-Time": f"{nearest['t']:.3f}"},
    )


@router.get(
    "/videos/{video_id}/stream",
    response_class=FileResponse,
    responses={
        200: {"content": {"video/mp4": {}}, "description": "The whole file."},
        206: {"description": "The requested byte range (Content-Range)."},
        403: {"description": "The file is outside the configured video roots (the reason in detail)."},
        404: {"description": "No such video, or its file is gone (moved or deleted)."},
        416: {"description": "The range is not satisfiable."},
    },
    tags=["library"],
)
def stream(video_id: VideoId, state: State) -> FileResponse:
    """The video file, with HTTP ``Range`` support so players can seek (see the module notes)."""
    row = _video_row(state, video_id)
    path = Path(row["path"])
    roots = state.roots.snapshot()
    why_not = roots.unplayable(path)
    if why_not is not None:
        missing = roots.allows(path)  # inside the roots, so the file itself is gone
        raise HTTPException(404 if missing else 403, f"{row['file_name']} cannot be played: {why_not}")
    resolved = path.resolve()
    media_type = mimetypes.guess_type(resolved.name)[0] or "application/octet-stream"
    return FileResponse(resolved, media_type=media_type, content_disposition_type="inline")


router.add_api_route("/videos/{video_id}/stream", stream, methods=["HEAD"], include_in_schema=False)


@router.get(
    "/videos/{video_id}/summary",
    response_model=VideoOverview,
    responses={404: {"description": "No such video, or it is not summarised yet (the reason in detail)."}},
    tags=["library"],
)
def summary(video_id: VideoId, state: State) -> VideoOverview:
    """The video's summary, chapters and highlights, made at ingestion (the ``chapters`` stage)."""
    from vidscope.flows.summarize import NotSummarized
    from vidscope.storage.videos import VideoNotFound

    try:
        return state.library().summarize(video_id)
    except (VideoNotFound, NotSummarized) as exc:
        raise HTTPException(404, str(exc)) from exc


@router.get(
    "/videos/{video_id}/transcript",
    response_model=list[TranscriptLine],
    responses={404: {"description": "No such video."}},
    tags=["library"],
)
def transcript(video_id: VideoId, state: State) -> list[TranscriptLine]:
    """What the video says, line by line (for a video without speech: the texts it shows)."""
    from vidscope.storage.videos import VideoNotFound

    try:
        return state.library().transcript(video_id)
    except VideoNotFound as exc:
        raise HTTPException(404, str(exc)) from exc


@router.get(
    "/digest",
    response_model=Digest,
    tags=["library"],
)
def digest(
    state: State,
    since: Annotated[
        str, Query(pattern=r"^[1-9][0-9]{0,3}[smhdw]$", description="The window: 1-9999 and s, m, h, d or w.")
    ] = "1d",
) -> Digest:
    """What the library gained: the videos ingested in the window with their summaries and chapters."""
    try:
        return state.library().digest(since)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from exc
