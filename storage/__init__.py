"""Storage: LanceDB tables (system of record) and read-only DuckDB SQL over them.

Use :class:`Store` for every read and write; the table-family modules (``videos``, ``clips``,
``frames``, ``transcripts``, ``ocr``, ``detections``, ``ledger``) define each table's schema.
"""

from vidscope.storage.schema import SCHEMA_VERSION, TableSpec
from vidscope.storage.store import Store, StoreError

__all__ = ["SCHEMA_VERSION", "Store", "StoreError", "TableSpec"]
