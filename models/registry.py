"""Builds the backend for each model role from the settings, once per process.

A role's spec is ``kind:target`` (``minilm:embedded``, ``openai:qwen2.5-vl``, ``yolo:/w/yolo11n.pt``).
``kind`` selects a backend module, imported only when first used, so a missing optional
dependency fails with a message naming it instead of at import time. Each backend module has a
``from_spec(role, target, options, data_dir)`` factory; ``options`` are the settings'
``[models.options.<kind>]`` table.
"""

from __future__ import annotations

import importlib
import threading
from pathlib import Path
from typing import Any

from vidscope.core.errors import BackendUnavailable
from vidscope.core.hashing import stable_hash
from vidscope.core.settings import Settings

#: Model roles, in the order ``vidscope models`` lists them.
ROLES = (
    "text_embedder",
    "speech_recognizer",
    "text_reader",
    "captioner",
    "chat",
    "object_detector",
    "image_text",
)

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
    """Split ``kind:target``; a bare name is taken as the kind with an empty target."""
    kind, _, target = spec.partition(":")
    return kind.strip(), target.strip()


def load(settings: Settings, role: str) -> Any | None:
    """The backend serving ``role``, or ``None`` when the role is not configured.

    Raises :class:`BackendUnavailable` when it is configured but cannot be loaded.
    """
    if role not in ROLES:
        raise ValueError(f"unknown model role {role!r}; roles: {', '.join(ROLES)}")
    spec = getattr(settings.models, role)
    if not spec:
        return None
    kind, target = parse_spec(spec)
    options = settings.models.options.get(kind, {})
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


def clear_cache() -> None:
    """Forget every loaded backend (tests; after changing settings in-process)."""
    with _lock:
        _cache.clear()
