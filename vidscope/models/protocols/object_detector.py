"""The ``object_detector`` role: labelled boxes in frames, optionally tracked across them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from vidscope.models.protocols.image import Image


@dataclass(frozen=True)
class Detection:
    """An object in one image; ``box`` is x1, y1, x2, y2 in pixels; ``track_id`` when tracked."""

    label: str
    box: tuple[float, float, float, float]
    score: float
    track_id: int | None = None


@runtime_checkable
class ObjectDetector(Protocol):
    """Finds objects in a sequence of frames; with ``track`` the frames are consecutive and ids persist."""

    name: str

    def detect(
        self,
        images: Sequence[Image],
        *,
        track: bool = False,
        prompts: Sequence[str] | None = None,
    ) -> list[list[Detection]]:
        """One list of detections per image; ``prompts`` name the objects to look for when the
        backend is open-vocabulary."""
        ...
