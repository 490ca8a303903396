"""Reading a bundle without trusting it: its manifest and Parquet files, checked and size-bounded.

A bundle comes from another machine, possibly from someone else, so everything in it is checked
here before :func:`vidscope.storage.bundle.import_bundle` writes a single row:

* ``manifest.json`` is a regular file of at most ``max_manifest_bytes``, names at most
  ``max_videos`` distinct videos, each by a content hash (64 hex digits), and row counts only for
  tables this store has;
* each table file is a regular file inside the bundle folder (never a symbolic link: it could make
  the import read any file of this machine), non-empty, a readable Parquet file with exactly the
  table's columns and types and the row count the manifest states;
* its decoded size is bounded *before* reading, from the file's metadata: the values each column
  chunk holds (a list's items included) must average at most ``max_list_items`` a row for a list
  column, and their size at their type's width must fit what is left of the budget (a 5 KB file
  holding 100 M run-length-encoded list items otherwise decodes to gigabytes in one batch);
  batches are sized from the same numbers to stay near :data:`BATCH_BYTES`;
* and *while reading*: the pages' decompressed sizes the file declares are counted first, then
  string and binary columns are read dictionary-encoded, batch by batch, and the size they would
  have once decoded is added up before a batch is decoded (a 4 KB file whose dictionary holds one
  long value repeated a million times otherwise decodes to gigabytes). All the bundle's tables
  share one budget of ``max_bytes``;
* every row belongs to a video the manifest names, no video has more than ``max_rows_per_video``
  rows in a table, natural keys are unique and never null, and required columns hold no nulls;
* every number is finite (no NaN, no infinity, in vectors too), and every time, duration, size,
  count, index and score is not negative (only :data:`SIGNED_COLUMNS`, vectors and boxes may be):
  a NaN duration otherwise reaches ``show`` and the agents as a crash far from the import.

The limits are :class:`~vidscope.core.settings.BundleSettings` (``[bundle]`` in ``vidscope.toml``).
What remains trusted is Parquet's own page headers: a crafted page can make the reader allocate
the size its header claims before this module sees the decoded values.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel

from vidscope.core.settings import BundleSettings
from vidscope.storage.schema import SCHEMA_VERSION, TableSpec
from vidscope.storage.store import StoreError

MANIFEST = "manifest.json"
#: Version of the bundle layout (files and manifest fields), independent of the table schemas.
BUNDLE_FORMAT = 1
#: A video id is the SHA-256 of the file's content.
VIDEO_ID = re.compile(r"[0-9a-f]{64}")
#: Rows decoded at a time; small enough that one batch of ordinary rows is a few MB.
BATCH_ROWS = 1024
#: What one batch may decode to, by the metadata's count (fewer rows when rows are large).
BATCH_BYTES = 32 * 1024**2
#: Bytes a decoded value takes at least, by Parquet physical type (strings: their offset).
_VALUE_BYTES = {"BOOLEAN": 1, "INT32": 4, "FLOAT": 4, "INT64": 8, "DOUBLE": 8, "INT96": 12}
#: Number columns that may be negative (a log-probability, a tracker's id). Every other number of
#: a table, outside fixed-size lists (embeddings, boxes), is a time, duration, size, count, index
#: or score.
SIGNED_COLUMNS = frozenset({"avg_logprob", "track_id"})


class BundleError(StoreError):
    """A bundle that cannot be written into this store (other embedding model, damaged, …)."""


class BundleManifest(BaseModel):
    """What ``manifest.json`` records about a bundle."""

    format: int = BUNDLE_FORMAT
    schema_version: int = SCHEMA_VERSION
    created_at: str
    text_dim: int
    image_dim: int
    #: Absent from bundles written before the ``video_text`` role existed (they hold no clip video
    #: vectors, so any size fits).
    video_dim: int | None = None
    #: The model spec serving each role where the bundle was built (``{"captioner": "openai:…"}``).
    models: dict[str, str | None]
    #: The embedders named on the exported clips' vectors: what actually made them.
    clip_embed_models: list[str]
    videos: list[str]
    #: Rows per table file (``{"clips": 12}``); tables without rows have no file.
    tables: dict[str, int]
    #: ``{video_id: {stage: stage_version}}`` from the exported ledger.
    stages: dict[str, dict[str, int]]


def _regular_file(path: Path, what: str) -> os.stat_result:
    """The ``lstat`` of ``path``, which must be a regular file (not a link, device or folder)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError as exc:
        raise BundleError(f"{path.parent} lacks {path.name} ({what})") from exc
    except OSError as exc:
        raise BundleError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if stat.S_ISLNK(info.st_mode):
        raise BundleError(f"{path} is a symbolic link; a bundle holds only its own files")
    if not stat.S_ISREG(info.st_mode):
        raise BundleError(f"{path} is not a regular file")
    if info.st_size == 0:
        raise BundleError(f"{path} is empty")
    return info


def _open_no_follow(path: Path) -> int:
    """A read-only descriptor of ``path`` that refuses a link swapped in after the check."""
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise BundleError(f"cannot read {path}: {exc.strerror or exc}") from exc


def read_manifest(folder: Path | str, limits: BundleSettings | None = None) -> BundleManifest:
    """The manifest of the bundle in ``folder``; a clear error when it is not a bundle or breaks
    the limits."""
    limits = limits or BundleSettings()
    folder = Path(folder).expanduser()
    path = folder / MANIFEST
    if not folder.is_dir() or not os.path.lexists(path):
        raise BundleError(f"{folder} is not a vidscope bundle (no {MANIFEST})")
    info = _regular_file(path, "the manifest")
    if info.st_size > limits.max_manifest_bytes:
        raise BundleError(
            f"{path} is {info.st_size:,} bytes, over the limit of {limits.max_manifest_bytes:,} "
            f"(bundle.max_manifest_bytes)"
        )
    with os.fdopen(_open_no_follow(path), "rb") as handle:
        raw = handle.read(limits.max_manifest_bytes + 1)
    try:
        manifest = BundleManifest.model_validate(json.loads(raw.decode("utf-8")))
    except (ValueError, TypeError) as exc:
        raise BundleError(f"{path} is damaged: {str(exc).splitlines()[0]}") from exc
    if manifest.format != BUNDLE_FORMAT or manifest.schema_version != SCHEMA_VERSION:
        raise BundleError(
            f"{folder} has bundle format {manifest.format}, schema {manifest.schema_version}; "
            f"this vidscope reads format {BUNDLE_FORMAT}, schema {SCHEMA_VERSION}"
        )
    videos = manifest.videos
    if not videos:
        raise BundleError(f"{path} names no videos")
    if len(videos) > limits.max_videos:
        raise BundleError(
            f"{path} names {len(videos):,} videos, over the limit of {limits.max_videos:,} "
            f"(bundle.max_videos); export the library as several bundles"
        )
    if len(set(videos)) != len(videos):
        raise BundleError(f"{path} names a video twice")
    bad = next((v for v in videos if not VIDEO_ID.fullmatch(v)), None)
    if bad is not None:
        raise BundleError(f"{path} names {bad[:80]!r}, which is not a video id (64 hex digits)")
    negative = next((name for name, rows in manifest.tables.items() if rows < 0), None)
    if negative is not None:
        raise BundleError(f"{path} gives {negative} a negative row count")
    return manifest


def check_table_names(manifest: BundleManifest, specs: Sequence[TableSpec], folder: Path) -> None:
    """Refuse a manifest counting rows of tables this store does not have."""
    known = {spec.name for spec in specs}
    unknown = sorted(name for name, rows in manifest.tables.items() if rows and name not in known)
    if unknown:
        raise BundleError(f"{folder / MANIFEST} counts rows of unknown tables: {', '.join(unknown)}")


class ByteBudget:
    """What is left of ``bundle.max_bytes`` for the tables still to read."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def spend(self, amount: int, where: Path) -> None:
        """Count ``amount`` more bytes against the budget; refuse the bundle when it runs out."""
        self.used += amount
        self.require(0, where)

    def require(self, amount: int, where: Path) -> None:
        """Refuse the bundle when ``amount`` more bytes would not fit (nothing is counted)."""
        if self.used + amount > self.limit:
            raise BundleError(
                f"{where} decodes to more than the {self.limit:,} bytes a bundle may hold "
                f"(bundle.max_bytes); export fewer videos per bundle"
            )


def _byte_array_columns(parquet: pq.ParquetFile) -> list[str]:
    """The paths of the file's string/binary leaves (``words.list.element.word``)."""
    schema = parquet.schema
    return [
        schema.column(i).path for i in range(len(schema)) if schema.column(i).physical_type == "BYTE_ARRAY"
    ]


def _list_factor(kind: pa.DataType, items: int) -> int:
    """How many leaf values one row of a column of type ``kind`` may hold (``items`` per list)."""
    if pa.types.is_fixed_size_list(kind):
        return int(kind.list_size) * _list_factor(kind.value_type, items)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return items * _list_factor(kind.value_type, items)
    if pa.types.is_struct(kind):
        return max((_list_factor(kind.field(i).type, items) for i in range(kind.num_fields)), default=1)
    return 1


def metadata_budget(parquet: pq.ParquetFile, spec: TableSpec, path: Path, items: int) -> int:
    """The least the file decodes to, from its metadata alone (values each column chunk holds,
    at their type's width); refuses a list column averaging more than ``items`` a row."""
    meta = parquet.metadata
    total = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        rows = max(1, group.num_rows)
        for c in range(group.num_columns):
            chunk = group.column(c)
            top = chunk.path_in_schema.split(".")[0]
            kind = spec.schema.field(top).type if top in spec.schema.names else pa.null()
            allowed = _list_factor(kind, items)
            if chunk.num_values > rows * allowed:
                found = f"{path} column {top} holds {chunk.num_values:,} values in {group.num_rows:,} rows"
                if allowed == _list_factor(kind, 1):  # no list of any length: the file lies
                    raise BundleError(f"{found}, more than its type allows; the file is damaged")
                raise BundleError(
                    f"{found}, over {items:,} list items a row (bundle.max_list_items); nothing was decoded"
                )
            total += chunk.num_values * _VALUE_BYTES.get(chunk.physical_type, 8)
    return total


def decoded_bytes(array: pa.Array) -> int:
    """The size ``array`` will have once its dictionary-encoded strings are decoded.

    Computed from the dictionary's value lengths and the indices, without decoding anything.
    """
    if isinstance(array, pa.ChunkedArray):
        return sum(decoded_bytes(chunk) for chunk in array.chunks)
    kind = array.type
    if pa.types.is_dictionary(kind):
        assert isinstance(array, pa.DictionaryArray)
        lengths = pc.take(pc.binary_length(array.dictionary), array.indices)
        total = pc.sum(lengths).as_py() or 0
        return int(total) + 8 * len(array)  # values plus one offset (and validity) per row
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        assert isinstance(array, (pa.ListArray, pa.LargeListArray, pa.FixedSizeListArray))
        return decoded_bytes(array.flatten()) + 8 * len(array)
    if pa.types.is_struct(kind):
        assert isinstance(array, pa.StructArray)
        return sum(decoded_bytes(child) for child in array.flatten()) + len(array)
    return int(array.nbytes)


def _same_type(ours: pa.DataType, theirs: pa.DataType) -> bool:
    """Equal types, whatever the file calls a list's item field (``item`` or ``element``)."""
    if ours.equals(theirs):
        return True
    list_kinds = (pa.types.is_list, pa.types.is_large_list, pa.types.is_fixed_size_list)
    for is_kind in list_kinds:
        if is_kind(ours) and is_kind(theirs):
            if pa.types.is_fixed_size_list(ours) and ours.list_size != theirs.list_size:
                return False
            return _same_type(ours.value_type, theirs.value_type)
    if pa.types.is_struct(ours) and pa.types.is_struct(theirs):
        return ours.num_fields == theirs.num_fields and all(
            ours.field(i).name == theirs.field(i).name
            and _same_type(ours.field(i).type, theirs.field(i).type)
            for i in range(ours.num_fields)
        )
    return False


def _check_schema(path: Path, spec: TableSpec, actual: pa.Schema) -> None:
    expected = spec.schema
    if sorted(actual.names) != sorted(expected.names):
        missing = sorted(set(expected.names) - set(actual.names))
        extra = sorted(set(actual.names) - set(expected.names))
        detail = "; ".join(
            part
            for part in (
                f"missing {', '.join(missing)}" if missing else "",
                f"unknown {', '.join(extra[:5])}" if extra else "",
            )
            if part
        )
        raise BundleError(f"{path} does not have the columns of table {spec.name} ({detail or 'duplicates'})")
    for field in expected:
        theirs = actual.field(field.name).type
        if not _same_type(field.type, theirs):
            raise BundleError(f"{path} column {field.name} is {theirs}, table {spec.name} needs {field.type}")


def _batches(
    parquet: pq.ParquetFile, path: Path, spec: TableSpec, budget: ByteBudget, rows: int
) -> Iterator[pa.RecordBatch]:
    """The file's rows, ``rows`` at a time, each batch counted against the budget before it is
    decoded."""
    for batch in parquet.iter_batches(batch_size=rows):
        budget.spend(sum(decoded_bytes(column) for column in batch.columns), path)
        yield pa.RecordBatch.from_arrays(
            [batch.column(name).cast(spec.schema.field(name).type) for name in spec.schema.names],
            schema=spec.schema,
        )


def read_table_file(
    folder: Path, spec: TableSpec, rows: int, budget: ByteBudget, limits: BundleSettings, videos: int
) -> pa.Table:
    """The ``rows`` rows of ``spec`` in ``folder``, read within the limits (see the module doc)."""
    path = folder / f"{spec.name}.parquet"
    ceiling = limits.max_rows_per_video * max(1, videos)
    if rows > ceiling:
        raise BundleError(
            f"{folder / MANIFEST} gives {spec.name} {rows:,} rows, over {limits.max_rows_per_video:,} per "
            f"video (bundle.max_rows_per_video)"
        )
    info = _regular_file(path, f"{rows} rows in the manifest")
    budget.spend(info.st_size, path)
    with os.fdopen(_open_no_follow(path), "rb") as handle:
        try:
            parquet = pq.ParquetFile(handle)
            meta = parquet.metadata
            if meta.num_rows != rows:
                raise BundleError(f"{path} has {meta.num_rows:,} rows, the manifest says {rows:,}")
            _check_schema(path, spec, parquet.schema_arrow)
            # What the file says its pages decompress to: a bound for files written honestly.
            declared = sum(
                meta.row_group(g).column(c).total_uncompressed_size
                for g in range(meta.num_row_groups)
                for c in range(meta.num_columns)
            )
            budget.spend(declared, path)
            least = metadata_budget(parquet, spec, path, limits.max_list_items)
            budget.require(least, path)
            batch_rows = max(1, min(BATCH_ROWS, BATCH_BYTES * max(1, meta.num_rows) // max(1, least)))
            handle.seek(0)
            encoded = pq.ParquetFile(handle, read_dictionary=_byte_array_columns(parquet))
            batches = list(_batches(encoded, path, spec, budget, batch_rows))
            table = pa.Table.from_batches(batches, schema=spec.schema)
        except BundleError:
            raise
        except (pa.ArrowException, OSError, ValueError, TypeError, LookupError) as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BundleError(f"{path} is damaged: {reason[:200]}") from exc
    if table.num_rows != rows:
        raise BundleError(f"{path} has {table.num_rows:,} rows, the manifest says {rows:,}")
    return table


def _bad_number(values: pa.Array | pa.ChunkedArray, name: str, signed: bool) -> tuple[str, str] | None:
    """The first (column path, what) of ``values`` that is not finite, or negative unless
    ``signed``; ``None`` when all are fine. Lists and structs are looked into."""
    if isinstance(values, pa.ChunkedArray):
        for chunk in values.chunks:
            if (found := _bad_number(chunk, name, signed)) is not None:
                return found
        return None
    kind = values.type
    if pa.types.is_fixed_size_list(kind):  # vectors and boxes: any sign, but finite
        assert isinstance(values, pa.FixedSizeListArray)
        return _bad_number(values.flatten(), name, True)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        assert isinstance(values, (pa.ListArray, pa.LargeListArray))
        return _bad_number(values.flatten(), name, signed)
    if pa.types.is_struct(kind):
        assert isinstance(values, pa.StructArray)
        for i in range(kind.num_fields):
            child = kind.field(i).name
            found = _bad_number(values.field(i), f"{name}.{child}", signed or child in SIGNED_COLUMNS)
            if found is not None:
                return found
        return None
    if pa.types.is_floating(kind):
        bad = pc.invert(pc.is_finite(values))
        if pc.any(bad).as_py():
            value = pc.filter(values, bad)[0].as_py()
            return name, "NaN" if value != value else f"{value} (not a finite number)"
    if not signed and (pa.types.is_floating(kind) or pa.types.is_integer(kind)):
        negative = pc.less(values, pa.scalar(0, kind))
        if pc.any(negative).as_py():
            return name, f"the negative number {pc.filter(values, negative)[0].as_py()}"
    return None


def check_numbers(path: Path, spec: TableSpec, table: pa.Table) -> None:
    """Refuse a NaN or infinite number anywhere, or a negative one where none can be."""
    for field in spec.schema:
        found = _bad_number(table.column(field.name), field.name, field.name in SIGNED_COLUMNS)
        if found is not None:
            column, what = found
            raise BundleError(
                f"{path} column {column} holds {what}; times, durations, sizes and scores must be "
                f"finite and not negative"
            )


def check_rows(
    path: Path, spec: TableSpec, table: pa.Table, videos: Sequence[str], limits: BundleSettings
) -> None:
    """Refuse rows of videos the manifest does not name, too many per video, null or repeated keys,
    numbers that are not finite or negative where none can be."""
    for field in spec.schema:
        if (not field.nullable or field.name in spec.keys) and table.column(field.name).null_count:
            raise BundleError(f"{path} has rows without {field.name}")
    check_numbers(path, spec, table)
    if "video_id" in spec.schema.names:
        ids = table.column("video_id")
        outside = pc.invert(pc.is_in(ids, value_set=pa.array(list(videos), pa.string())))
        if pc.any(outside).as_py():
            stranger = pc.filter(ids, outside)[0].as_py()
            raise BundleError(
                f"{path} holds rows of video {str(stranger)[:64]}, which the manifest does not name"
            )
        counts = pc.value_counts(ids)
        most = pc.max(counts.field("counts")).as_py() or 0
        if most > limits.max_rows_per_video:
            raise BundleError(
                f"{path} gives one video {most:,} rows, over the limit of {limits.max_rows_per_video:,} "
                f"(bundle.max_rows_per_video)"
            )
    keys = list(spec.keys)
    if table.num_rows:
        grouped = table.select(keys).group_by(keys).aggregate([([], "count_all")])
        if grouped.num_rows != table.num_rows:
            raise BundleError(f"{path} repeats a key ({', '.join(keys)}): the bundle is damaged")
