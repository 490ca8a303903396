"""What a frame tool says when no model can look at frames.

Frames go only to a vision model: the ``vlm`` role, else the ``chat`` model, never a separate
``planner`` (docs/models.md; a text-only planner is a valid configuration). A model that refused
images in this process (:class:`~vidscope.core.errors.ImagesNotSupported`, remembered per endpoint
by the backend) counts as none. Then a frame tool (``frame_inspect``, ``frame_analysis``, SAMA's
and AgentCVR's visual tools) answers with an observation, not an error: the full note the first
time in a question, a short reminder after it, and one warning in the log per process, instead of
a failed request on every call.
"""

from __future__ import annotations

import logging
import threading
import weakref

from vidscope.agents.tools import ToolContext

log = logging.getLogger(__name__)

#: The observation of a frame tool when nothing can look at frames (the first time in a question).
NO_VISION = (
    "no vision model configured: nothing can look at frames in this run (no models.vlm or "
    "models.chat is set, or the model that would look refused images). Do not call frame tools "
    "again; answer from the captions, speech and on-screen text the other tools return."
)

#: The observation of every later frame call in the same question. Complete on its own: a cached
#: result may be replayed as the first one of a later question.
NO_VISION_AGAIN = "no vision model configured: frame tools cannot be used in this run."

_told: weakref.WeakSet[ToolContext] = weakref.WeakSet()
_logged = False
_lock = threading.Lock()


def no_vision_note(ctx: ToolContext, tool_name: str) -> str:
    """What ``tool_name`` answers without a vision model: the full note once per question (per
    tool context), a short reminder after it; logged once per process."""
    global _logged
    with _lock:
        first = ctx not in _told
        _told.add(ctx)
        log_now = not _logged
        _logged = True
    if log_now:
        log.warning(
            "%s: no vision model (models.vlm unset or text-only); frame tools answer without frames",
            tool_name,
        )
    return NO_VISION if first else NO_VISION_AGAIN
