"""The FastAPI application: library, ingestion jobs, ask, search, traces, thumbnails, playback.

Every ``/api`` route except ``/api/health`` and ``/api/login`` requires the configured bearer token
(see :mod:`vidscope.api.security`). Videos are only ever read from under ``[api] video_roots``.

Playback: ``GET /api/videos/{id}/stream`` serves the file with HTTP byte ranges (``Range`` → 206
with ``Content-Range``), which is what browsers need to seek. A *time* range is the player's side:
load ``…/stream#t=START,END`` (a media fragment) or set ``currentTime``, as the page does.
"""

from __future__ import annotations

import json
import mimetypes
import threading
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Response
from fastapi import Path as PathParam
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from vidscope import __version__
from vidscope.api.jobs import IngestJob, IngestJobs
from vidscope.api.models import (
    NOT_BLANK,
    AskRequest,
    AskResponse,
    Health,
    IngestRequest,
    Login,
    SearchResponse,
    StageState,
    VideoDetail,
    VideoSummary,
    search_response,
)
from vidscope.api.security import (
    SESSION_COOKIE,
    BodyLimitMiddleware,
    InvalidPath,
    PathNotAllowed,
    TokenAuth,
    VideoRoots,
    session_value,
)
from vidscope.core.settings import Settings, disable_telemetry

STATIC_DIR = Path(__file__).parent / "static"

VideoId = Annotated[
    str,
    PathParam(pattern=r"^[0-9a-f]{6,64}$", description="Video id or a 6+ character prefix of it."),
]

#: The page loads nothing from elsewhere; inline scripts and styles are not needed either.
PAGE_POLICY = (
    "default-src 'self'; img-src 'self' data:; media-src 'self'; object-src 'none'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)


class TraceStore:
    """The last ``keep`` answers by query id, so a trace can be fetched after the answer."""

    def __init__(self, keep: int = 256) -> None:
        self.keep = keep
        self._items: OrderedDict[str, AskResponse] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, item: AskResponse) -> None:
        with self._lock:
            self._items[item.query_id] = item
            while len(self._items) > self.keep:
                self._items.popitem(last=False)

    def get(self, query_id: str) -> AskResponse | None:
        with self._lock:
            return self._items.get(query_id)


def create_app(settings: Settings) -> FastAPI:
    """The API and web page over the store configured by ``settings``."""
    disable_telemetry()
    auth = TokenAuth(settings.api.token)
    roots = VideoRoots(settings.api.video_roots)
    jobs = IngestJobs(settings)
    traces = TraceStore()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        jobs.shutdown()

    app = FastAPI(
        title="vidscope",
        version=__version__,
        description="Ask questions about, and search, your own ingested videos.",
        lifespan=lifespan,
        docs_url=None,  # the Swagger page loads its assets from a CDN; /openapi.json is enough
        redoc_url=None,
        generate_unique_id_function=lambda route: route.name,
    )
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.api.max_request_bytes)
    app.state.settings, app.state.jobs, app.state.traces = settings, jobs, traces

    malformed: dict[int | str, dict[str, Any]] = {
        400: {"description": "Malformed request (e.g. a body that is not JSON)."},
        413: {"description": "Request body over [api] max_request_bytes."},
    }
    guarded: dict[int | str, dict[str, Any]] = {
        **malformed,
        401: {"description": "Missing or wrong bearer token."},
        403: {"description": "No token is configured and the client is not on loopback."},
    }
    public = APIRouter(prefix="/api", tags=["session"], responses=malformed)
    api = APIRouter(prefix="/api", dependencies=[Depends(auth)], responses=guarded)

    def store():  # type: ignore[no-untyped-def]
        from vidscope.models.open_store import open_store

        return open_store(settings)

    # ------------------------------------------------------------------ session

    @public.get("/health", response_model=Health)
    def health() -> Health:
        """Liveness, and whether the other endpoints need a token."""
        return Health(auth_required=auth.token is not None)

    @public.post("/login", status_code=204, responses={401: {"description": "Wrong token."}})
    def login(body: Login, response: Response) -> Response:
        """Exchange the bearer token for an HttpOnly session cookie (used by the web page)."""
        if auth.token is None:
            return Response(status_code=204)
        if not auth.check_token(body.token):
            raise HTTPException(401, "wrong token")
        reply = Response(status_code=204)
        reply.set_cookie(
            SESSION_COOKIE, session_value(auth.token), httponly=True, samesite="strict", path="/"
        )
        return reply

    # ------------------------------------------------------------------ library

    def summary(row: dict[str, Any], s: Any, detail: bool = False) -> VideoSummary | VideoDetail:
        from vidscope.flows.ingest import STAGES
        from vidscope.tasks.stage import ledger_rows

        ledger = ledger_rows(s, row["video_id"])
        stages = {st.name: ledger.get(st.name, {}).get("status", "pending") for st in STAGES}
        path = Path(row["path"])
        fields: dict[str, Any] = {
            "video_id": row["video_id"],
            "file_name": row["file_name"],
            "duration": row["duration"],
            "width": row["width"],
            "height": row["height"],
            "fps": row["fps"],
            "has_audio": row["has_audio"],
            "added_at": row["added_at"].isoformat() if row.get("added_at") else None,
            "clips": s.count(s.clips, row["video_id"]),
            "playable": roots.allows(path) and path.is_file(),
            "stages": stages,
        }
        if not detail:
            return VideoSummary(**fields)
        states = []
        for st in STAGES:
            entry = ledger.get(st.name)
            if entry is None:
                states.append(StageState(stage=st.name, status="pending"))
                continue
            note = entry.get("error") or ""
            if not note and entry.get("details_json"):
                note = str(json.loads(entry["details_json"]).get("reason", ""))
            states.append(
                StageState(
                    stage=st.name,
                    status=entry["status"],
                    rows=entry.get("rows"),
                    seconds=entry.get("seconds"),
                    note=note,
                )
            )
        return VideoDetail(**fields, ledger=states)

    def video_row(s: Any, ref: str) -> dict[str, Any]:
        from vidscope.storage.videos import VideoNotFound, find_video

        try:
            return find_video(s, ref).model_dump()
        except VideoNotFound as exc:
            raise HTTPException(404, str(exc)) from exc

    @api.get("/videos", response_model=list[VideoSummary], tags=["library"])
    def list_videos() -> list[VideoSummary]:
        """Every ingested video with the status of each ingestion stage, oldest first."""
        s = store()
        rows = sorted(s.rows(s.videos).to_pylist(), key=lambda r: r["added_at"])
        return [summary(r, s) for r in rows]  # type: ignore[misc]

    @api.get(
        "/videos/{video_id}",
        response_model=VideoDetail,
        responses={404: {"description": "No such video."}},
        tags=["library"],
    )
    def get_video(video_id: VideoId) -> VideoDetail:
        """One video with its per-stage ledger (rows, seconds, errors)."""
        s = store()
        return summary(video_row(s, video_id), s, detail=True)  # type: ignore[return-value]

    @api.get(
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
        t: Annotated[float, Query(ge=0, le=1e7, description="Seconds into the video.")] = 0.0,
    ) -> Response:
        """The stored frame nearest to ``t`` seconds, as JPEG (frames are sampled at ingestion)."""
        s = store()
        row = video_row(s, video_id)
        times = s.rows(s.frames, video_id=row["video_id"], columns=["frame_index", "t"]).to_pylist()
        if not times:
            raise HTTPException(404, "this video has no stored frames (is ingestion finished?)")
        nearest = min(times, key=lambda r: abs(r["t"] - t))
        frame = s.rows(
            s.frames,
            video_id=row["video_id"],
            where=f"frame_index = {int(nearest['frame_index'])}",
            columns=["jpeg"],
        ).to_pylist()
        return Response(
            frame[0]["jpeg"],
            media_type="image/jpeg",
            headers={"Cache-Control": "private, max-age=3600", "X-Frame-Time": f"{nearest['t']:.3f}"},
        )

    @api.get(
        "/videos/{video_id}/stream",
        response_class=FileResponse,
        responses={
            200: {"content": {"video/mp4": {}}, "description": "The whole file."},
            206: {"description": "The requested byte range (Content-Range)."},
            403: {"description": "The file is outside the configured video roots."},
            404: {"description": "No such video, or its file is gone."},
            416: {"description": "The range is not satisfiable."},
        },
        tags=["library"],
    )
    def stream(video_id: VideoId) -> FileResponse:
        """The video file, with HTTP ``Range`` support so players can seek (see the module notes)."""
        s = store()
        row = video_row(s, video_id)
        path = Path(row["path"])
        if not roots.allows(path):
            raise HTTPException(403, "this video's file is outside the configured video roots")
        resolved = path.resolve()
        if not resolved.is_file():
            raise HTTPException(404, f"the file of {row['file_name']} is no longer there")
        media_type = mimetypes.guess_type(resolved.name)[0] or "application/octet-stream"
        return FileResponse(resolved, media_type=media_type, content_disposition_type="inline")

    api.add_api_route("/videos/{video_id}/stream", stream, methods=["HEAD"], include_in_schema=False)

    # ------------------------------------------------------------------ ingestion

    @api.post(
        "/ingest",
        response_model=IngestJob,
        status_code=202,
        responses={
            403: {"description": "Nothing to ingest: a path is outside the roots or a glob."},
            404: {"description": "Nothing to ingest: no such file, or no video in the folder."},
        },
        tags=["ingestion"],
    )
    def ingest(body: IngestRequest) -> IngestJob:
        """Queue files or folders (under the video roots) for ingestion; poll the returned job.

        Paths may be absolute or relative to a video root. Paths that cannot be ingested are listed
        in the job's ``refused``; when nothing is left to ingest the request fails (403 or 404).
        """
        from vidscope.flows.ingest import expand_paths

        accepted: list[Path] = []
        refused: dict[str, str] = {}
        forbidden = False
        for item in body.paths:
            if any(ch in item for ch in "*?["):
                refused[item] = "glob patterns are not accepted over HTTP; name files or folders"
                forbidden = True
                continue
            try:
                resolved = roots.resolve(item)
            except PathNotAllowed as exc:
                refused[item], forbidden = str(exc), True
                continue
            except InvalidPath as exc:
                refused[item] = str(exc)
                continue
            if not resolved.exists():
                refused[item] = "no such file or folder"
                continue
            files, notes = expand_paths([resolved])
            for note in notes:
                refused[note.path] = note.error or note.status
            if not files and not notes:
                refused[item] = "no video files in this folder"
            for file in files:
                # A folder may hold symlinks that lead out of the roots: check every file again.
                if roots.allows(file):
                    accepted.append(file.resolve())
                else:
                    refused[str(file)] = "outside the configured video roots (symlink?)"
                    forbidden = True
        if not accepted:
            reasons = "; ".join(f"{path}: {why}" for path, why in refused.items())
            raise HTTPException(403 if forbidden else 404, f"nothing to ingest: {reasons}")
        return jobs.submit(sorted(set(accepted)), refused)

    @api.get("/ingest", response_model=list[IngestJob], tags=["ingestion"])
    def list_jobs() -> list[IngestJob]:
        """The ingestion jobs this server remembers, newest first."""
        return jobs.all()

    @api.get(
        "/ingest/{job_id}",
        response_model=IngestJob,
        responses={404: {"description": "Unknown job."}},
        tags=["ingestion"],
    )
    def get_job(job_id: Annotated[str, PathParam(pattern=r"^[0-9a-f]{16}$")]) -> IngestJob:
        """One ingestion job: state, per-stage progress while running, reports when finished."""
        job = jobs.get(job_id)
        if job is None:
            raise HTTPException(404, f"no ingestion job {job_id}")
        return job

    # ------------------------------------------------------------------ questions

    @api.post(
        "/ask",
        response_model=AskResponse,
        responses={404: {"description": "No such video."}, 422: {"description": "Bad question."}},
        tags=["questions"],
    )
    def ask(body: AskRequest) -> AskResponse:
        """Answer a question about one video, citing the moments that support the answer."""
        from vidscope.flows.ask import run_ask
        from vidscope.storage.videos import VideoNotFound

        try:
            result = run_ask(settings, body.video, body.question, body.options, agent=body.agent)
        except VideoNotFound as exc:
            raise HTTPException(404, str(exc)) from exc
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from exc
        answer = AskResponse(**result.model_dump(), query_id=uuid.uuid4().hex[:16])
        traces.put(answer)
        return answer

    @api.get(
        "/traces/{query_id}",
        response_model=AskResponse,
        responses={404: {"description": "Unknown or forgotten query."}},
        tags=["questions"],
    )
    def get_trace(query_id: Annotated[str, PathParam(pattern=r"^[0-9a-f]{16}$")]) -> AskResponse:
        """A recent answer with its full agent trace (kept in memory for the last 256 questions)."""
        found = traces.get(query_id)
        if found is None:
            raise HTTPException(404, f"no trace for query {query_id} (traces live in memory)")
        return found

    @api.get(
        "/search",
        response_model=SearchResponse,
        responses={
            409: {"description": "The search library is empty (nothing parsed yet)."},
            422: {"description": "Bad query or options."},
            501: {"description": "Library search is not available in this build."},
            503: {"description": "A model search needs is not available."},
        },
        tags=["questions"],
    )
    def search(
        q: Annotated[
            str, Query(min_length=1, max_length=2000, pattern=NOT_BLANK, description="What to look for.")
        ],
        k: Annotated[int | None, Query(ge=1, le=100, description="Videos to return.")] = None,
    ) -> SearchResponse:
        """Videos across the library that match ``q``, with their best moments."""
        if not q.strip():
            raise HTTPException(422, "the query is empty")
        try:
            from vidscope.flows.search import LibraryEmpty, run_search
        except ImportError as exc:
            raise HTTPException(501, f"library search is not available: {exc}") from exc
        from vidscope.core.errors import BackendUnavailable

        try:
            return search_response(run_search(settings, q.strip(), k=k))
        except LibraryEmpty as exc:
            raise HTTPException(409, str(exc)) from exc
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from exc
        except BackendUnavailable as exc:
            raise HTTPException(503, str(exc)) from exc

    app.include_router(public)
    app.include_router(api)

    # ------------------------------------------------------------------ the page

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(
            STATIC_DIR / "index.html",
            headers={"Content-Security-Policy": PAGE_POLICY, "Cache-Control": "no-cache"},
        )

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app
