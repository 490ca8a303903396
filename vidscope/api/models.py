"""Request and response bodies of the HTTP API (they make the OpenAPI schema)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from vidscope.agents import strategies
from vidscope.agents.moments import Moment as LibraryMoment
from vidscope.agents.strategies import Scope
from vidscope.flows.ask import AskResult

#: At least one character that Python's ``str.strip`` keeps (the same class in every regex engine).
NOT_BLANK = r"[^\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
NonBlank = Annotated[str, StringConstraints(min_length=1, max_length=4000, pattern=NOT_BLANK)]


class RequestBody(BaseModel):
    """A request body: a field it does not know is refused (422), not silently dropped, and the
    OpenAPI schema says so (``additionalProperties: false``), so clients and fuzzers see what the
    server does. A misspelt ``optoins`` would otherwise turn a multiple-choice question into an
    open one without a word.

    Strict types too: JSON has real booleans and numbers, so ``"use_skills": 0`` or ``"true"`` is
    a client's bug the schema forbids (``type: boolean``), refused with 422 rather than read as
    ``False``/``True`` by pydantic's lax coercion (found by the random fuzz run in CI)."""

    model_config = ConfigDict(extra="forbid", strict=True)


def strategy_of(scope: Scope) -> AfterValidator:
    """Checks a request's ``agent`` against the strategies of ``scope`` when the request comes in
    (a 422 lists the choices)."""

    def check(name: str) -> str:
        return strategies.get(name, scope).name  # unknown: ValueError, a 422

    return AfterValidator(check)


def strategy_field(scope: Scope) -> Any:
    """The ``agent`` field of a request of ``scope``: its default, help and choices read from the
    registry when used (the choices when the schema is first served), not when this module loads."""

    def choices(schema: dict[str, Any]) -> None:
        schema["enum"] = list(strategies.names(scope))

    return Field(
        default_factory=lambda: strategies.default(scope),
        description=f"The strategy (GET /api/strategies lists them): {strategies.help_text(scope)}; "
        f"default {strategies.default(scope)}.",
        json_schema_extra=choices,
    )


class StrategyOut(BaseModel):
    """One answering strategy (``GET /api/strategies``; the page fills its agent menus from it)."""

    name: str
    title: str
    help: str
    scopes: list[Scope]
    needs_planner: bool
    default_for: list[Scope] = Field(description="The scopes it answers when no agent is named.")


class Health(BaseModel):
    """Liveness and whether requests need a token."""

    status: str = "ok"
    auth_required: bool


class Login(RequestBody):
    """The bearer token, exchanged for a session cookie the page's media requests carry."""

    token: Annotated[str, StringConstraints(min_length=1, max_length=1000)]


class StageState(BaseModel):
    """One ingestion stage of one video, from the ledger."""

    stage: str
    status: str = Field(description="pending, running, done, skipped, failed, blocked, unavailable")
    rows: int | None = None
    seconds: float | None = None
    note: str = ""


class VideoSummary(BaseModel):
    """A library entry."""

    video_id: str
    file_name: str
    duration: float
    width: int
    height: int
    fps: float
    has_audio: bool
    added_at: str | None = None
    clips: int
    playable: bool = Field(description="The file is under a configured video root and present.")
    unplayable: str | None = Field(
        None, description="Why the file cannot be played (outside the video roots, moved, deleted)."
    )
    stages: dict[str, str] = Field(description="Stage name to status.")


class VideoDetail(VideoSummary):
    """A library entry with the per-stage ledger (errors and notes included)."""

    ledger: list[StageState]


class IngestRequest(RequestBody):
    """Files or folders to ingest; each must lie under a configured video root."""

    paths: list[NonBlank] = Field(min_length=1, max_length=1000)


class AskRequest(RequestBody):
    """A question about one video."""

    video: NonBlank = Field(description="Video id (or a 6+ character prefix) or file name.")
    question: NonBlank
    options: list[NonBlank] | None = Field(
        None, min_length=2, max_length=26, description="Multiple-choice options, if any."
    )
    agent: Annotated[str, strategy_of("video")] = strategy_field("video")


class AskResponse(AskResult):
    """The answer, its cited moments and the trace; ``query_id`` fetches the trace again later."""

    query_id: str


class Moment(BaseModel):
    """A time range inside a video (seconds)."""

    start: float
    end: float


class SearchHitOut(BaseModel):
    """A video that matches the query, with its best moments."""

    video_id: str
    file_name: str
    score: float
    scores: dict[str, float] = Field(default_factory=dict)
    caption: str | None = None
    moments: list[Moment] = Field(default_factory=list)


class DroppedOut(BaseModel):
    """A candidate video some agent vetoed, and why."""

    video_id: str
    file_name: str
    reason: str
    scores: dict[str, float] = Field(default_factory=dict)


class SearchResponse(BaseModel):
    """Videos matching a query across the library."""

    query: str
    plan: dict[str, str] = Field(default_factory=dict)
    hits: list[SearchHitOut] = Field(default_factory=list)
    dropped: list[DroppedOut] = Field(default_factory=list)
    pool_size: int = 0
    fine_comparisons: int = 0
    fusion: str = ""
    seconds: float = 0.0
    planner: str = Field("", description="'rules' or the chat model that planned the query.")
    rerank: str = Field("", description="How the fine rerank compared videos.")
    notes: list[str] = Field(default_factory=list)


class MomentsResponse(BaseModel):
    """Moments across the library that match a query, best first (clip-level hybrid search)."""

    query: str
    moments: list[LibraryMoment] = Field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = Field(default_factory=list)


def search_response(result: Any) -> SearchResponse:
    """Turn ``flows.search.SearchResult`` (dataclass or model) into the API's response model."""
    return SearchResponse(
        query=result.query,
        plan=dict(result.plan or {}),
        hits=[
            SearchHitOut(
                video_id=h.video_id,
                file_name=h.file_name,
                score=float(h.score),
                scores={k: float(v) for k, v in (h.scores or {}).items()},
                caption=h.caption,
                moments=[Moment(start=float(a), end=float(b)) for a, b in (h.moments or [])],
            )
            for h in result.hits
        ],
        dropped=[
            DroppedOut(
                video_id=d.video_id,
                file_name=d.file_name,
                reason=d.reason,
                scores={k: float(v) for k, v in (d.scores or {}).items()},
            )
            for d in result.dropped
        ],
        pool_size=int(result.pool_size),
        fine_comparisons=int(result.fine_comparisons),
        fusion=str(result.fusion),
        seconds=float(result.seconds),
        planner=str(getattr(result, "planner", "") or ""),
        rerank=str(getattr(result, "rerank", "") or ""),
        notes=[str(n) for n in getattr(result, "notes", None) or []],
    )
