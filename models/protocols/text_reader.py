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
