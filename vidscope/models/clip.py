"""Image–text embeddings in one space (CLIP, SigLIP) for text-to-frame search.

Two kinds share this module:

* ``open-clip:<architecture>`` (e.g. ``open-clip:ViT-B-32``) builds the architecture with open_clip
  and loads the weights file named by the ``checkpoint`` option. Without a checkpoint it refuses to
  start, unless ``random_weights = true`` is set (tests and smoke runs only: the vectors mean
  nothing).
* ``hf-clip:<dir or cached hub name>`` loads a transformers CLIP / SigLIP / SigLIP2 model and its
  processor from a local directory or the local Hugging Face cache.

Options: ``device`` (auto), ``batch_size`` (32), ``checkpoint`` and ``random_weights`` (open-clip).
Nothing is ever downloaded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vidscope.core.errors import BackendUnavailable, install_extra
from vidscope.models.protocols.image import Image
from vidscope.models.transformers_vlm import resolve_local_model

OPEN_CLIP_EXTRA = install_extra("clip")


def _pil(image: Image) -> Any:
    from PIL import Image as PILImage

    array = np.asarray(image)
    if array.ndim != 3 or array.shape[2] != 3 or array.dtype != np.uint8:
        raise ValueError(f"expected an RGB uint8 image of shape (h, w, 3), got {array.shape} {array.dtype}")
    return PILImage.fromarray(array)


def _device(options: dict[str, Any]) -> str:
    import torch

    device = str(options.get("device", "auto"))
    return ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device


def _normalised(vectors: Any) -> np.ndarray:
    """float32 rows scaled to unit length (a zero row stays zero rather than becoming NaN)."""
    array = vectors.detach().float().cpu().numpy()
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return (array / np.maximum(norms, 1e-12)).astype(np.float32)


class _BatchedEmbedder:
    """Shared batching for both kinds; subclasses provide the two per-batch encoders."""

    name: str
    dim: int
    batch_size: int

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def _encode_images(self, images: list[Any]) -> np.ndarray:
        raise NotImplementedError

    def _encode_texts(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def _batched(self, items: Sequence[Any], encode: Callable[[list[Any]], np.ndarray]) -> np.ndarray:
        import torch

        if len(items) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = []
        with self._lock, torch.inference_mode():  # one forward at a time; models are not re-entrant
            for start in range(0, len(items), self.batch_size):
                parts.append(encode(list(items[start : start + self.batch_size])))
        return np.concatenate(parts, axis=0)

    def embed_images(self, images: Sequence[Image]) -> np.ndarray:
        """Shape (len(images), dim), float32, rows L2-normalised."""
        return self._batched([_pil(i) for i in images], self._encode_images)

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Shape (len(texts), dim), float32, rows L2-normalised."""
        return self._batched([str(t) for t in texts], self._encode_texts)


class OpenClipEmbedder(_BatchedEmbedder):
    """An :class:`ImageTextEmbedder` over an open_clip architecture and a local checkpoint."""

    def __init__(self, role: str, architecture: str, options: dict[str, Any]) -> None:
        super().__init__()
        self.name = f"open-clip:{architecture}"
        try:
            import open_clip
        except ImportError as exc:
            raise BackendUnavailable(
                role,
                self.name,
                "importing open_clip",
                f"Install the clip extra: {OPEN_CLIP_EXTRA} (for a transformers model "
                "directory use "
                "hf-clip:<existing directory>).",
            ) from exc
        if architecture not in open_clip.list_models():
            raise BackendUnavailable(
                role,
                self.name,
                "open_clip's list of architectures",
                f"Unknown architecture '{architecture}'; use one of open_clip.list_models(), e.g. "
                "ViT-B-32 (for a transformers CLIP/SigLIP model use hf-clip:<existing directory>).",
            )
        checkpoint = options.get("checkpoint")
        if checkpoint:
            path = Path(str(checkpoint)).expanduser()
            if not path.is_file():
                raise BackendUnavailable(
                    role,
                    self.name,
                    f"the checkpoint file '{path}' (not found)",
                    "Set [models.options.open-clip] checkpoint to an existing open_clip weights "
                    "file "
                    "(.bin/.pt/.safetensors) for this architecture.",
                )
            pretrained: str | None = str(path)
        elif options.get("random_weights"):
            pretrained = None  # tests only: the embedding space is meaningless
        else:
            raise BackendUnavailable(
                role,
                self.name,
                "[models.options.open-clip] checkpoint (not set)",
                "Set checkpoint to a local weights file for this architecture; vidscope never "
                "downloads weights (random_weights = true exists for tests only).",
            )
        self.device = _device(options)
        self.batch_size = max(1, int(options.get("batch_size", 32)))
        try:
            model, _, preprocess = open_clip.create_model_and_transforms(
                architecture, pretrained=pretrained, device=self.device
            )
            self._tokenizer = open_clip.get_tokenizer(architecture)
        except Exception as exc:  # bad checkpoint, tokenizer that needs the hub, …
            raise BackendUnavailable(
                role,
                self.name,
                f"open_clip.create_model_and_transforms with pretrained={pretrained!r} ({exc})",
                "Check that the checkpoint matches the architecture and that its tokenizer is local.",
            ) from exc
        self._model = model.eval()
        self._preprocess = preprocess
        self.dim = int(open_clip.get_model_config(architecture)["embed_dim"])

    def _encode_images(self, images: list[Any]) -> np.ndarray:
        import torch

        pixels = torch.stack([self._preprocess(i) for i in images]).to(self.device)
        return _normalised(self._model.encode_image(pixels))

    def _encode_texts(self, texts: list[str]) -> np.ndarray:
        tokens = self._tokenizer(texts).to(self.device)
        return _normalised(self._model.encode_text(tokens))


class HFClipEmbedder(_BatchedEmbedder):
    """An :class:`ImageTextEmbedder` over a transformers CLIP-like model (CLIP, SigLIP, SigLIP2)."""

    def __init__(self, role: str, name: str, model_dir: str, options: dict[str, Any]) -> None:
        super().__init__()
        self.name = name
        try:
            from transformers import AutoModel, AutoProcessor
        except ImportError as exc:
            raise BackendUnavailable(
                role, name, "importing transformers", f"Install it: {install_extra('torch')}."
            ) from exc
        self.device = _device(options)
        self.batch_size = max(1, int(options.get("batch_size", 32)))
        try:
            self._processor = AutoProcessor.from_pretrained(model_dir, local_files_only=True)
            model = AutoModel.from_pretrained(model_dir, local_files_only=True)
        except Exception as exc:
            raise BackendUnavailable(
                role,
                name,
                f"AutoModel + AutoProcessor from '{model_dir}' ({exc})",
                "Give a directory holding a CLIP or SigLIP model and its processor.",
            ) from exc
        if not (hasattr(model, "get_image_features") and hasattr(model, "get_text_features")):
            raise BackendUnavailable(
                role,
                name,
                f"'{model_dir}' ({type(model).__name__})",
                "This is not a dual image/text encoder; use a CLIP or SigLIP model.",
            )
        self._model = model.to(self.device).eval()
        # SigLIP was trained on texts padded to a fixed length; CLIP pads to the batch longest.
        model_type = str(getattr(model.config, "model_type", ""))
        self._text_padding: str | bool = "max_length" if model_type.startswith("siglip") else True
        # The projection size, whatever the config calls it: measure it with one tiny forward.
        self.dim = 0
        self.dim = int(self.embed_texts(["a"]).shape[1])

    @staticmethod
    def _features(output: Any) -> Any:
        # transformers 5 returns a model output whose pooler_output is the projected embedding;
        # older versions return the tensor itself.
        return getattr(output, "pooler_output", output)

    def _encode_images(self, images: list[Any]) -> np.ndarray:
        inputs = self._processor(images=images, return_tensors="pt").to(self.device)
        return _normalised(
            self._features(self._model.get_image_features(pixel_values=inputs["pixel_values"]))
        )

    def _encode_texts(self, texts: list[str]) -> np.ndarray:
        inputs = self._processor(
            text=texts, padding=self._text_padding, truncation=True, return_tensors="pt"
        ).to(self.device)
        kwargs = {"input_ids": inputs["input_ids"]}
        if "attention_mask" in inputs and self._text_padding != "max_length":
            kwargs["attention_mask"] = inputs["attention_mask"]
        return _normalised(self._features(self._model.get_text_features(**kwargs)))


def from_spec(role: str, target: str, options: dict[str, Any], data_dir: Path) -> _BatchedEmbedder:
    """``open-clip:<architecture>`` or ``hf-clip:<dir or cached hub name>``.

    The registry does not pass the kind, so it is inferred from the target: open_clip architectures
    are bare names; transformers models are existing directories or ``org/name`` hub ids. An option
    ``kind = "open-clip"`` or ``"hf-clip"`` overrides the guess.
    """
    kind = str(options.get("kind", "")) or ("open-clip" if _is_open_clip_architecture(target) else "hf-clip")
    if kind == "open-clip":
        return OpenClipEmbedder(role, target, options)
    spec = f"hf-clip:{target}"
    return HFClipEmbedder(role, spec, resolve_local_model(role, spec, target), options)


def _is_open_clip_architecture(target: str) -> bool:
    return bool(target) and "/" not in target and not Path(target).expanduser().exists()
