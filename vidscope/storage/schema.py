"""Table specifications shared by every table family.

Each table is described once, by a :class:`TableSpec`: its name, an explicit pyarrow schema that
carries the schema version in its metadata, and the natural key that makes writes idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

#: Bumped whenever a table's columns change incompatibly; stored in each table's schema metadata.
SCHEMA_VERSION = 1
SCHEMA_VERSION_KEY = b"vidscope.schema_version"


@dataclass(frozen=True)
class TableSpec:
    """A LanceDB table: name, schema (with version metadata) and natural key columns."""

    name: str
    schema: pa.Schema
    keys: tuple[str, ...]
    #: Column holding the vector that corpus-wide ANN search uses, if any.
    vector_column: str | None = None
    #: Column with full-text search, if any.
    text_columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        missing = [k for k in self.keys if k not in self.schema.names]
        if missing:
            raise ValueError(f"table {self.name}: key columns {missing} are not in the schema")


def versioned(fields: list[pa.Field]) -> pa.Schema:
    """A schema with the current :data:`SCHEMA_VERSION` in its metadata."""
    return pa.schema(fields, metadata={SCHEMA_VERSION_KEY: str(SCHEMA_VERSION).encode()})


def vector_type(dim: int) -> pa.DataType:
    """The Arrow type LanceDB indexes as a vector: a fixed-size list of float32."""
    return pa.list_(pa.float32(), dim)


def sql_quote(value: str) -> str:
    """A SQL string literal for LanceDB filters (single quotes doubled)."""
    return "'" + value.replace("'", "''") + "'"
