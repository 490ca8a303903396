"""The ``text_embedder`` role: texts to vectors for semantic search."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class TextEmbedder(Protocol):
    """Maps texts to L2-normalised float32 vectors of a fixed size."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """An array of shape (len(texts), dim), rows L2-normalised."""
        ...
