"""The FastAPI application: library, ingestion jobs, ask, search, traces, thumbnails, playback.

Every ``/api`` route except ``/api/health`` and ``/api/login`` requires the configured bearer token
(see :mod:`vidscope.api.security`). Videos are only ever read from under ``[api] video_roots``.
The routes live in :mod:`vidscope.api.routes`, one module per resource; this module builds the
app's state from the settings and puts the pieces together.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from vidscope import __version__
from vidscope.api.routes import (
    ask,
    compare,
    features,
    ingest,
    search,
    session,
    strategies,
    traces,
    videos,
    web,
)
from vidscope.api.security import BodyLimitMiddleware
from vidscope.api.state import ApiState, app_state
from vidscope.core.settings import Settings, disable_telemetry


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    app_state(app).warm_in_background()
    yield
    app_state(app).jobs.shutdown()


def create_app(settings: Settings) -> FastAPI:
    """The API and web page over the store configured by ``settings``."""
    disable_telemetry()
    app = FastAPI(
        title="vidscope",
        version=__version__,
        description="Ask questions about, and search, your own ingested videos.",
        lifespan=_lifespan,
        docs_url=None,  # the Swagger page loads its assets from a CDN; /openapi.json is enough
        redoc_url=None,
        generate_unique_id_function=lambda route: route.name,
    )
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.api.max_request_bytes)
    app.state.vidscope = ApiState.from_settings(settings)
    # The order of the routers is the order of the paths in the OpenAPI document.
    for routes in (session, videos, ingest, ask, compare, strategies, features, traces, search, web):
        app.include_router(routes.router)
    app.mount("/static", web.static_files(), name="static")
    return app
