"""``GET /api/features``: what this server can do with its models, so the page disables the
controls for what is off (search by image without an image–text model, agents that need a chat
model when none is configured) and says why, before anyone clicks them.

Each reason is the short line the terminal prints for the same missing model (``brief``); the page
puts it in words for a page user (it drops the command-line advice).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from vidscope.api.routes import guarded_router
from vidscope.api.state import State
from vidscope.core.settings import Settings

router = guarded_router()


class Feature(BaseModel):
    """One capability: on or off, and why it is off."""

    on: bool
    reason: str = Field("", description="Why it is off (empty when on).")


class Features(BaseModel):
    """The capabilities the page offers controls for."""

    visual_search: Feature = Field(description="Search by image (the image–text model).")
    planner: Feature = Field(description="A chat model for the agents that need one.")


def _visual_search(settings: Settings) -> Feature:
    from vidscope.core.errors import BackendUnavailable
    from vidscope.models import registry

    try:
        model = registry.image_text(settings)  # built once per process; a failure is remembered
    except BackendUnavailable as exc:
        return Feature(on=False, reason=f"visual search is off: {exc.brief}")
    if model is None:
        return Feature(on=False, reason="visual search is off: no image–text model is configured")
    return Feature(on=True)


def _planner(settings: Settings) -> Feature:
    from vidscope.core.errors import BackendUnavailable
    from vidscope.models import registry

    if not registry.effective_spec(settings, "planner"):
        return Feature(on=False, reason="no chat model is configured")
    try:
        registry.planner_model(settings)
    except BackendUnavailable as exc:
        return Feature(on=False, reason=f"the chat model is unavailable: {exc.brief}")
    return Feature(on=True)


@router.get("/features", response_model=Features, tags=["questions"])
def features(state: State) -> Features:
    """Whether search by image and the agents needing a chat model work here, and why not."""
    return Features(visual_search=_visual_search(state.settings), planner=_planner(state.settings))
