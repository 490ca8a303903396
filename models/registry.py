"""Builds the backend for each model role from the settings, once per process.

A role's spec is ``kind:target`` (``minilm:embedded``, ``openai:qwen2.5-vl``, ``yolo:/w/yolo11n.pt``).
``kind`` selects a backend module, imported only when first used, so a missing optional
dependency fails with a message naming it instead of at import time. Each backend module has a
``from_spec(role, target, options, data_dir)`` factory; ``options`` are the settings'
``[models.options.<kind>]`` table.

Each role has a typed loader (:func:`chat_model`, :func:`captioner`, :func:`text_embedder`,
:func:`image_text`, :func:`speech_recognizer`, :func:`text_reader`, :func:`object_detector`)
returning its protocol type, or ``None`` when the role is not configured; :data:`LOADERS` maps role
names to them for code that walks every role.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vidscope.core.errors import BackendUnavailable
from vidscope.core.hashing import stable_hash
from vidscope.core.settings import Settings
from vidscope.models.protocols.captioner import Captioner
from vidscope.models.protocols.chat import ChatModel
from vidscope.models.protocols.image_text import ImageTextEmbedder
from vidscope.models.protocols.object_detector import ObjectDetector
from vidscope.models.protocols.speech_recognizer import SpeechRecognizer
from vidscope.models.protocols.text_embedder import TextEmbedder
from vidscope.models.protocols.text_reader import TextReader

#: Backend kind -> module (under vidscope.models) defining ``from_spec``.
BACKEND_MODULES: dict[str, str] = {
    "minilm": "sentence_embedder",
    "sentence-transformers": "sentence_embedder",
    "faster-whisper": "whisper",
    "rapidocr": "rapidocr_reader",
    "openai": "openai_compat",
    "transformers-vlm": "transformers_vlm",
    "open-clip": "clip",
    "hf-clip": "clip",
    "yolo": "yolo",
    "paddleocr": "paddle_reader",
}

_cache: dict[tuple[str, str, str], Any] = {}
_lock = threading.Lock()


def parse_spec(spec: str) -> tuple[str, str]:
    """Split ``kind:target``; a bare name is taken as the kind with an empty target.

    The only parser of model specs: everything that needs a spec's kind asks here.
    """
    kind, _, target = spec.partition(":")
    return kind.strip(), target.strip()


def backend_options(settings: Settings, spec: str | None) -> dict[str, Any]:
    """The ``[models.options.<kind>]`` table of the backend kind ``spec`` names (empty if none)."""
    if not spec:
        return {}
    return settings.models.options.get(parse_spec(spec)[0], {})


def _load(settings: Settings, role: str) -> Any:
    """The backend serving ``role``, or ``None`` when the role is not configured.

    Backends are built once per process for each (role, spec, options, data dir). Raises
    :class:`BackendUnavailable` when the role is configured but cannot be loaded.
    """
    spec = getattr(settings.models, role)
    if not spec:
        return None
    kind, target = parse_spec(spec)
    options = backend_options(settings, spec)
    key = (role, spec, stable_hash(options, str(settings.data_dir)))
    with _lock:
        if key in _cache:
            return _cache[key]
    module_name = BACKEND_MODULES.get(kind)
    if module_name is None:
        raise BackendUnavailable(
            role,
            spec,
            "the backend registry",
            f"Unknown backend kind '{kind}'; known kinds: {', '.join(sorted(BACKEND_MODULES))}.",
        )
    module = importlib.import_module(f"vidscope.models.{module_name}")
    backend = module.from_spec(role, target, options, Path(settings.data_dir))
    with _lock:
        return _cache.setdefault(key, backend)


# The typed loaders, one per role. Each returns None when its role is not configured and raises
# BackendUnavailable when it is configured but cannot be loaded.


def text_embedder(settings: Settings) -> TextEmbedder | None:
    """The model embedding texts for semantic search (``models.text_embedder``)."""
    return _load(settings, "text_embedder")


def speech_recognizer(settings: Settings) -> SpeechRecognizer | None:
    """The model transcribing speech (``models.speech_recognizer``)."""
    return _load(settings, "speech_recognizer")


def text_reader(settings: Settings) -> TextReader | None:
    """The OCR model reading on-screen text (``models.text_reader``)."""
    return _load(settings, "text_reader")


def captioner(settings: Settings) -> Captioner | None:
    """The model captioning clips (``models.captioner``)."""
    return _load(settings, "captioner")


def chat_model(settings: Settings) -> ChatModel | None:
    """The chat model that plans, answers and calls tools (``models.chat``)."""
    return _load(settings, "chat")


def object_detector(settings: Settings) -> ObjectDetector | None:
    """The object detector (``models.object_detector``)."""
    return _load(settings, "object_detector")


def image_text(settings: Settings) -> ImageTextEmbedder | None:
    """The image–text embedder matching texts to frames (``models.image_text``)."""
    return _load(settings, "image_text")


#: Each role's loader, in the order ``vidscope models`` lists them.
LOADERS: dict[str, Callable[[Settings], object | None]] = {
    "text_embedder": text_embedder,
    "speech_recognizer": speech_recognizer,
    "text_reader": text_reader,
    "captioner": captioner,
    "chat": chat_model,
    "object_detector": object_detector,
    "image_text": image_text,
}

#: The model roles, in the order ``vidscope models`` lists them.
ROLES = tuple(LOADERS)


def clear_cache() -> None:
    """Forget every loaded backend (tests; after changing settings in-process)."""
    with _lock:
        _cache.clear()
