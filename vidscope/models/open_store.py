"""The process-wide :class:`~vidscope.storage.Store` for a configuration.

The store's vector columns must match the configured embedders' dimensions, so opening it needs to
know them: known model specs have their size listed here; any other embedder is loaded once to ask.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from vidscope.core.settings import Settings
from vidscope.models import registry
from vidscope.models.protocols.image_text import ImageTextEmbedder
from vidscope.models.protocols.text_embedder import TextEmbedder
from vidscope.models.protocols.video_text import VideoTextEmbedder
from vidscope.storage import Store
from vidscope.storage.location import storage_options
from vidscope.storage.store import DEFAULT_IMAGE_DIM, DEFAULT_TEXT_DIM, DEFAULT_VIDEO_DIM

#: Embedding sizes of specs that need not be loaded to be known.
KNOWN_DIMS = {
    "minilm:embedded": 384,
    "sentence-transformers:BAAI/bge-m3": 1024,
    "open-clip:ViT-B-32": 512,
    "onnx-clip:clip-vit-b32-int8": 512,
}

_stores: dict[tuple[str, int, int, int], Store] = {}
_lock = threading.Lock()


def _dim(
    spec: str | None,
    load: Callable[[], TextEmbedder | ImageTextEmbedder | VideoTextEmbedder | None],
    default: int,
) -> int:
    """Vector size of the model ``spec`` names: the default when none, listed, or loaded."""
    if not spec:
        return default
    if spec in KNOWN_DIMS:
        return KNOWN_DIMS[spec]
    model = load()
    # A configured spec never loads as None: the registry raises BackendUnavailable instead.
    assert model is not None
    return int(model.dim)


def embedding_dims(settings: Settings) -> tuple[int, int, int]:
    """(text_dim, image_dim, video_dim) of the configured text embedder, image–text and video–text
    models."""
    models = settings.models
    return (
        _dim(models.text_embedder, lambda: registry.text_embedder(settings), DEFAULT_TEXT_DIM),
        _dim(models.image_text, lambda: registry.image_text(settings), DEFAULT_IMAGE_DIM),
        _dim(models.video_text, lambda: registry.video_text(settings), DEFAULT_VIDEO_DIM),
    )


def open_store(settings: Settings) -> Store:
    """The store under ``settings.data_dir``, shared by every thread of this process."""
    text_dim, image_dim, video_dim = embedding_dims(settings)
    key = (str(settings.data_dir.expanduser().resolve()), text_dim, image_dim, video_dim)
    with _lock:
        if key not in _stores:
            storage = settings.storage
            _stores[key] = Store(
                settings.data_dir,
                text_dim=text_dim,
                image_dim=image_dim,
                video_dim=video_dim,
                tables_uri=storage.uri,
                storage_options=storage_options(**storage.model_dump(exclude={"uri"})),
            )
        return _stores[key]
