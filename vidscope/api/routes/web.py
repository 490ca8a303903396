"""The web page: ``/`` serves ``static/index.html`` (strict content policy), ``/static`` its assets."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).parent.parent / "static"

#: The page loads nothing from elsewhere; inline scripts and styles are not needed either.
PAGE_POLICY = (
    "default-src 'self'; img-src 'self' data:; media-src 'self'; object-src 'none'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)

router = APIRouter(include_in_schema=False)


@router.get("/")
def index() -> FileResponse:
    """The single-page web app."""
    return FileResponse(
        STATIC_DIR / "index.html",
        headers={"Content-Security-Policy": PAGE_POLICY, "Cache-Control": "no-cache"},
    )


def static_files() -> StaticFiles:
    """The page's scripts, styles and icons, to mount at ``/static``."""
    return StaticFiles(directory=STATIC_DIR)
