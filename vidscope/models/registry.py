"""Builds the backend for each model role from the settings, once per process.

A role's spec is ``kind:target`` (``minilm:embedded``, ``openai:qwen2.5-vl``, ``yolo:/w/yolo11n.pt``).
``kind`` selects a backend module, imported only when first used, so a missing optional
dependency fails with a message naming it instead of at import time. Each backend module has a
``from_spec(role, target, options, data_dir)`` factory (one that also takes ``model_cache`` gets the
user's model cache, shared by every data dir); ``options`` are the settings'
``[models.options.<kind>]`` table.

Each role has a typed loader (:func:`chat_model`, :func:`planner_model`, :func:`vision_model`,
:func:`captioner`, :func:`text_embedder`, :func:`image_text`, :func:`video_text`,
:func:`speech_recognizer`,
:func:`text_reader`, :func:`object_detector`) returning its protocol type, or ``None`` when the role
is not configured; :data:`LOADERS` maps role names to them for code that walks every role.

Two roles fall back to others, so configurations written before they existed keep working:
``planner`` and ``vlm`` are served by the ``chat`` backend (the same object) when unset, and an
unset ``captioner`` is served by the ``vlm`` when one is set explicitly (never by a ``chat``
fallback: a chat-only configuration must not start sending frames to a possibly text-only model).
:func:`effective_spec` says which spec serves a role, for cache keys and ``vidscope models``.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vidscope.core.errors import BackendUnavailable
from vidscope.core.hashing import stable_hash
from vidscope.core.settings import Settings, model_cache_dir
from vidscope.models.protocols.captioner import Captioner
from vidscope.models.protocols.chat import ChatModel
from vidscope.models.protocols.image_text import ImageTextEmbedder
from vidscope.models.protocols.object_detector import ObjectDetector
from vidscope.models.protocols.speech_recognizer import SpeechRecognizer
from vidscope.models.protocols.text_embedder import TextEmbedder
from vidscope.models.protocols.text_reader import TextReader
from vidscope.models.protocols.video_text import VideoTextEmbedder

#: Backend kind -> module (under vidscope.models) defining ``from_spec``.
BACKEND_MODULES: dict[str, str] = {
    "minilm": "sentence_embedder",
    "sentence-transformers": "sentence_embedder",
    "faster-whisper": "whisper",
    "rapidocr": "rapidocr_reader",
    "openai": "openai_compat",
    "transformers-vlm": "transformers_vlm",
    "transformers-chat": "transformers_chat",
    "open-clip": "clip",
    "onnx-clip": "onnx_clip",
    "hf-clip": "clip",
    "yolo": "yolo",
    "paddleocr": "paddle_reader",
    "xclip": "xclip",
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


#: Role -> the role that serves it when it is unset (see the module docstring).
FALLBACKS: dict[str, str] = {"planner": "chat", "vlm": "chat", "captioner": "vlm"}


def effective_spec(settings: Settings, role: str) -> str | None:
    """The spec that really serves ``role``: its own, else its fallback's (``None``: nobody).

    The captioner falls back only to an explicitly set ``vlm``, not through it to ``chat``.
    """
    models = settings.models
    spec: str | None = getattr(models, role)
    if spec:
        return spec
    if role == "captioner":
        return models.vlm or None
    fallback = FALLBACKS.get(role)
    return effective_spec(settings, fallback) if fallback else None


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
    cache = model_cache_dir(settings.model_cache)
    key = (role, spec, stable_hash(options, str(settings.data_dir), str(cache)))
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
    # A backend that keeps files in the user's model cache says so by taking it (onnx-clip, whisper).
    shared = {"model_cache": cache} if "model_cache" in inspect.signature(module.from_spec).parameters else {}
    backend = module.from_spec(role, target, options, Path(settings.data_dir), **shared)
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
    """The model captioning clips (``models.captioner``; unset, an explicitly set ``models.vlm``)."""
    if settings.models.captioner or not settings.models.vlm:
        return _load(settings, "captioner")
    vlm = vision_model(settings)
    if isinstance(vlm, Captioner):  # a backend that captions natively (transformers-vlm)
        return vlm
    # A chat backend wraps itself (openai: its own endpoint, its role's caption_* options).
    as_captioner = getattr(vlm, "as_captioner", None)
    if callable(as_captioner):
        made: Captioner = as_captioner()
        return made
    raise BackendUnavailable(
        "captioner",
        str(settings.models.vlm),
        "the vlm backend as captioner",
        "This backend cannot caption; set models.captioner explicitly.",
    )


def chat_model(settings: Settings) -> ChatModel | None:
    """The general chat model (``models.chat``): what ``planner`` and ``vlm`` fall back to."""
    return _load(settings, "chat")


def planner_model(settings: Settings) -> ChatModel | None:
    """The agent's reasoning model (``models.planner``, else the chat model); never sent images."""
    if settings.models.planner:
        return _load(settings, "planner")
    return chat_model(settings)


def vision_model(settings: Settings) -> ChatModel | None:
    """The model that looks at frames (``models.vlm``, else the chat model)."""
    if settings.models.vlm:
        return _load(settings, "vlm")
    return chat_model(settings)


def judge_model(settings: Settings) -> ChatModel | None:
    """The model judging free-form benchmark answers (``models.judge``; no fallback)."""
    return _load(settings, "judge")


def object_detector(settings: Settings) -> ObjectDetector | None:
    """The object detector (``models.object_detector``)."""
    return _load(settings, "object_detector")


def image_text(settings: Settings) -> ImageTextEmbedder | None:
    """The image–text embedder matching texts to frames (``models.image_text``)."""
    return _load(settings, "image_text")


def video_text(settings: Settings) -> VideoTextEmbedder | None:
    """The video–text embedder scoring whole clips against texts (``models.video_text``)."""
    return _load(settings, "video_text")


#: Each role's loader, in the order ``vidscope models`` lists them.
LOADERS: dict[str, Callable[[Settings], object | None]] = {
    "text_embedder": text_embedder,
    "speech_recognizer": speech_recognizer,
    "text_reader": text_reader,
    "captioner": captioner,
    "chat": chat_model,
    "planner": planner_model,
    "vlm": vision_model,
    "judge": judge_model,
    "object_detector": object_detector,
    "image_text": image_text,
    "video_text": video_text,
}

#: The model roles, in the order ``vidscope models`` lists them.
ROLES = tuple(LOADERS)


def clear_cache() -> None:
    """Forget every loaded backend (tests; after changing settings in-process)."""
    with _lock:
        _cache.clear()
    onnx_clip = sys.modules.get("vidscope.models.onnx_clip")
    if onnx_clip is not None:  # models that could not be had get another try too
        onnx_clip.forget_failures()
