"""Video–text embeddings of whole clips with an X-CLIP checkpoint (the ``video_text`` role).

``xclip:<dir or cached hub name>`` loads a transformers ``XCLIPModel`` and its ``XCLIPProcessor``
from a local directory (or its snapshot in the local Hugging Face cache), e.g. a copy of
``microsoft/xclip-base-patch32``; users provide the weights, nothing is downloaded. A clip is the
checkpoint's ``vision_config.num_frames`` frames (8 for the base models), sampled by the caller.

Options (``[models.options.xclip]``): ``device`` (auto), ``batch_size`` (clips per forward, 8),
``frames_per_clip`` (the checkpoint's ``num_frames``; X-CLIP's temporal layers accept other
counts, but it was trained on this one).

Deviation from X-CLIP's own similarity: X-CLIP scores a (text, video) pair with a text prompt
conditioned on that video (its "video-specific prompting", a forward per pair). A library search
must compare one query with vectors stored at ingestion, so clips are embedded alone
(``get_video_features``: frame CLS features through the cross-frame transformer, projected) and
texts alone (``get_text_features``), compared by cosine as CLIP-style retrieval does. ViCLIP
checkpoints ship their own modelling code rather than a transformers class; a backend for them
would implement the same protocol.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vidscope.core.errors import BackendUnavailable, install_extra
from vidscope.models.clip import _device, _normalised, _pil
from vidscope.models.protocols.image import Image
from vidscope.models.transformers_vlm import resolve_local_model


class XClipEmbedder:
    """A :class:`~vidscope.models.protocols.video_text.VideoTextEmbedder` over an X-CLIP model."""

    def __init__(self, role: str, name: str, model_dir: str, options: dict[str, Any]) -> None:
        self.name = name
        try:
            from transformers import XCLIPModel, XCLIPProcessor
        except ImportError as exc:
            raise BackendUnavailable(
                role, name, "importing transformers", f"Install it: {install_extra('torch')}."
            ) from exc
        self.device = _device(options)
        self.batch_size = max(1, int(options.get("batch_size", 8)))
        try:
            self._processor = XCLIPProcessor.from_pretrained(model_dir, local_files_only=True)
            model: Any = XCLIPModel.from_pretrained(model_dir, local_files_only=True)
        except Exception as exc:
            raise BackendUnavailable(
                role,
                name,
                f"XCLIPModel + XCLIPProcessor from '{model_dir}' ({exc})",
                "Give a directory holding an X-CLIP model (config.json, weights) and its processor.",
            ) from exc
        self._model = model.to(self.device).eval()
        self.frames_per_clip = int(options.get("frames_per_clip") or model.config.vision_config.num_frames)
        self.dim = int(model.config.projection_dim)
        self._lock = threading.Lock()

    @staticmethod
    def _features(output: Any) -> Any:
        # transformers 5 returns a model output whose pooler_output is the projected embedding.
        return getattr(output, "pooler_output", output)

    def embed_videos(self, clips: Sequence[Sequence[Image]]) -> np.ndarray:
        """Shape (len(clips), dim), float32, rows L2-normalised; each clip has
        :attr:`frames_per_clip` frames."""
        import torch

        for clip in clips:
            if len(clip) != self.frames_per_clip:
                raise ValueError(f"a clip has {len(clip)} frames; this model reads {self.frames_per_clip}")
        if not clips:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = []
        with self._lock, torch.inference_mode():  # one forward at a time; models are not re-entrant
            for start in range(0, len(clips), self.batch_size):
                batch = [[_pil(frame) for frame in clip] for clip in clips[start : start + self.batch_size]]
                pixels = self._processor(videos=batch, return_tensors="pt")["pixel_values"]
                if pixels.ndim == 4:  # an image processor that flattens the frames of all clips
                    pixels = pixels.reshape(len(batch), self.frames_per_clip, *pixels.shape[1:])
                output = self._model.get_video_features(pixel_values=pixels.to(self.device))
                parts.append(_normalised(self._features(output)))
        return np.concatenate(parts, axis=0)

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Shape (len(texts), dim), float32, rows L2-normalised, comparable with clips."""
        import torch

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = []
        with self._lock, torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                batch = [str(t) for t in texts[start : start + self.batch_size]]
                inputs = self._processor(text=batch, padding=True, truncation=True, return_tensors="pt")
                output = self._model.get_text_features(
                    input_ids=inputs["input_ids"].to(self.device),
                    attention_mask=inputs["attention_mask"].to(self.device),
                )
                parts.append(_normalised(self._features(output)))
        return np.concatenate(parts, axis=0)


def from_spec(role: str, target: str, options: dict[str, Any], data_dir: Path) -> XClipEmbedder:
    """``xclip:<dir or cached hub name>`` (see the module docstring)."""
    spec = f"xclip:{target}"
    return XClipEmbedder(role, spec, resolve_local_model(role, spec, target), options)
