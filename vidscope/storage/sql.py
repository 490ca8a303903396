"""Read-only SQL over the store with an in-process DuckDB.

DuckDB never opens a database file here: each connection is in-memory, with every Lance table
registered as a view of its Lance dataset. So any number of processes can query while others write,
and there is no DuckDB file lock to contend for. External access (files, ATTACH, COPY … TO) is
switched off and locked before user SQL runs, which keeps ``vidscope sql`` read-only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import duckdb

if TYPE_CHECKING:
    from vidscope.storage.store import Store


class SqlError(ValueError):
    """A query DuckDB refused (syntax, unknown table, a write attempt)."""


def connect(store: Store) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory DuckDB connection with every store table registered under its name."""
    con = duckdb.connect(":memory:")
    for spec in store.all_specs:
        # A table never written is an empty table of its schema: creating it would need LanceDB.
        dataset = store.existing_dataset(spec)
        con.register(spec.name, dataset if dataset is not None else spec.schema.empty_table())
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def query(store: Store, sql: str) -> tuple[list[str], list[tuple[object, ...]]]:
    """Run ``sql`` read-only; returns column names and rows. Raises :class:`SqlError` on refusal."""
    con = connect(store)
    try:
        cursor = con.execute(sql)
        columns = [d[0] for d in cursor.description or []]
        return columns, cursor.fetchall()
    except duckdb.Error as exc:
        raise SqlError(str(exc).splitlines()[0]) from exc
    finally:
        con.close()
