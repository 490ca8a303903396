"""The ``text_reader`` role: OCR of the text visible in a frame."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from vidscope.models.protocols.image import Image


@dataclass(frozen=True)
class TextLine:
    """One line of text found in an image; ``box`` is four corner points x1,y1,…,x4,y4 in pixels."""

    text: str
    box: tuple[float, ...]
    score: float


@runtime_checkable
class TextReader(Protocol):
    """Reads the text lines visible in an image."""

    name: str

    def read(self, image: Image) -> list[TextLine]:
        """The lines found in ``image``, in the backend's reading order."""
        ...


@runtime_checkable
class TextRegionFinder(Protocol):
    """A reader that can also find where text is without reading it, much more cheaply.

    The ``ocr`` stage uses this as a gate: a frame whose text regions look like those of the last
    frame it read keeps that read, and a frame without text regions is not read at all. Readers
    without it have every sampled frame read.
    """

    def find_text(self, image: Image, max_side: int) -> list[tuple[float, ...]]:
        """Boxes (x1,y1,…,x4,y4 in ``image`` pixels) of likely text, detected on ``image``
        scaled to at most ``max_side`` pixels on its longer side (never upscaled)."""
        ...


@runtime_checkable
class LineRecogniser(Protocol):
    """A reader that can read a crop holding one line without first detecting where text is (the
    ``ocr`` stage reads a burned-in clock's region this way, far more cheaply than a frame)."""

    def recognise(self, crops: list[Image]) -> list[tuple[str, float]]:
        """Per crop, the text of its line and the confidence (0-1)."""
        ...


@runtime_checkable
class StoredSizeReader(Protocol):
    """A reader whose full read normally enlarges small frames before detecting text, and that can
    also read a frame at its stored size, much more cheaply (the ``ocr`` stage does so when the
    gate's text regions show lines tall enough to be found there)."""

    def read_at_stored_size(self, image: Image) -> list[TextLine]:
        """The lines found in ``image``, detected without enlarging it."""
        ...
