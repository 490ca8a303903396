"""The process-wide :class:`~vidscope.storage.Store` for a configuration.

The store's vector columns must match the configured embedders' dimensions, so opening it needs to
know them: known model specs have their size listed here; any other embedder is loaded once to ask.
"""

from __future__ import annotations

import threading

from vidscope.config import Settings
from vidscope.storage import Store
from vidscope.storage.store import DEFAULT_IMAGE_DIM, DEFAULT_TEXT_DIM
from vidscope.tasks.backends import registry

#: Embedding sizes of specs that need not be loaded to be known.
KNOWN_DIMS = {
    "minilm:embedded": 384,
    "sentence-transformers:BAAI/bge-m3": 1024,
    "open-clip:ViT-B-32": 512,
}

_stores: dict[tuple[str, int, int], Store] = {}
_lock = threading.Lock()


def embedding_dims(settings: Settings) -> tuple[int, int]:
    """(text_dim, image_dim) of the configured text embedder and image–text model."""
    text_spec = settings.models.text_embedder
    if not text_spec:
        text_dim = DEFAULT_TEXT_DIM
    elif text_spec in KNOWN_DIMS:
        text_dim = KNOWN_DIMS[text_spec]
    else:
        text_dim = int(registry.load(settings, "text_embedder").dim)
    image_spec = settings.models.image_text
    if not image_spec:
        image_dim = DEFAULT_IMAGE_DIM
    elif image_spec in KNOWN_DIMS:
        image_dim = KNOWN_DIMS[image_spec]
    else:
        image_dim = int(registry.load(settings, "image_text").dim)
    return text_dim, image_dim


def open_store(settings: Settings) -> Store:
    """The store under ``settings.data_dir``, shared by every thread of this process."""
    text_dim, image_dim = embedding_dims(settings)
    key = (str(settings.data_dir.expanduser().resolve()), text_dim, image_dim)
    with _lock:
        if key not in _stores:
            _stores[key] = Store(settings.data_dir, text_dim=text_dim, image_dim=image_dim)
        return _stores[key]
