"""The ``captioner`` role: a short description of one clip."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from vidscope.models.protocols.image import Image


@runtime_checkable
class Captioner(Protocol):
    """Describes a clip from a few of its frames plus textual context (speech, on-screen text)."""

    name: str

    def caption(self, frames: Sequence[Image], context: str) -> str:
        """A caption of a few plain sentences for the clip the ``frames`` come from."""
        ...
