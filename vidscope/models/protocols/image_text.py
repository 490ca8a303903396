"""The ``image_text`` role: images and texts embedded into one space (CLIP-like)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from vidscope.models.protocols.image import Image


@runtime_checkable
class ImageTextEmbedder(Protocol):
    """Embeds images and texts into one space, so a text can find the frames it describes."""

    name: str
    dim: int

    def embed_images(self, images: Sequence[Image]) -> np.ndarray:
        """An array of shape (len(images), dim), rows L2-normalised."""
        ...

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """An array of shape (len(texts), dim), rows L2-normalised, comparable with images."""
        ...
