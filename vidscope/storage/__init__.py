"""Storage: LanceDB tables (system of record) and read-only DuckDB SQL over them.

Use :class:`Store` for every read and write; the table-family modules (``videos``, ``clips``,
``frames``, ``transcripts``, ``ocr``, ``detections``, ``ledger``) define each table's schema.

The names below are loaded on first use: ``vidscope.storage.files`` (paths only) must not pull in
pyarrow and NumPy, ~0.3 s, for a command that never opens the store.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vidscope.storage.schema import SCHEMA_VERSION, TableSpec
    from vidscope.storage.store import Store, StoreError

__all__ = ["SCHEMA_VERSION", "Store", "StoreError", "TableSpec"]

_HOMES = {
    "SCHEMA_VERSION": "vidscope.storage.schema",
    "TableSpec": "vidscope.storage.schema",
    "Store": "vidscope.storage.store",
    "StoreError": "vidscope.storage.store",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
