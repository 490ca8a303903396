"""The ``video_text`` role: whole clips (a few frames each) and texts embedded into one space."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from vidscope.models.protocols.image import Image


@runtime_checkable
class VideoTextEmbedder(Protocol):
    """Embeds short clips and texts into one space (X-CLIP, ViCLIP), so a text finds the clips
    it describes by their motion as well as their look."""

    name: str
    dim: int
    #: Frames the model reads per clip; :meth:`embed_videos` takes exactly this many per clip.
    frames_per_clip: int

    def embed_videos(self, clips: Sequence[Sequence[Image]]) -> np.ndarray:
        """An array of shape (len(clips), dim), rows L2-normalised; each clip is
        :attr:`frames_per_clip` RGB frames in time order."""
        ...

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """An array of shape (len(texts), dim), rows L2-normalised, comparable with clips."""
        ...
