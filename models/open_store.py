"""The process-wide :class:`~vidscope.storage.Store` for a configuration.

The store's vector columns must match the configured embedders' dimensions, so opening it needs to
know them: known model specs have their size listed here; any other embedder is loaded once to ask.
"""

from __future__ import annotations

import threading

from vidscope.core.settings import Settings
from vidscope.models import registry
from vidscope.storage import Store
from vidscope.storage.store import DEFAULT_IMAGE_DIM, DEFAULT_TEXT_DIM

#: Embedding sizes of specs that need not be loaded to be known.
KNOWN_DIMS = {
    "minilm:embedded": 384,
    "sentence-transformers:BAAI/bge-m3": 1024,
    "open-clip:ViT-B-32": 512,
}

_stores: dict[tuple[str, int, int], Store] = {}
_lock = threading.Lock()


def _dim(settings: Settings, role: str, default: int) -> int:
    """Vector size of the model serving ``role``: the default when none, listed, or loaded."""
    spec = getattr(settings.models, role)
    if not spec:
        return default
    if spec in KNOWN_DIMS:
        return KNOWN_DIMS[spec]
    return int(registry.load(settings, role).dim)


def embedding_dims(settings: Settings) -> tuple[int, int]:
    """(text_dim, image_dim) of the configured text embedder and image–text model."""
    return (
        _dim(settings, "text_embedder", DEFAULT_TEXT_DIM),
        _dim(settings, "image_text", DEFAULT_IMAGE_DIM),
    )


def open_store(settings: Settings) -> Store:
    """The store under ``settings.data_dir``, shared by every thread of this process."""
    text_dim, image_dim = embedding_dims(settings)
    key = (str(settings.data_dir.expanduser().resolve()), text_dim, image_dim)
    with _lock:
        if key not in _stores:
            _stores[key] = Store(settings.data_dir, text_dim=text_dim, image_dim=image_dim)
        return _stores[key]
